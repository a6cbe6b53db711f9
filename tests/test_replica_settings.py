"""AGENTOPS_REPLICA_URL: the replica alias it adds, and the errors that name what was wrong."""
from __future__ import annotations

import os
import subprocess
import sys

from agentops.doctor import doctor_checks

_PRINT = ("import os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'agentops.settings'); "
          "from django.conf import settings as s; r = s.DATABASES.get('replica'); "
          "print(r and (r['HOST'], r['PORT'], r['NAME'], r['TEST'], r['OPTIONS']))")
PG = "postgres://agentops@10.0.0.5:5432/agentops"


def _settings(**env: str) -> subprocess.CompletedProcess[str]:
    """Load agentops.settings in a fresh interpreter with ``env`` set."""
    base = {k: v for k, v in os.environ.items()
            if k not in {"DATABASE_URL", "AGENTOPS_REPLICA_URL"}}
    return subprocess.run([sys.executable, "-c", _PRINT], env={**base, **env},
                          capture_output=True, text=True, timeout=120, check=False)


def test_no_replica_by_default():
    done = _settings(DATABASE_URL=PG)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "None"


def test_a_replica_url_adds_the_replica_alias():
    done = _settings(DATABASE_URL=PG,
                     AGENTOPS_REPLICA_URL="postgres://agentops@10.0.0.6:5433/agentops")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ("('10.0.0.6', 5433, 'agentops', {'MIRROR': 'default'}, "
                                   "{'connect_timeout': 2})")


def test_a_replica_needs_postgresql():
    done = _settings(AGENTOPS_REPLICA_URL="postgres://agentops@10.0.0.6/agentops")
    assert "ValueError: AGENTOPS_REPLICA_URL needs a PostgreSQL DATABASE_URL" in done.stderr
    done = _settings(DATABASE_URL=PG, AGENTOPS_REPLICA_URL="sqlite:///replica.db")
    assert ("ValueError: AGENTOPS_REPLICA_URL must be a postgres:// URL, got "
            "'sqlite:///replica.db'") in done.stderr


def test_the_doctor_says_when_no_replica_is_set(db):
    check = next(c for c in doctor_checks() if c.name == "replica")
    assert check.ok and "AGENTOPS_REPLICA_URL is not set" in check.message
