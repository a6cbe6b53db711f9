"""Snapshots: JSON-only, checksummed, migrated or refused by schema version."""
import datetime as dt

import pytest

from runs.engine.runtime import snapshots
from runs.engine.runtime.snapshots import load_state, migrate_state, snapshot_build
from runs.errors import UnknownSchemaVersion
from agentops.jsonstate import NotJSONSerializable
from runs.models import Snapshot


def test_non_json_state_fails_at_save_with_the_key_path(run):
    state = load_state(run.pk)
    state["run"]["input"] = {"when": dt.datetime(2026, 1, 1)}
    with pytest.raises(NotJSONSerializable) as err:
        snapshot_build(run_id=run.pk, state=state, phase="x", agent_version="1")
    assert err.value.path == "$state.run.input.when"


@pytest.mark.parametrize("bad", [{1, 2}, object(), float("nan")])
def test_sets_objects_and_nan_are_refused(run, bad):
    state = load_state(run.pk)
    state["facts"]["x"] = bad
    with pytest.raises(NotJSONSerializable, match=r"\$state\.facts\.x"):
        snapshot_build(run_id=run.pk, state=state, phase="x", agent_version="1")


def test_snapshot_records_size_and_checksum(run):
    snap = snapshot_build(run_id=run.pk, state=load_state(run.pk), phase="step_complete", agent_version="1")
    snap.save()
    stored = Snapshot.objects.get(pk=snap.pk)
    assert stored.size > 0 and len(stored.sha256) == 64 and stored.seq == 1


def test_unknown_schema_version_fails_with_both_versions():
    with pytest.raises(UnknownSchemaVersion, match="schema 0 has no migrator"):
        migrate_state({}, 0)
    with pytest.raises(UnknownSchemaVersion, match="newer"):
        migrate_state({}, 99)


def test_registered_migrator_upgrades_old_state(monkeypatch):
    monkeypatch.setattr(snapshots, "_MIGRATORS", {})
    snapshots.register_migrator(0)(lambda s: {**s, "upgraded": True})
    assert migrate_state({"a": 1}, 0) == {"a": 1, "upgraded": True}


def test_a_snapshot_written_in_a_unit_stores_its_state_as_the_orm_does(run):
    """The unit's one statement (PostgreSQL) pastes the state's canonical text: the stored
    value is the state itself, non-ASCII, nesting and key order included."""
    from agentops.redaction import EMPTY
    from agentops.writes import RowsInsert
    from runs.engine.runtime.events import NewEvent, event_append
    from runs.engine.runtime.snapshots import snapshot_with_text

    state = load_state(run.pk)
    state["facts"]["x"] = {"z": [1, 2.5, None, True], "a": "é ☃ \U0001f600 \"q\" \\ \n"}
    snap, text = snapshot_with_text(run_id=run.pk, state=state, phase="x", agent_version="1")
    event_append(run=run, expected_version=run.version, events=[NewEvent("run.note", {})],
                 also=[RowsInsert(Snapshot, [snap], json_texts=[{"state": text}])],
                 secrets=EMPTY)
    stored = Snapshot.objects.get(run_id=run.pk, phase="x")
    assert stored.state == state and stored.seq == state["seq"] and stored.sha256 == snap.sha256
