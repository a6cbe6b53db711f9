"""``manage.py agentops``: createuser with a first API key, run --follow hints, run --inline."""
from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django_q.models import OrmQ

from agentops import clock
from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from approvals.models import ApiKey
from runs.cli import exits
from runs.models import Run, WorkerHeartbeat
from tests.engine_agents import lookup


def _cli(*args: str, code: int = 0) -> str:
    out = io.StringIO()
    try:
        call_command("agentops", *args, stdout=out)
    except CommandError as exc:
        if exc.returncode != code or not code:
            raise
    return out.getvalue()


@pytest.mark.django_db
def test_createuser_prints_a_working_api_key_once(client):
    out = _cli("createuser", "ops1", "--role", "operators", "--role", "support", "--api-key")
    raw = re.search(r"^(ao_\S+)$", out, re.MULTILINE)[1]
    user = get_user_model().objects.get(username="ops1")
    assert set(user.groups.values_list("name", flat=True)) == {"operators", "support"}
    assert not user.has_usable_password() and "changepassword ops1" in out
    assert not ApiKey.objects.filter(key_hash=raw).exists()  # stored as a hash only
    response = client.get("/api/runs", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert response.status_code == 200, response.content
    assert client.get("/api/runs", HTTP_AUTHORIZATION="Bearer ao_wrong").status_code == 401


@pytest.mark.django_db
def test_createuser_refuses_bad_roles_and_existing_users_unless_asked():
    with pytest.raises(CommandError, match="roles must be some of viewers, operators"):
        _cli("createuser", "x", "--role", "wizards")
    _cli("createuser", "sam", "--role", "viewers")
    with pytest.raises(CommandError, match="already exists .*roles: viewers.*--existing"):
        _cli("createuser", "sam", "--role", "admins")
    out = _cli("createuser", "sam", "--role", "admins", "--existing", "--api-key")
    assert "user sam updated" in out and "for team default as admins" in out
    assert ApiKey.objects.filter(user__username="sam").count() == 1
    with pytest.raises(CommandError, match="no team 'nope'"):
        _cli("createuser", "sam", "--role", "admins", "--existing", "--api-key",
             "--key-team", "nope")


@pytest.fixture
def cli_agent(settings):
    """A one-step agent registered for the CLI, with ticks really enqueued (as in production)."""
    settings.AGENTOPS_ENQUEUE_TICKS = True
    settings.AGENTOPS_BACKOFF_BASE_S = 0.0
    settings.AGENTOPS_AGENTS = []
    script = {"look": [call("lookup", item="pen"), say("a pen costs 42")]}
    return registry.register(Agent(name="cli-agent", version="1", system_prompt="Look it up.",
                                   tools=[lookup], plan=[StepSpec("look")],
                                   model=lambda: ScriptedModel(script)))


@pytest.mark.django_db(transaction=True)
def test_inline_runs_in_this_process_and_queues_nothing(cli_agent):
    out = _cli("run", "cli-agent", "--goal", "price of a pen", "--inline", "--timeout", "30")
    run = Run.objects.get()
    assert run.status == "succeeded" and "running in this process" in out
    assert "1/1 steps · succeeded" in out
    assert OrmQ.objects.count() == 0  # no worker was ever handed this run


@pytest.mark.django_db(transaction=True)
def test_follow_says_when_no_worker_is_alive(cli_agent, settings):
    settings.AGENTOPS_HEARTBEAT_MAX_AGE_S = 30
    out = _cli("run", "cli-agent", "--goal", "price of a pen", "--follow", "--timeout", "3",
               code=exits.STILL_RUNNING)
    assert "no worker is alive (no worker has ever reported)" in out
    assert "manage.py agentops worker" in out and "--inline" in out
    assert OrmQ.objects.count() == 1  # queued for a worker, as asked
    assert out.count("no worker is alive") == 1


@pytest.mark.django_db(transaction=True)
def test_follow_gives_no_hint_while_a_worker_is_alive(cli_agent):
    WorkerHeartbeat.objects.create(name="sweeper@h:1", seen_at=clock.now())
    out = _cli("run", "cli-agent", "--goal", "price of a pen", "--follow", "--timeout", "3",
               code=exits.STILL_RUNNING)
    assert "no worker is alive" not in out and "still queued after 3s" in out
