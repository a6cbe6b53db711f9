"""scripts/audit.sh: SKIPPED is its own exit status (3), never a pass, and says so first.

The offline case runs the real script (and the real pip-audit over this environment) with
every proxy pointed at a closed local port, as on a network with no vulnerability database.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from audit_summary import OK, SKIPPED, VULNERABLE, verdict  # noqa: E402

CLOSED = "http://127.0.0.1:9"  # the discard port: nothing listens there


@pytest.mark.timeout(180)
def test_offline_audit_exits_skipped_and_says_so_first():
    env = {**os.environ, "AUDIT_PYTHON": sys.executable, "NO_PROXY": "", "no_proxy": ""}
    for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        env[var] = CLOSED
    done = subprocess.run(["bash", "scripts/audit.sh"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=170)
    assert done.returncode == SKIPPED == 3, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("audit: running pip-audit over the packages installed")
    assert lines[1].startswith("audit: SKIPPED") and "NOT audited" in lines[1]
    assert "Dependency not found on PyPI" not in done.stdout


def _report(*deps: dict) -> str:
    return json.dumps({"dependencies": [{"name": "agentops-durable",
                                         "skip_reason": "distribution marked as editable"},
                                        *deps]})


def test_a_package_the_service_does_not_know_is_skipped_not_passed():
    code, lines = verdict(_report({"name": "django", "version": "5.2.19", "vulns": []},
                                  {"name": "redis", "skip_reason": "Dependency not found on PyPI "
                                   "and could not be audited: redis (8.1.0)"}), "", 1)
    assert code == SKIPPED
    assert lines[0].startswith("audit: SKIPPED: 1 of 2 installed packages could NOT be audited")


def test_vulnerabilities_fail_and_a_clean_environment_passes():
    vuln = {"id": "GHSA-xxxx", "fix_versions": ["5.2.20"]}
    code, lines = verdict(_report({"name": "django", "version": "5.2.19", "vulns": [vuln]}), "", 1)
    assert code == VULNERABLE and "django 5.2.19: GHSA-xxxx (fixed in 5.2.20)" in lines[-1]
    code, lines = verdict(_report({"name": "django", "version": "5.2.19", "vulns": []}), "", 0)
    assert code == OK and lines == ["audit: OK: 1 installed packages audited; no known "
                                    "vulnerabilities."]


@pytest.mark.parametrize(("audit_exit", "required", "ci_exit", "says_skipped"), [
    (0, "0", 0, False), (3, "0", 0, True), (3, "1", 3, True), (1, "0", 1, False),
    (2, "0", 2, False),
])
def test_ci_reports_a_skipped_audit_as_skipped(tmp_path, audit_exit, required, ci_exit,
                                               says_skipped):
    fake = tmp_path / "audit.sh"
    fake.write_text(f"exit {audit_exit}\n")
    env = {**os.environ, "AUDIT_SCRIPT": str(fake), "AGENTOPS_AUDIT_REQUIRED": required}
    done = subprocess.run(["bash", "scripts/ci_audit.sh"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == ci_exit
    assert ("dependency audit SKIPPED (not a pass)" in done.stdout) == says_skipped
