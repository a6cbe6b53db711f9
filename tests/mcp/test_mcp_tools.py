"""MCP tools through the ledger, against a real MCP server process (tests/mcp/crm_server.py).

The server runs over stdio (a process per call) and over streamable HTTP (one process the
fixture starts); its effects land in a JSON-lines outbox the tests read.
"""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentops.agents import Agent, StepSpec, registry
from agentops.errors import ConfigError
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.mcp_tools import McpServer, mcp_tools, mcp_tools_from_settings
from approvals.models import Approval
from ledger.models import ToolCall
from runs.engine.runtime.snapshots import load_state
from runs.services import run_start
from tests.conftest import drive

SERVER = Path(__file__).with_name("crm_server.py")
pytestmark = [pytest.mark.django_db, pytest.mark.timeout(180)]
EMAIL = {"effect": "write", "idempotent": True, "probe": "find_email",
         "compensate": "recall_email", "reversibility": "reversible"}


@pytest.fixture(autouse=True)
def _long_lease(settings):
    """Calls take seconds (a process per stdio call): keep the lease without a renewal thread,
    which SQLite's shared in-memory test database cannot serve from a second connection."""
    settings.AGENTOPS_LEASE_TTL_S = 120


@pytest.fixture
def outbox(tmp_path) -> Path:
    """The file the CRM server appends its effects to."""
    return tmp_path / "outbox.jsonl"


def effects(outbox: Path) -> list[dict]:
    return [json.loads(line) for line in outbox.read_text().splitlines()] if outbox.exists() else []


@pytest.fixture
def http_url(outbox):
    """Start the CRM server on streamable HTTP and yield its URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(SERVER), "--http", str(port)],
                            env={"CRM_OUTBOX": str(outbox), "CRM_SLOW_S": "4", "PATH": "/usr/bin"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert proc.poll() is None, "the MCP server exited"
            time.sleep(0.2)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(10)


def _agent(name, tools, script, steps):
    return registry.register(Agent(name=name, version="1", system_prompt="You run the CRM.",
                                   tools=tools, plan=[StepSpec(s) for s in steps],
                                   model=lambda: ScriptedModel(script)))


def test_stdio_tools_run_through_the_ledger_with_the_key_filled_in(engine, outbox):
    server = McpServer("crm", command=[sys.executable, str(SERVER)],
                       env={"CRM_OUTBOX": str(outbox)})
    tools = mcp_tools(server, {"find_customer": {"effect": "read"}, "send_email": EMAIL})
    send = next(t for t in tools if t.name == "send_email")
    assert set(send.parameters["properties"]) == {"to", "body"}  # the key is not the model's
    assert send.effect_class == "idempotent" and send.probe and send.compensate
    script = {"find": [call("find_customer", email="ada@example.com"), say("found")],
              "mail": [call("send_email", to="ada@example.com", body="Welcome"), say("sent")]}
    _agent("mcp-stdio", tools, script, ["find", "mail"])
    run = run_start(agent="mcp-stdio", goal="welcome Ada")
    assert drive(run) == "succeeded"

    rows = {r.tool: r for r in ToolCall.objects.filter(run=run)}
    assert rows["find_customer"].status == "succeeded"
    assert rows["find_customer"].facts["name"] == "Ada Lovelace"
    email = rows["send_email"]
    assert email.status == "succeeded" and email.effect == "write" and email.idempotent
    [sent] = effects(outbox)
    assert sent == {"kind": "email", "key": email.idempotency_key, "to": "ada@example.com",
                    "body": "Welcome"}
    assert email.facts == {"message_id": f"m-{email.idempotency_key[:8]}", "to": "ada@example.com"}


def test_http_tools_from_settings_with_an_approval_rule(engine, settings, outbox, http_url):
    settings.AGENTOPS_MCP_SERVERS = {"crm": {"url": http_url, "tools": {
        "close_account": {"effect": "write", "reversibility": "irreversible",
                          "approval": "always"},
        "refuse": {"effect": "read"}}}}
    tools = mcp_tools_from_settings("crm")
    script = {"close": [call("close_account", email="ada@example.com"), say("closed")],
              "never": [call("refuse", reason="policy")]}
    _agent("mcp-http", tools, script, ["close"])
    _agent("mcp-refuse", tools, script, ["never"])
    run = run_start(agent="mcp-http", goal="close Ada's account")
    status = drive(run)
    run.refresh_from_db()
    assert status == "waiting", (run.attention_reason, run.attention_detail)
    assert run.wait_kind == "approval"
    approval = Approval.objects.get(run=run)
    assert approval.tool == "close_account" and approval.status == "pending"
    assert effects(outbox) == []  # nothing reached the server before a person approves

    # A tool the server answers with is_error is a permanent failure, with the server's words.
    other = run_start(agent="mcp-refuse", goal="try the refusing tool")
    assert drive(other) == "blocked"
    refused = ToolCall.objects.get(run=other)
    assert refused.status == "failed" and refused.error_class == "permanent"
    result = load_state(other.pk)["turns"][0]["calls"][0]["result"]
    assert "refuse refused: Error executing tool refuse" in result["error"]["message"]


def test_an_ambiguous_write_is_probed_on_the_server_not_repeated(engine, outbox, http_url):
    tools = mcp_tools(McpServer("crm", url=http_url), {"send_email": {**EMAIL, "timeout": 1.5}})
    script = {"mail": [call("send_email", to="ada@example.com", body="slow news"), say("sent")]}
    _agent("mcp-probe", tools, script, ["mail"])
    run = run_start(agent="mcp-probe", goal="send the slow email")
    assert drive(run) == "succeeded"
    email = ToolCall.objects.get(run=run)
    assert email.status == "succeeded" and email.facts["found"] is True
    assert [e["kind"] for e in effects(outbox)] == ["email"]  # sent once, confirmed by probe


def test_config_naming_a_missing_tool_is_refused(outbox):
    server = McpServer("crm", command=[sys.executable, str(SERVER)],
                       env={"CRM_OUTBOX": str(outbox)})
    with pytest.raises(ConfigError, match=r"has no tools \['send_fax'\]"):
        mcp_tools(server, {"send_fax": {"effect": "write"}})
    with pytest.raises(ConfigError, match="give exactly one of command= or url="):
        McpServer("x")


def test_rollback_runs_the_mapped_compensation_on_the_server(engine, outbox, http_url):
    from approvals.actions import ACTIONS
    from runs.models import Event
    from tests.console_factories import make_role_users

    tools = mcp_tools(McpServer("crm", url=http_url), {"send_email": EMAIL,
                                                       "refuse": {"effect": "read"}})
    script = {"mail": [call("send_email", to="ada@example.com", body="Hello"), say("sent")],
              "next": [call("refuse", reason="stop here")]}
    _agent("mcp-rollback", tools, script, ["mail", "next"])
    run = run_start(agent="mcp-rollback", goal="mail, then get stuck")
    assert drive(run) == "blocked"
    email = ToolCall.objects.get(run=run, tool="send_email")
    start = Event.objects.filter(run=run, type="step.started", data__step="mail").first().seq
    operator = make_role_users()["operator"]
    ACTIONS["rollback"].execute(operator, run, "wrong customer", to_seq=start - 1,
                               confirm="rollback")
    email.refresh_from_db()
    assert email.status == "compensated"
    recall = effects(outbox)[-1]
    assert recall == {"kind": "recall", "key": f"{email.idempotency_key}:undo",
                      "message_id": email.facts["message_id"]}
