#!/usr/bin/env bash
# Install every direct dependency at the lower bound pyproject.toml states (wheels only) into
# .venv-min, then run a fast subset of the suite that touches each of them. A failure means a
# lower bound in pyproject.toml is wrong. How long it takes: README (`make test-min`).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-python3}"
VENV=.venv-min
PHASE="bash scripts/phase.sh"
# Pure-Python tests that import Django, ninja, q2, channels, htmx, partials, axes, whitenoise,
# json-logger, jsonschema, openai, prometheus-client, cryptography and psycopg/dj-database-url.
# pip-audit's report format (test_audit_script) and the demo seed (q2, channels) too.
SUBSET=(tests/api tests/test_logging.py tests/test_request_logging.py tests/test_security.py
        tests/test_health.py tests/test_metrics.py tests/test_settings_views.py
        tests/approvals/test_inbox_views.py tests/llm tests/runs/test_loop.py
        tests/test_audit_script.py tests/test_packaging.py tests/demo/test_seed.py)

rm -rf "$VENV"
"$PY" -m venv "$VENV"
"$PY" scripts/min_requirements.py dev >"$VENV/min-requirements.txt"
echo "test-min: installing these lower bounds (wheels only):"
sed 's/^/    /' "$VENV/min-requirements.txt"
$PHASE "Installing the minimum versions into $VENV" \
    "$VENV/bin/pip" install --only-binary=:all: -r "$VENV/min-requirements.txt"
$PHASE "Installing agentops itself (editable, no dependencies)" \
    "$VENV/bin/pip" install --no-deps -e .
"$VENV/bin/pip" freeze | grep -v -i '^-e\|agentops' >"$VENV/installed.txt"
rc=0
$PHASE "ruff and vulture at their minimum versions" bash -c \
    "$VENV/bin/ruff check . && $VENV/bin/vulture agentops runs ledger approvals \
     --exclude '*/migrations/*' --min-confidence 100" || rc=$?
$PHASE "pytest on SQLite with the minimum versions (a fast subset)" \
    env AGENTOPS_ENV=test "$VENV/bin/pytest" -m "not slow and not e2e" "${SUBSET[@]}" || rc=1
$PHASE --summary
exit $rc
