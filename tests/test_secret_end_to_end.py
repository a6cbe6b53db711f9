"""A secret carried through a whole run is never stored or shown.

The PIN is a sensitive tool argument; the tools echo it in facts, summary, their log
artifact, an error message and their log lines, the model repeats it in its text and passes
it on to a tool that does not declare it sensitive. The run is approved, blocked, rolled
back (the compensation echoes it again), approved again, exported, and browsed in the
console and the API. Then the whole database (pg_dump on PostgreSQL, iterdump on SQLite),
the artifact store, the export, the logs, every API answer and every page are searched: 0 hits.
Tracing is on with message content captured, so every span the run's model and tool calls
sent to a real OTLP/HTTP receiver (prompts and replies included) is searched too.
"""
from __future__ import annotations

import io
import json
import logging
import re
import subprocess
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client

from agentops.observability.logging import JsonFormatter, PlainFormatter, RunContextFilter
from approvals.actions import ACTIONS, RUN_ACTIONS
from approvals.apikeys import apikey_create
from approvals.models import Approval
from ledger.models import ToolCall
from runs.checkpoints import checkpoint_export
from runs.models import Event, Run, Snapshot
from runs.services import run_start
from tests import secret_agents
from tests.api.conftest import ApiClient
from tests.conftest import drive
from tests.otlp_receiver import Receiver

pytestmark = pytest.mark.django_db(transaction=True)
SECRET = "4729-PIN-ZQX-8813"
SECRET_ECHO = "opened d1 using [redacted hmac:"  # the model's reply naming the PIN, on its span


@pytest.fixture
def logs():
    """Every log line, formatted by the project's plain and JSON formatters."""
    out = io.StringIO()
    handlers = []
    for formatter in (PlainFormatter(), JsonFormatter()):
        handler = logging.StreamHandler(out)
        handler.setFormatter(formatter)
        handler.addFilter(RunContextFilter())
        handlers.append(handler)
        logging.getLogger().addHandler(handler)
    yield out
    for handler in handlers:
        logging.getLogger().removeHandler(handler)


def _user(name: str, role: str) -> User:
    user = User.objects.create(username=name, is_superuser=role == "admins")
    user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


def _approve(user: User, run: Run) -> None:
    ACTIONS["approve"].execute(user, Approval.objects.get(run=run, status="pending"), "ok")


def _live_run(admin: User, support: User) -> Run:
    secret_agents.received.clear()
    secret_agents.pin_agent("pin-e2e", SECRET, with_errors=True)
    run = run_start(agent="pin-e2e", goal="open door d1 for the visitor")
    assert drive(run) == "waiting"
    _approve(support, run)
    assert drive(run) == "blocked"  # check_pin failed, naming the PIN in its error
    RUN_ACTIONS["rollback"].execute(admin, run, "try again", to_seq=1, confirm="rollback",
                                    then="resume")
    assert drive(run) == "waiting"
    return run


def _dump() -> str:
    if connection.vendor == "postgresql":
        db = connection.settings_dict
        cmd = ["pg_dump", "--data-only", "-h", db["HOST"] or "127.0.0.1",
               "-p", str(db["PORT"] or 5432), "-U", db["USER"] or "postgres", db["NAME"]]
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    connection.ensure_connection()
    return "\n".join(connection.connection.iterdump())


def _api_answers(client: ApiClient, run: Run) -> list[str]:
    base = f"/api/runs/{run.pk}"
    paths = ["/api/runs", base, f"{base}/steps", f"{base}/events?limit=1000",
             f"{base}/tool-calls", f"{base}/snapshots", f"{base}/signals",
             "/api/approvals?status=approved", "/api/approvals"]
    paths += [f"/api/tool-calls/{c}" + q for c in
              ToolCall.objects.filter(run=run).values_list("tool_call_id", flat=True)
              for q in ("", "?expand=true")]
    paths += [f"{base}/snapshots/{s}" for s in
              Snapshot.objects.filter(run=run).values_list("seq", flat=True)]
    paths += [f"/api/approvals/{a}" for a in Approval.objects.values_list("pk", flat=True)]
    answers = []
    for path in paths:
        response = client.get(path)
        assert response.status_code == 200, (path, response.content[:300])
        answers.append(response.content.decode())
    return answers


def _pages(client: Client, run: Run) -> list[str]:
    base = f"/runs/{run.pk}/"
    paths = ["/", "/?tab=blocked", "/?tab=approvals", base, f"{base}events/", f"{base}ledger/",
             f"{base}context/", "/approvals/", "/audit/", "/settings/",
             f"{base}history/", f"{base}history/?order=newest&q=redacted"]
    pages = []
    for path in paths:
        response = client.get(path)
        assert response.status_code == 200, (path, response.status_code)
        pages.append(response.content.decode())
    links = set(re.findall(r'href="(/runs/[^"]+/artifacts/[0-9a-f]{64}/)"', "".join(pages)))
    assert links, "the run page links its tool output"
    for link in links:
        response = client.get(link)
        assert response.status_code == 200
        pages.append(response.content.decode())
    for verb in ("rollback", "terminate"):
        pages.append(client.get(f"{base}actions/{verb}/").content.decode())
    return pages


@pytest.fixture
def receiver(settings, monkeypatch):
    """Tracing on, content captured, spans exported within 50 ms to a local OTLP receiver."""
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    with Receiver() as receiver:
        settings.AGENTOPS_OTLP_ENDPOINT = receiver.endpoint
        settings.AGENTOPS_TRACE_CONTENT = True
        yield receiver


def _exported(receiver: Receiver, run: Run) -> str:
    """Return every span body received once the run's last tool call's span has arrived."""
    last = ToolCall.objects.filter(run=run).order_by("-created_at").first()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(
            s["attrs"].get("gen_ai.tool.call.id") == last.tool_call_id for s in receiver.spans()):
        time.sleep(0.05)
    spans = receiver.spans()
    assert any(s["attrs"].get("gen_ai.tool.name") == "note" for s in spans)
    assert any(SECRET_ECHO in s["attrs"].get("gen_ai.output.messages", "") for s in spans)
    assert any("gen_ai.input.messages" in s["attrs"] for s in spans)
    leaks = [(s["name"], k) for s in spans for k, v in s["attrs"].items() if SECRET in str(v)]
    assert not leaks
    return receiver.raw().decode("utf-8", "replace")


def test_a_secret_is_in_no_dump_log_export_answer_or_page(engine, tmp_path, logs, settings,
                                                          receiver):
    settings.AGENTOPS_INLINE_RESULT_BYTES = 2_000  # the echoing log goes to an artifact
    admin, support = _user("root", "admins"), _user("helper", "support")
    run = _live_run(admin, support)
    _approve(support, run)
    assert drive(run) == "blocked"
    # The secret really was used: each tool (and the compensation) got the clear PIN.
    assert {r["tool"] for r in secret_agents.received if SECRET in json.dumps(r)} == {
        "unlock", "check_pin", "note", "relock"}
    assert Event.objects.filter(run=run, type="tool.compensated").exists()
    export = checkpoint_export(run=run, directory=tmp_path / "export")
    _, key = apikey_create(user=admin, name="e2e")
    console = Client()
    console.force_login(admin)
    seen = {
        "database dump": _dump(),
        "artifact store": "".join(p.read_bytes().decode("utf-8", "replace") for p in
                                  (tmp_path / "artifacts").rglob("*") if p.is_file()),
        "export": "".join(p.read_text() for p in Path(export).iterdir()),
        "api answers": "".join(_api_answers(ApiClient(key), run)),
        "console pages": "".join(_pages(console, run)),
        "logs": logs.getvalue(),
        "exported spans": _exported(receiver, run),
    }
    assert run.pk.hex in seen["database dump"].replace("-", "")  # the dump holds the run
    assert "unlocking d1 with pin" in seen["logs"]  # the tool's log lines were written
    assert "opened with pin" in seen["api answers"]
    hits = {where: text.count(SECRET) for where, text in seen.items()}
    assert hits == {where: 0 for where in seen}
    assert "[redacted hmac:" in seen["console pages"] and "redacted hmac:" in seen["export"]
    assert "redacted hmac:" in seen["exported spans"]
