#!/usr/bin/env bash
# Audit the packages really installed in .venv for known vulnerabilities (pip-audit over the
# environment, not over a file that may have drifted from it).
#
# Exit status (.ci/run relies on it):
#   0  every installed package was checked; no known vulnerabilities
#   1  known vulnerabilities found (each is listed)
#   2  pip-audit itself failed (its error is shown)
#   3  SKIPPED: no vulnerability database answered for some or all packages, so they were
#      NOT audited (this machine's network reaches a package index without vulnerability data)
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${AUDIT_PYTHON:-.venv/bin/python}"
json="$(mktemp)"; err="$(mktemp)"
trap 'rm -f "$json" "$err"' EXIT
echo "audit: running pip-audit over the packages installed in .venv (takes ~10-60 s)..."
"$PY" -m pip_audit --skip-editable --format json --progress-spinner off >"$json" 2>"$err"
rc=$?
"$PY" scripts/audit_summary.py "$json" "$err" "$rc"
