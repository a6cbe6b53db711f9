# AgentOps: `make demo` runs the product, `make test` runs the whole suite.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)
PORT ?= 8000
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/agentops
export AGENTOPS_CACHE ?= $(HOME)/.cache/agentops

.PHONY: install demo test test-sqlite test-postgres bench audit clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/python manage.py migrate --noinput -v0
	$(BIN)/python manage.py agentops demo --port $(PORT)

# The SQLite pass runs everything but the real-process and browser tests; the PostgreSQL pass
# runs all of it (crash, chaos, browser and real-model tests need PostgreSQL or run once).
test: install
	bash scripts/ensure_chromium.sh || [ "$$CI" != "true" ]
	bash scripts/llama_server.sh build || [ "$$CI" != "true" ]
	$(MAKE) --no-print-directory test-sqlite
	$(MAKE) --no-print-directory test-postgres

test-sqlite:
	AGENTOPS_ENV=test $(BIN)/pytest -m "not slow and not e2e"

test-postgres:
	@if $(BIN)/python scripts/pg_ready.py "$(TEST_DATABASE_URL)"; then \
		AGENTOPS_ENV=test DATABASE_URL="$(TEST_DATABASE_URL)" $(BIN)/pytest; \
	elif [ "$$CI" = "true" ]; then \
		echo "PostgreSQL does not answer at $(TEST_DATABASE_URL): CI needs it" >&2; exit 1; \
	else \
		echo "PostgreSQL does not answer at $(TEST_DATABASE_URL): skipping the PostgreSQL pass"; \
	fi

audit: install
	bash scripts/audit.sh

# The peers extra (DBOS, LangGraph) lets engine_throughput measure them side by side.
bench: install
	$(BIN)/pip install -q -e '.[dev,peers]'
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) var
