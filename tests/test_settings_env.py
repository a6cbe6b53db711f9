"""Settings read numbers from the environment: defaults, parsed values, and errors that name the variable."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

_PRINT = ("import os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'agentops.settings'); "
          "from django.conf import settings as s; "
          "print(s.Q_CLUSTER['timeout'], s.Q_CLUSTER['retry'], s.AGENTOPS_LEASE_TTL_S, "
          "s.AGENTOPS_RECOVERY_LIMIT)")


def _settings(**env: str) -> subprocess.CompletedProcess[str]:
    """Load agentops.settings in a fresh interpreter with ``env`` added; return the process."""
    return subprocess.run([sys.executable, "-c", _PRINT], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=120, check=False)


def test_numbers_are_parsed_and_q2_retries_past_its_timeout():
    done = _settings(AGENTOPS_Q_TIMEOUT="30", AGENTOPS_LEASE_TTL_S="2.5",
                     AGENTOPS_RECOVERY_LIMIT="")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["30", "90", "2.5", "5"]  # "" keeps the default


@pytest.mark.parametrize(("name", "raw", "message"), [
    ("AGENTOPS_Q_TIMEOUT", "1.5", "AGENTOPS_Q_TIMEOUT must be an integer, got '1.5'"),
    ("AGENTOPS_LEASE_TTL_S", "soon", "AGENTOPS_LEASE_TTL_S must be a number, got 'soon'"),
    ("AGENTOPS_UNITS_IN_FLIGHT", "0", "AGENTOPS_UNITS_IN_FLIGHT must be at least 1 (1: each "
     "unit is read before the next goes out), got 0"),
    ("AGENTOPS_OTLP_ENDPOINT", "collector:4318", "AGENTOPS_OTLP_ENDPOINT must be an OTLP/HTTP "
     "base URL such as http://otel-collector:4318, got 'collector:4318'"),
])
def test_a_bad_number_stops_start_up_naming_the_variable(name, raw, message):
    done = _settings(**{name: raw})
    assert done.returncode != 0
    assert f"ValueError: {message}" in done.stderr


def test_a_pooler_setting_is_checked_and_turns_named_cursors_off():
    bad = _settings(AGENTOPS_DB_POOLER="session")
    assert bad.returncode != 0
    assert ("ValueError: AGENTOPS_DB_POOLER must be empty (no pooler) or 'transaction', "
            "got 'session'") in bad.stderr
    on_sqlite = _settings(AGENTOPS_DB_POOLER="transaction", DATABASE_URL="sqlite:///x.db")
    assert "AGENTOPS_DB_POOLER=transaction needs a PostgreSQL DATABASE_URL" in on_sqlite.stderr
    show = ("import os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'agentops.settings'); "
            "from django.conf import settings as s; "
            "print(s.DATABASES['default'].get('DISABLE_SERVER_SIDE_CURSORS', False))")
    env = {**os.environ, "AGENTOPS_DB_POOLER": "transaction",
           "DATABASE_URL": "postgres://postgres@127.0.0.1:6432/agentops"}
    done = subprocess.run([sys.executable, "-c", show], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.stdout.split() == ["True"], done.stderr
