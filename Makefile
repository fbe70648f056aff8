# Every target creates .venv when it is missing, so each works on a fresh clone.
# Two jobs: on a fresh clone `make test` installs the venv and gemini-cli side by side (both
# mostly wait on the network); the recipes themselves run one line after another.
MAKEFLAGS += -j2
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The PostgreSQL tests run against this server (this machine kind starts one); when it
# cannot be reached they fail rather than skip. `make test VERIFIER_TEST_POSTGRES_URL=`
# skips them on a machine with no server.
VERIFIER_TEST_POSTGRES_URL ?= postgresql+psycopg://postgres@127.0.0.1:5432/test
# pytest-xdist workers: the suite waits on subprocesses and servers more than it computes,
# so twice the cores of this 2-core machine (measured: 3 and 4 alike, 8 slower).
TEST_WORKERS ?= 4
# gemini-cli, pinned (verifier/app/geminicli_hooks.py names the same release), for the
# end-to-end tests of its hooks: npm installs it into the ignored .tools/, so `make test`
# runs them.
GEMINI_CLI_VERSION := 0.61.0
GEMINI_CLI := .tools/gemini-cli/node_modules/.bin/gemini

.PHONY: install demo test check lint bench docs schema clean

install: $(STAMP)

# uv, pinned and installed into the venv by pip, installs the project and its dev extras:
# a fresh clone's install took 2 min with pip (one download after another), seconds with
# uv. Where uv cannot be had (no wheel for the platform, say), pip does it all. Either way
# the venv's pip is brought up to date (tests/test_packaging.py builds and installs with it).
UV_VERSION := 0.13.9

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	if $(BIN)/python -m pip install --quiet uv==$(UV_VERSION); then \
		UV_LINK_MODE=copy $(BIN)/uv pip install --quiet --python $(BIN)/python \
			--upgrade-package pip -e '.[dev]' pip; \
	else \
		$(BIN)/python -m pip install --quiet --upgrade pip && \
		$(BIN)/python -m pip install --quiet -e '.[dev]'; \
	fi
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/verifier demo

$(GEMINI_CLI):
	npm install --prefix .tools/gemini-cli --no-audit --no-fund --loglevel=error @google/gemini-cli@$(GEMINI_CLI_VERSION)

# The tests' own processes write bytecode even where the environment says not to
# (PYTHONDONTWRITEBYTECODE, set on this machine): otherwise each worker compiles and
# rewrites every module it imports, and each `python -m verifier` a test starts compiles
# verifier again (about a third of its start-up). tests/conftest.py keeps the processes
# the tests start from writing any.
PYTEST := PYTHONDONTWRITEBYTECODE= VERIFIER_TEST_POSTGRES_URL='$(VERIFIER_TEST_POSTGRES_URL)' \
	$(BIN)/python -m pytest

test: $(STAMP) $(GEMINI_CLI)
	$(PYTEST) -q -n $(TEST_WORKERS)

# The quick loop: lint, then the tests of what the change touches (tests/support/affected.py
# says how they are chosen); BASE=main for a branch's whole change. `make test` stays the answer.
BASE ?= HEAD
check: lint
	@tests="$$($(BIN)/python -m tests.support.affected $(BASE))"; \
	if [ -z "$$tests" ]; then echo "no test touched by the change against $(BASE)"; else \
	$(PYTEST) -q -n 2 $$tests; fi

lint: $(STAMP)
	$(BIN)/ruff check verifier audit migrations tests
	$(BIN)/ruff format --check verifier audit migrations tests
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python -m tests.support.circles

bench: $(STAMP)
	$(BIN)/python -m tests.benchmarks.run

docs: $(STAMP)
	$(BIN)/python -m tests.support.cli_reference

schema: $(STAMP)
	$(BIN)/python -m verifier.contract > docs/contract/session-report-v1.schema.json
	cp docs/contract/session-report-v1.schema.json verifier/contract/report.schema.json

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache demo-out
