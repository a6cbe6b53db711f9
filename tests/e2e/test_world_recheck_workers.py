"""A real worker is SIGKILLed mid-call; while no worker holds the run its catalog is upgraded;
the worker that recovers it re-checks the tool's version probe and blocks the run before
running the call again, and every event's cause chain ends at its start or the recovery."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from agentops.causes import cause_seq
from runs.causation import event_cause_chain
from runs.models import Event, Run
from runs.services import run_start
from tests.e2e.workers import Worker, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _agents(settings, tmp_path, monkeypatch):
    """The agent registered in this process too (run_start looks it up)."""
    monkeypatch.setenv("AGENTOPS_TEST_CATALOG_FILE", str(tmp_path / "catalog.txt"))
    import tests.world_agents  # noqa: F401

    settings.AGENTOPS_ENQUEUE_TICKS = True


def test_a_recovered_run_blocks_when_its_catalog_changed_while_no_worker_held_it(tmp_path):
    version, marker = tmp_path / "catalog.txt", tmp_path / "attempts.txt"
    version.write_text("2026.11\n")
    env = {"AGENTOPS_AGENTS": "tests.world_agents", "AGENTOPS_TOOL_TIMEOUT_S": "60",
           "AGENTOPS_TEST_CATALOG_FILE": str(version)}
    first, second = Worker("w1", tmp_path, **env), Worker("w2", tmp_path, **env)
    first.start()
    try:
        run = run_start(agent="world_catalog", goal="read", input={"marker": str(marker)})
        wait_until(lambda: marker.exists() and marker.read_text(), 60, "the first attempt")
        seen = Event.objects.get(run=run, type="resource.version")
        assert seen.data == {"tool": "catalog_read", "version": "2026.11"}
        first.kill()  # SIGKILL mid-call
        version.write_text("2026.12\n")  # upgraded while nobody holds the run
        second.start()
        blocked = wait_until(lambda: Run.objects.filter(pk=run.pk, status="blocked").first(),
                             90, "the recovered run to block")
    finally:
        first.kill()
        second.stop()

    assert blocked.attention_reason == "world_changed" and blocked.recoveries == 1
    assert "catalog_read version was 2026.11, now 2026.12" in blocked.attention_detail
    assert len(marker.read_text().splitlines()) == 1  # the call did not run again
    changed = Event.objects.get(run=run, type="world.changed")
    assert changed.data["why"] == "recovery"
    recovered = Event.objects.get(run=run, type="run.recovered")
    assert recovered.caused_by.startswith("recovery:")
    for e in Event.objects.filter(run=run):
        chain = event_cause_chain(run=run, seq=e.seq)
        assert chain.root_kind in {"start", "recovery"}, (e.seq, e.type, e.caused_by)
        assert all(cause_seq(link.caused_by) == nxt.seq
                   for link, nxt in zip(chain.links, chain.links[1:]))
    assert event_cause_chain(run=run, seq=changed.seq).root_kind == "recovery"

    viewer = User.objects.create_user("watcher")
    viewer.groups.add(Group.objects.get_or_create(name="operators")[0])
    client = Client()
    client.force_login(viewer)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "data-before>2026.11<" in page and "data-now>2026.12<" in page
    history = client.get(f"/runs/{run.pk}/history/?why={changed.seq}").content.decode()
    assert f"Why did #{changed.seq} happen?" in history and "took the run back" in history
