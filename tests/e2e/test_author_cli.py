"""The real CLI as an author meets it: each outcome its own exit code, config errors in words.

``manage.py agentops run AGENT --inline`` / ``follow`` / ``doctor`` run as subprocesses on
the test's PostgreSQL database, with the author's agents (tests.author_agents).
"""
from __future__ import annotations

import subprocess
import sys

import pytest

import tests.author_agents  # noqa: F401  (registers the agents in this process too)
from runs.cli import exits
from runs.models import Run
from tests.e2e.workers import ROOT, worker_env

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
_MODEL = ("AGENTOPS_MODEL_BASE_URL", "AGENTOPS_MODEL_NAME", "AGENTOPS_MODEL_PROVIDER")


def _cli(*args: str, agents: str = "tests.author_agents", **env: str):
    full = {k: v for k, v in worker_env(AGENTOPS_AGENTS=agents, **env).items()
            if k not in _MODEL or k in env}
    return subprocess.run([sys.executable, "manage.py", "agentops", *args], cwd=ROOT,
                          env=full, capture_output=True, text=True, timeout=120)


def _inline(agent: str, **env: str):
    done = _cli("run", agent, "--goal", "do it", "--inline", "--timeout", "60", **env)
    return done, Run.objects.filter(agent_name=agent).latest("created_at")


@pytest.mark.parametrize(("agent", "status", "code"), [
    ("author_good", "succeeded", exits.SUCCEEDED),
    ("author_refused", "completed_with_exceptions", exits.WITH_EXCEPTIONS),
    ("author_lazy", "blocked", exits.BLOCKED),
    ("author_unknown", "unknown", exits.UNKNOWN),
    ("author_approval", "waiting", exits.WAITING),
])
def test_run_inline_exit_code_per_outcome(agent, status, code):
    done, run = _inline(agent)
    assert run.status == status, (done.stdout, done.stderr)
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr


def test_follow_exit_code_of_a_blocked_run():
    _, run = _inline("author_lazy")
    done = _cli("follow", str(run.pk))
    assert done.returncode == exits.BLOCKED
    assert f"run {run.pk} is blocked: permanent_error" in done.stderr


def test_unknown_write_keeps_the_tools_own_words_exit_code():
    done, run = _inline("author_unknown")
    assert done.returncode == exits.UNKNOWN
    words = "place_order_raw timed out: supplier API timed out after the order was sent"
    assert words in run.ledger.get().error
    assert words in run.attention_detail
    # The evidence line reads as a sentence: never "timed out after 0.0s after the request".
    assert "it timed out after the request was sent (the attempt ran " in run.recommendation_why
    assert "s after the request" not in run.recommendation_why


def test_run_inline_without_model_settings_ends_the_run_config_error():
    done, run = _inline("author_nomodel", agents="tests.author_nomodel_agents")
    assert "Traceback" not in done.stdout + done.stderr
    assert done.returncode == exits.BLOCKED, (done.stdout, done.stderr)
    assert "AGENTOPS_MODEL_BASE_URL" in done.stdout + done.stderr
    assert run.status == "blocked"
    assert "AGENTOPS_MODEL_BASE_URL" in run.attention_detail


def test_doctor_names_an_agent_without_a_model_config_error():
    done = _cli("doctor", agents="tests.author_nomodel_agents")
    line = next(x for x in done.stdout.splitlines() if "agent models" in x)
    assert line.startswith("FAIL agent models: author_nomodel declare no model=")
    assert "AGENTOPS_MODEL_BASE_URL" in line
    assert done.returncode != 0
    ok = _cli("doctor", agents="tests.author_nomodel_agents",
              AGENTOPS_MODEL_BASE_URL="http://127.0.0.1:9/v1", AGENTOPS_MODEL_NAME="m")
    assert "ok   agent models: author_nomodel use the model" in ok.stdout
