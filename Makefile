# AgentOps: `make demo` runs the product, `make test` runs the whole suite.
# Each phase says what it does and how long it took (scripts/phase.sh); see the README for
# what each command costs on the first run and what it installs.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
LOCK := requirements.lock
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml $(LOCK) | sha256sum | cut -c1-12)
PORT ?= 8000
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/agentops
PHASE := bash scripts/phase.sh
export AGENTOPS_CACHE ?= $(HOME)/.cache/agentops
# When make started (epoch seconds), so the demo's banner counts the install and migrate too.
MAKE_STARTED := $(shell date +%s)
# Every phase of this make (and its sub-makes) appends its time here; `make test` sums them up.
export PHASE_LOG ?= var/phase-times-$(MAKE_STARTED).tsv

.PHONY: install demo demo-reset test test-fast test-sqlite test-postgres test-pgbouncer test-min \
	lint lock \
	bench audit clean screens

$(BIN)/python:
	$(PHASE) "Creating the virtualenv $(VENV) and upgrading pip" \
		bash -c '$(PY) -m venv $(VENV) && $(BIN)/pip install --upgrade pip'

# The lock (hashes for every package, dev extras included) is what gets installed; then the
# project itself without dependencies. `make lock` regenerates it from pyproject.toml.
$(STAMP): $(BIN)/python pyproject.toml $(LOCK)
	$(PHASE) "Installing the locked dependencies ($(LOCK), ~100 packages, hashed)" \
		$(BIN)/pip install --require-hashes -r $(LOCK)
	$(PHASE) "Installing agentops itself (editable, no dependencies)" \
		$(BIN)/pip install --no-deps -e .
	@$(BIN)/pip check >/dev/null || { $(BIN)/pip check; echo "$(LOCK) does not satisfy" \
		"pyproject.toml (a dependency was added or changed): run 'make lock'" >&2; exit 1; }
	rm -f $(VENV)/.installed-* && touch $(STAMP)

install: $(STAMP)

demo: install
	$(PHASE) "Migrating the demo database (SQLite under var/)" \
		$(BIN)/python manage.py migrate --noinput -v1
	@rm -f $(PHASE_LOG)
	@test -s var/demo-secret-key || (umask 077 && $(BIN)/python -c \
		'import secrets; print(secrets.token_urlsafe(50))' > var/demo-secret-key)
	SECRET_KEY="$$(cat var/demo-secret-key)" AGENTOPS_DEMO_MAKE_STARTED=$(MAKE_STARTED) \
		$(BIN)/python manage.py agentops demo --port $(PORT)

# Deletes the demo's SQLite database, so the next `make demo` seeds fresh runs (live ones too).
demo-reset:
	rm -f var/agentops.sqlite3 var/agentops.sqlite3-wal var/agentops.sqlite3-shm

# The SQLite pass runs everything but the real-process and browser tests; the PostgreSQL pass
# runs all of it (crash, chaos, browser and real-model tests need PostgreSQL or run once).
test: install
	$(PHASE) "Chromium for the browser tests (apt-get on first run)" \
		bash scripts/ensure_chromium.sh || [ "$$CI" != "true" ]
	$(PHASE) "llama.cpp model server for the real-model tests (cached in $(AGENTOPS_CACHE))" \
		bash scripts/llama_server.sh build || [ "$$CI" != "true" ]
	$(PHASE) "PgBouncer for the PgBouncer pass (apt-get on first run)" \
		bash scripts/ensure_pgbouncer.sh || [ "$$CI" != "true" ]
	@rc=0; $(MAKE) --no-print-directory test-sqlite || rc=$$?; \
	if [ $$rc -eq 0 ]; then $(MAKE) --no-print-directory test-postgres || rc=$$?; fi; \
	if [ $$rc -eq 0 ]; then $(MAKE) --no-print-directory test-pgbouncer || rc=$$?; fi; \
	$(PHASE) --summary; exit $$rc

# No browser, no model server, no real processes: the quick loop (SQLite only).
test-fast: install
	@$(PHASE) "pytest on SQLite (test database in memory) without slow, browser and real-model tests" \
		env AGENTOPS_ENV=test $(BIN)/pytest -m "not slow and not e2e"; rc=$$?; $(PHASE) --summary; exit $$rc

test-sqlite:
	$(PHASE) "pytest pass 1/3: SQLite (test database in memory), all but slow and browser tests" \
		env AGENTOPS_ENV=test $(BIN)/pytest -m "not slow and not e2e"

test-postgres:
	@if $(BIN)/python scripts/pg_ready.py "$(TEST_DATABASE_URL)"; then \
		$(PHASE) "pytest pass 2/3: PostgreSQL (test database test_$(notdir $(TEST_DATABASE_URL)) at $(TEST_DATABASE_URL)), every test" \
			env AGENTOPS_ENV=test DATABASE_URL="$(TEST_DATABASE_URL)" $(BIN)/pytest; \
	elif [ "$$CI" = "true" ]; then \
		echo "PostgreSQL does not answer at $(TEST_DATABASE_URL): CI needs it" >&2; exit 1; \
	else \
		echo "PostgreSQL does not answer at $(TEST_DATABASE_URL): skipping the PostgreSQL pass"; \
	fi

# Pass 3: a subset through a PgBouncer of its own in transaction mode (tests/pgbouncer_pass.py):
# real worker hosts (release on death, a stopped worker, runs in flight), API and console
# requests, and the engine's units, leases and races. Its own test database, created directly.
PGBOUNCER_TESTS := tests/e2e/test_pgbouncer.py \
	"tests/e2e/test_keeper.py::test_a_stopped_worker_s_keeper_pauses_and_another_worker_recovers_its_runs" \
	"tests/e2e/test_density.py::test_one_process_keeps_forty_slow_runs_in_flight" \
	tests/api/test_runs_write.py tests/api/test_approvals_decide.py tests/runs/test_views.py \
	tests/runs/test_unit_overlap.py tests/runs/test_unit_sql.py tests/runs/test_transition.py \
	tests/runs/test_sweeper.py tests/runs/test_lease_keeper.py tests/runs/test_race.py \
	tests/runs/test_fencing.py tests/runs/test_slots_pool.py

test-pgbouncer:
	@if ! $(BIN)/python scripts/pg_ready.py "$(TEST_DATABASE_URL)"; then \
		if [ "$$CI" = "true" ]; then echo "PostgreSQL does not answer at $(TEST_DATABASE_URL): CI needs it" >&2; exit 1; fi; \
		echo "PostgreSQL does not answer at $(TEST_DATABASE_URL): skipping the PgBouncer pass"; \
	elif [ "$$CI" != "true" ] && ! command -v pgbouncer >/dev/null && [ ! -x /usr/sbin/pgbouncer ]; then \
		echo "pgbouncer is not installed (scripts/ensure_pgbouncer.sh): skipping the PgBouncer pass"; \
	else \
		$(PHASE) "pytest pass 3/3: through PgBouncer in transaction mode (test database test_$(notdir $(TEST_DATABASE_URL))_pgbouncer), worker, web and engine subset" \
			env AGENTOPS_ENV=test DATABASE_URL="$(TEST_DATABASE_URL)" \
			TEST_DATABASE_NAME=test_$(notdir $(TEST_DATABASE_URL))_pgbouncer \
			AGENTOPS_TEST_PGBOUNCER=1 AGENTOPS_DB_POOLER=transaction \
			$(BIN)/pytest $(PGBOUNCER_TESTS); \
	fi

# Every console page (tests/e2e/pages.py) seeded from the demo, in headless Chromium at 1280x720
# and 1440x900, as PNGs under var/screens/ (not in git); see docs/screens.md (time: README).
screens: install
	$(PHASE) "Chromium for the screenshots (apt-get on first run)" bash scripts/ensure_chromium.sh
	$(PHASE) "Screenshots of every console page (var/screens/)" \
		$(BIN)/python scripts/screens.py $(SCREENS_ARGS)

# Lower bounds: the direct dependencies at their minimum versions (wheels only) in .venv-min,
# then a fast subset of the suite. Not part of `make test` (how long, and why: README).
test-min:
	bash scripts/test_min.sh

# ruff (errors, unused imports/variables, stale noqa, imports inside functions), vulture
# (unreachable code, unused variables), unwired.py (definitions only tests use) against its
# reviewed allow-list, and lint-imports (each layer imports only the layers below it).
lint: install
	$(PHASE) "ruff" $(BIN)/ruff check .
	$(PHASE) "vulture (certain dead code)" \
		$(BIN)/vulture agentops runs ledger approvals --exclude '*/migrations/*' --min-confidence 100
	$(PHASE) "unwired.py (production code that only tests use)" \
		$(BIN)/python scripts/unwired.py --allow scripts/unwired_allow.txt .
	$(PHASE) "lint-imports (layer contracts in pyproject.toml)" \
		$(BIN)/lint-imports --no-logo

# Regenerate the hashed lock from pyproject.toml (needs the package index).
lock: $(BIN)/python
	$(BIN)/pip install 'pip-tools>=7.5,<8'
	$(BIN)/pip-compile --generate-hashes --allow-unsafe --extra dev --strip-extras \
		--no-emit-index-url --no-emit-find-links -o $(LOCK) pyproject.toml

# Exit 3 means SKIPPED (no vulnerability database answered); see scripts/audit.sh.
audit: install
	bash scripts/audit.sh

# The peers extra (DBOS, LangGraph) lets engine_throughput measure them side by side.
bench: install
	$(BIN)/pip install -e '.[dev,peers]'
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) .venv-min var
