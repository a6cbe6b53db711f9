"""Write-boundary scrubbing through the engine: configured secrets and streamed logs."""
from __future__ import annotations

import os
import tempfile

import pytest

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.redaction import Secrets, configured_secrets, marker, scrub_stream
from agentops.tools import ToolResult, tool
from ledger.artifacts import artifact_read
from ledger.models import ToolCall
from runs.models import Event, Snapshot
from runs.services import run_start
from tests.conftest import drive

pytestmark = pytest.mark.django_db
TOKEN = "tok_live_5f0c2a9e77"


@tool(effect="read")
def fetch(ctx, path: str) -> ToolResult:
    """Fetch a page with the service token from the environment (and echo it, carelessly)."""
    token = os.environ["AGENTOPS_TEST_SERVICE_TOKEN"]
    log = tempfile.TemporaryFile()  # noqa: SIM115 - handed to the engine, which closes it
    log.write(b"x" * ((1 << 20) - 5) + f"Authorization: {token}\n".encode() * 3)
    return ToolResult(facts={"path": path, "auth": f"Bearer {token}"},
                      summary=f"fetched with {token}", log=log)


def test_values_of_the_configured_secret_env_are_scrubbed_everywhere(engine, settings,
                                                                     monkeypatch):
    monkeypatch.setenv("AGENTOPS_TEST_SERVICE_TOKEN", TOKEN)
    settings.AGENTOPS_SECRET_ENV = ["AGENTOPS_TEST_SERVICE_TOKEN"]
    registry.register(Agent(name="fetcher", version="1", system_prompt="s", tools=[fetch],
                            plan=[StepSpec("s")], model=lambda: ScriptedModel(
                                {"s": [call("fetch", path="/a"), say(f"used {TOKEN}")]})))
    run = run_start(agent="fetcher", goal="fetch /a")
    assert drive(run) == "succeeded"
    row = ToolCall.objects.get(run=run)
    stored = [str(row.facts), row.summary, artifact_read(row.artifact_sha256).decode(),
              *(str(e.data) for e in Event.objects.filter(run=run)),
              *(str(s.state) for s in Snapshot.objects.filter(run=run))]
    assert not [s for s in stored if TOKEN in s]
    assert row.facts["auth"] == f"Bearer {marker(TOKEN)}"
    assert artifact_read(row.artifact_sha256).count(marker(TOKEN).encode()) == 3


def test_configured_secrets_follow_a_changed_setting_and_the_environment(settings, monkeypatch):
    """The settings' part is made once, so it must be made again when a setting changes; the
    values of AGENTOPS_SECRET_ENV are read from the environment each time."""
    assert configured_secrets().scrub_text("sk-first-value") == "sk-first-value"  # not yet one
    settings.AGENTOPS_SECRET_VALUES = ["sk-first-value"]
    assert configured_secrets().scrub_text("key sk-first-value") == f"key {marker('sk-first-value')}"
    settings.AGENTOPS_SECRET_VALUES = ["sk-second-value"]
    scrubbed = configured_secrets().scrub_text("sk-first-value sk-second-value")
    assert scrubbed == f"sk-first-value {marker('sk-second-value')}"
    settings.AGENTOPS_SECRET_ENV = ["AGENTOPS_TEST_ROTATED"]
    monkeypatch.setenv("AGENTOPS_TEST_ROTATED", "tok-one-1234")
    assert configured_secrets().scrub_text("tok-one-1234") == marker("tok-one-1234")
    monkeypatch.setenv("AGENTOPS_TEST_ROTATED", "tok-two-5678")
    assert configured_secrets().scrub_text("tok-two-5678") == marker("tok-two-5678")


def test_a_secret_split_across_two_reads_of_a_stream_is_still_found():
    secret = "split-secret-value"
    with tempfile.TemporaryFile() as src, tempfile.TemporaryFile() as dst:
        src.write(b"a" * 10 + secret.encode() + b"b" * 10)
        scrub_stream(src, dst, Secrets.of([secret]), chunk=15)  # the cut falls inside it
        dst.seek(0)
        assert dst.read() == b"a" * 10 + marker(secret).encode() + b"b" * 10
