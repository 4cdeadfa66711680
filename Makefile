# payops — the README's commands. Each target sets itself up on a fresh machine.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-runtime
DEV_STAMP := $(VENV)/.installed-dev
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export PREFECT_HOME ?= $(CURDIR)/.prefect-home
# This checkout's payops home: its database, caches, keys and `payops serve` record (another checkout on
# this host is another home; set PAYOPS_HOME to share one).
export PAYOPS_HOME ?= $(CURDIR)/.payops-home
# Bytecode is cached (__pycache__, git-ignored): every payops process, a flow run's included, would otherwise
# compile payops' sources again, about 0.1 s each.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test lint bench serve browser-deps clean scaleout-check

# Independent prerequisites are made at once: `make test` installs the venv while apt-get fetches chromium.
MAKEFLAGS += --jobs=2

# The venv with payops installed editable as $(1) (".", or ".[dev]": one resolution for the runtime and the
# dev extras, where two pip runs resolved and installed twice).
define install
	@test -x $(PY) || python3 -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip
	@$(PY) -m pip install -q -e '$(1)'
endef

# The demo needs the runtime only; tests and lint add the dev extras.
$(STAMP): pyproject.toml setup.py
	$(call install,.)
	@touch $(STAMP)

$(DEV_STAMP): pyproject.toml setup.py
	$(call install,.[dev])
	@touch $(STAMP) $(DEV_STAMP)

demo: $(STAMP)
	@$(PY) -m payops.deployments.demo

# One pytest session on TEST_WORKERS processes (pytest-xdist), each test file on one worker with its own
# fixtures and one Prefect test server per worker. Most of the time goes to end-to-end tests that wait (for
# payouts to settle, servers to start, approvals): on 2 cores the unit tests fill those waits, so they run in
# the same session, shuffled (tests/conftest.py SHUFFLED: their modules and the tests in each; the rest in file
# order, the longest files first). `make test SEED=N` replays the order a run printed. A third process fills
# the waits that two left (CPU time = wall time at two). schemathesis' run counts its requests across its
# tests, which xdist folds into one item: it runs alone, in one process.
TEST_WORKERS ?= 3
ALONE := tests/sandbox/test_sandbox_schemathesis.py

test: $(DEV_STAMP) browser-deps
	@seed=$${SEED:-$$RANDOM}; echo "shuffle seed $$seed (make test SEED=$$seed replays this order)"; \
	  $(PY) -m pytest -q --durations=15 -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
	    --shuffle-seed=$$seed --ignore=$(ALONE)
	@$(PY) -m pytest -q $(ALONE)

# ruff, and the import contracts of pyproject.toml ([tool.importlinter]): lint-imports reads the installed
# layout (payops.flows, ...), so the check runs on a copy laid out so (tests/architecture/test_import_contracts.py).
lint: $(DEV_STAMP)
	@$(VENV)/bin/ruff check .
	@$(PY) -m pytest -q -p no:randomly tests/architecture/test_import_contracts.py -k keeps_every_contract

# Each benchmark prints its JSON and saves it under benchmarks/results/ (commit, machine, load); the table in
# docs/performance.md is then rewritten from those files.
bench: $(STAMP)
	@$(PY) -m benchmarks.results run intake
	@$(PY) -m benchmarks.results run payouts_e2e
	@$(PY) -m benchmarks.results run cli
	@$(PY) -m benchmarks.results run reconcile
	@$(PY) -m benchmarks.results table --write

serve: $(STAMP)
	@$(VENV)/bin/payops serve --sandbox

# Scale-out recipe on loopback: PostgreSQL (apt-get if missing), Prefect server, 2 workers from the wheel, shared
# rate limit, a worker killed mid-send, a crashed run retried, approval waits suspended while a worker dies.
scaleout-check: $(DEV_STAMP)
	@$(PY) -m pytest -q tests/deployments/test_scaleout.py tests/deployments/test_scaleout_approvals.py

# Debian's chromium for the console's browser test (never a downloaded browser).
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null; \
	  else echo "chromium missing: sudo apt-get install chromium"; fi; }

clean:
	rm -rf $(VENV) .prefect-home .payops-home reports uploads .pytest_cache
