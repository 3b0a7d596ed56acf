# Thin aliases. The README's two commands are `make run` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install run test test-fast lint bench image lb-image

# python-prctl is built from source on install (no wheel on the index). On a fresh Debian/Ubuntu
# machine, as root, its build dependencies are installed first; anyone else is told what to install.
# Two stamps in one .venv: the runtime dependencies (what `make run` needs) and the dev extras
# (what `make test` and `make lint` need). Everything the install steps print goes to stderr:
# a client started with `make run` reads stdout as the protocol, from its first byte.
RUNTIME := $(VENV)/.installed-runtime
DEV := $(VENV)/.installed-dev

$(BIN)/python:
	@PY=$(PY) bash .ci/setup.d/prctl.sh --check || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && PY=$(PY) bash .ci/setup.d/prctl.sh 1>&2; } || { echo "python-prctl needs a C compiler and libcap's and Python's headers: apt-get install gcc libcap-dev python3-dev" >&2; exit 1; }
	@$(PY) -m venv $(VENV) 1>&2
	@$(BIN)/pip install -q --upgrade pip 1>&2

$(RUNTIME): pyproject.toml | $(BIN)/python
	@$(BIN)/pip install -q -e . 1>&2
	@touch $@

$(DEV): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[dev]"
	@touch $@ $(RUNTIME)

install: $(DEV)

# `@`: make echoes a recipe line on stdout, which a client would read as its first protocol line.
run: $(RUNTIME)
	@$(BIN)/skill-mcp serve

# Branch coverage is reported, never enforced (no threshold). Here and not in pyproject's addopts,
# so that a single-file run stays quiet; [tool.coverage.run] in pyproject.toml says what is measured.
COV := --cov=skill_mcp --cov=skill_mcp_launcher --cov-branch --cov-report=term:skip-covered

test: install
	$(BIN)/python -m pytest $(COV)

# The fast lane while editing: no containers (`appliance`) and nothing marked `slow` (suites that
# start many server subprocesses, big Hypothesis runs, the third-party clients and verifiers).
# `make test` stays the full suite and the CI command.
test-fast: install
	$(BIN)/python -m pytest -m "not appliance and not slow" -q

lint: install
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy src/skill_mcp src/skill_mcp_launcher bench
	$(BIN)/mypy --check-untyped-defs tests

# `make bench BENCH_ARGS=--load` adds the load figure through HAProxy (needs Docker and both images).
# The peers side by side need their venvs first: `$(BIN)/python -m bench.peers --setup` (bench/README.md).
BENCH_ARGS ?=

bench: install
	$(BIN)/python -m bench $(BENCH_ARGS)

# The appliance image (container/). Wheels are built on the host and installed in the
# image with --no-index, the telemetry extra (skillmcp[otel]) included. python-prctl has no wheel on the index: `pip wheel` builds it here
# (gcc and libcap-dev on the host: .ci/setup.d/prctl.sh), with the host's Python 3.11 - the
# image's - so the image itself carries no compiler. BASE_IMAGE defaults to a debootstrap-built base (no registry
# needed); on a machine that can pull, `make image BASE_IMAGE=debian:bookworm-slim`.
IMAGE ?= skill-mcp:dev
BASE_IMAGE ?= skill-mcp-base:bookworm
IMAGE_CTX := build/image

image:
	rm -rf $(IMAGE_CTX) && mkdir -p $(IMAGE_CTX)/wheels $(IMAGE_CTX)/nftables
	$(PY) -m pip wheel -q --disable-pip-version-check --wheel-dir $(IMAGE_CTX)/wheels ".[otel]" pip
	cp nftables/skill-mcp.nft $(IMAGE_CTX)/nftables/
	if [ "$(BASE_IMAGE)" = "skill-mcp-base:bookworm" ]; then bash container/build-base.sh $(BASE_IMAGE); fi
	DOCKER_BUILDKIT=0 docker build -q -f container/Dockerfile --build-arg BASE_IMAGE=$(BASE_IMAGE) -t $(IMAGE) $(IMAGE_CTX)

# The load balancer of the scale-out test and bench: Debian's HAProxy on the same base, from .deb
# files apt-get fetches on the host (container/lb/build-lb.sh); no registry, no network in the build.
LB_IMAGE ?= skill-mcp-lb:dev

lb-image:
	if [ "$(BASE_IMAGE)" = "skill-mcp-base:bookworm" ]; then bash container/build-base.sh $(BASE_IMAGE); fi
	bash container/lb/build-lb.sh $(LB_IMAGE) $(BASE_IMAGE)
