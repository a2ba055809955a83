# serverlab: `make demo` and `make test` set up and run everything on a fresh machine.
# Everything the project needs is installed from here (apt-get, pip into .venv/, cargo,
# Maven, npm, Go modules); nothing is expected to be installed by hand.

SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
SERVERLAB := $(VENV)/bin/serverlab
# Debian packages the project itself needs (contestants list theirs in their manifests).
DEBIAN_PACKAGES := util-linux iproute2 e2fsprogs sqlite3 chromium wrk apache2-utils nghttp2-client httperf nginx-light openssl
# Peers only the benchmarks run (Tsung pulls in Erlang): installed by `make bench`, not by tests.
BENCH_PACKAGES := tsung curl slowhttptest

.PHONY: all build deps venv engine delayline contestants test test-python test-engine test-contestants verify lint demo demo-lab bench soak clean

all: build

build: venv engine delayline contestants

deps:
	@scripts/apt-ensure $(DEBIAN_PACKAGES)

$(VENV)/.stamp: requirements.txt pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $@

venv: $(VENV)/.stamp

engine:
	@if [ -f engine/Cargo.toml ]; then cd engine && cargo build --release --locked; \
	 else echo "engine: not yet available"; fi

# The shaped links' own delay line, for kernels without netem (serverlab.base.delayline; the lab's links use it too).
delayline:
	cd tools/delayline && cargo build --release --locked

contestants: venv deps
	$(SERVERLAB) build

lint: venv
	$(VENV)/bin/ruff check serverlab tests
	$(VENV)/bin/ruff format --check serverlab tests
	$(VENV)/bin/lint-imports
	scripts/engine-layers
	scripts/python-cycles
	scripts/class-names
	@if [ -f engine/Cargo.toml ]; then cd engine && cargo fmt --check && cargo clippy --release --locked --all-targets -- -D warnings; fi
	cd tools/delayline && cargo fmt --check && cargo clippy --release --locked --all-targets -- -D warnings

test: build lint test-python test-engine test-contestants verify

# Most of the suite waits on real servers, so tests run side by side; the virtual lab's
# tests share one lab and go to one worker (xdist_group "lab"). Tests marked `alone` judge
# the machine's other load, so they run afterwards with nothing beside them.
PYTEST_WORKERS ?= 3
test-python: venv
	$(VENV)/bin/pytest -q -n $(PYTEST_WORKERS) --dist loadgroup -m "not alone" tests
	$(VENV)/bin/pytest -q -m alone tests

test-engine:
	@if [ -f engine/Cargo.toml ]; then cd engine && cargo test --profile tests --locked; fi

# Each contestant's own formatter, linter and unit tests (its manifest's `test` command).
test-contestants: venv
	$(SERVERLAB) contestant-tests

verify: venv
	$(SERVERLAB) verify --all --jobs 2

demo: build
	$(SERVERLAB) run suites/quick.toml --rerun-busy 1
	$(SERVERLAB) report --summary -o results/report.html
	@echo "report: $(CURDIR)/results/report.html   database: $(CURDIR)/results/lab.db"

# A distributed run on one box: the virtual lab (a head, a server host, two generator
# hosts, each a Ray node in a network namespace), the quick suite's fast requests spread
# over both generators, the report, and the lab taken down again.
demo-lab: build
	$(SERVERLAB) lab up --generators 2
	$(SERVERLAB) run suites/quick.toml --ray lab --repeats 1 --db results/lab-demo.db; \
	  status=$$?; $(SERVERLAB) lab down; exit $$status
	$(SERVERLAB) report --db results/lab-demo.db -o results/lab-demo.html
	@echo "report: $(CURDIR)/results/lab-demo.html   database: $(CURDIR)/results/lab-demo.db"

# serverlab-load beside wrk, h2load and ab on one nginx, and beside ghz and h2load on
# go-nethttp's gRPC, pinned apart (see bench/README.md).
bench: deps engine contestants
	@scripts/apt-ensure $(BENCH_PACKAGES)
	bench/engine-vs-peers.sh
	bench/tls-vs-peers.sh
	bench/grpc-vs-peers.sh
	bench/push-memory.sh
	bench/push-cpu.sh
	$(PY) bench/monitor-cost.py
	$(PY) bench/live-cost.py
	bench/warm-ratio.sh
	$(PY) bench/slowloris-vs-slowhttptest.py

# An hour and a half of held push connections (bench/soak.py; not part of `make test`):
# does memory stay flat? SOAK_MIN=N shortens it to N minutes.
soak: venv engine
	$(SERVERLAB) build node-http go-nethttp
	$(PY) bench/soak.py

clean:
	rm -rf $(VENV) engine/target results .pytest_cache .ruff_cache
	git clean -fdXq contestants  # the contestants' ignored build outputs only
