"""A worker host's processes import neither the web's modules nor cryptography until used.

Every q2 process is forked from the worker's main process, so what that process imports is
in each of them (docs/workers.md "Memory"): the system checks it runs leave out those of the
web pages, and the modules a tick needs bring neither ninja nor cryptography.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from runs.management.commands.agentops import worker_check_tags

ROOT = Path(__file__).resolve().parents[2]
_PROBE = """
import sys
sys.argv = ["manage.py", "agentops", "worker"]
import django
django.setup()
from runs.management.commands.agentops import Command, worker_check_tags
Command().check(tags=worker_check_tags(), display_num_errors=False)
import runs.cli.worker, runs.tasks, runs.slots  # noqa: F401, E401
print(" ".join(sorted({m.split(".")[0] for m in sys.modules})))
"""


def test_a_worker_host_runs_the_model_checks_but_not_the_web_pages_checks():
    tags = set(worker_check_tags())
    assert "models" in tags
    assert not tags & {"urls", "templates", "admin", "staticfiles"}, tags


def test_a_worker_process_imports_neither_ninja_nor_cryptography():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "agentops.settings"}
    out = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    imported = set(out.stdout.split())
    assert "django" in imported and "django_q" in imported, imported
    assert not imported & {"ninja", "cryptography", "daphne"}, imported & {"ninja", "cryptography"}
