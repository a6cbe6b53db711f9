"""Checkpoint files: export -> import round trip, atomic export, tampered files refused."""
import hashlib
import json
import shutil

import pytest

from agentops.llm.scripted import call, say
from runs import checkpoints
from runs.checkpoints import CheckpointRejected, checkpoint_export, checkpoint_import
from runs.engine.runtime.snapshots import load_state, replay_state
from runs.models import Event, Snapshot
from runs.services import run_start
from tests.conftest import drive

pytestmark = pytest.mark.django_db
SCRIPT = {"quote": [call("lookup", item="book"), say("quoted")],
          "pay": [call("charge", amount=42), say("paid")]}
_RUN_LOCAL = ("seq", "status", "wait", "imported", "self_checked")


@pytest.fixture
def finished(engine):
    """A succeeded run of two steps (a read and an idempotent write)."""
    engine.make_agent("exported", SCRIPT, plan=["quote", "pay"])
    run = run_start(agent="exported", goal="sell a book", input={"isbn": "123"})
    assert drive(run) == "succeeded"
    return run


def _same(a: dict, b: dict) -> bool:
    strip = lambda s: {k: v for k, v in s.items() if k not in _RUN_LOCAL}  # noqa: E731
    return strip(a) == strip(b)


def test_export_writes_four_files_with_checksums(finished, tmp_path):
    out = checkpoint_export(run=finished, directory=tmp_path / "out" / "cp")
    assert sorted(p.name for p in out.iterdir()) == ["context.json", "env.json", "meta.json",
                                                     "state.json"]
    meta = json.loads((out / "meta.json").read_text())
    assert meta["schema_version"] == 1 and meta["seq"] == finished.last_seq
    for name, sha in meta["files"].items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == sha
    env = json.loads((out / "env.json").read_text())
    assert {"name": "charge", "effect": "write", "effect_class": "idempotent",
            "idempotent": True, "probe": False} in env["tools"]
    assert env["python"] and env["django"] and "AGENTOPS_INLINE_RESULT_BYTES" in env["settings"]
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["cp"]


def test_round_trip_gives_the_source_state(finished, tmp_path):
    source = load_state(finished.pk)
    out = checkpoint_export(run=finished, directory=tmp_path / "out" / "cp")
    copy = checkpoint_import(directory=out, actor="support")
    assert copy.pk != finished.pk and copy.status == "queued" and copy.goal == "sell a book"
    imported = load_state(copy.pk)
    assert _same(imported, source)
    assert imported["imported"]["from_run"] == str(finished.pk)
    assert replay_state(copy.pk) == imported
    assert Snapshot.objects.filter(run=copy, phase="imported").exists()
    assert copy.tokens_used == finished.tokens_used and copy.steps_done == 2


def test_an_imported_run_passes_its_self_check_and_finishes(finished, tmp_path, engine):
    copy = checkpoint_import(directory=checkpoint_export(run=finished, directory=tmp_path / "out" / "cp"))
    assert drive(copy) == "succeeded"
    assert Event.objects.filter(run=copy, type="guard.self_checked").count() == 1
    assert engine.world.count("charge") == 1  # the source's charge; nothing ran twice


def test_export_at_an_earlier_seq_and_the_import_continues_from_there(finished, tmp_path, engine):
    seq = Event.objects.get(run=finished, type="step.completed", data__step="quote").seq
    copy = checkpoint_import(directory=checkpoint_export(run=finished, seq=seq,
                                                         directory=tmp_path / "out" / "cp"))
    assert _same(load_state(copy.pk), load_state(finished.pk, upto_seq=seq))
    assert drive(copy) == "succeeded"
    assert engine.world.count("charge") == 2  # a new run, with its own idempotency keys


def test_a_crash_mid_export_leaves_nothing_import_would_accept(finished, tmp_path, monkeypatch):
    real = checkpoints._write_file
    written = []

    def dies_on_the_third(path, data):
        if len(written) == 2:
            raise OSError("disk full")
        written.append(path)
        real(path, data)

    monkeypatch.setattr(checkpoints, "_write_file", dies_on_the_third)
    with pytest.raises(OSError):
        checkpoint_export(run=finished, directory=tmp_path / "out" / "cp")
    assert list((tmp_path / "out").iterdir()) == []  # no target, no temporary directory


def test_a_killed_export_leaves_only_a_hidden_partial_directory_that_is_refused(
        finished, tmp_path, monkeypatch):
    real = checkpoints._write_file

    def killed_before_meta(path, data):
        if path.name == "meta.json":
            raise KeyboardInterrupt  # the process dies here: cleanup does not run either
        real(path, data)

    monkeypatch.setattr(checkpoints, "_write_file", killed_before_meta)
    monkeypatch.setattr(checkpoints.shutil, "rmtree", lambda *a, **k: None)
    with pytest.raises(KeyboardInterrupt):
        checkpoint_export(run=finished, directory=tmp_path / "out" / "cp")
    assert not (tmp_path / "out" / "cp").exists()
    [partial] = list((tmp_path / "out").iterdir())
    assert partial.name.startswith(".cp.") and partial.name.endswith(".partial")
    with pytest.raises(CheckpointRejected, match="has no meta.json"):
        checkpoint_import(directory=partial)


@pytest.fixture
def exported(finished, tmp_path):
    """A checkpoint directory of the finished run."""
    return checkpoint_export(run=finished, directory=tmp_path / "out" / "cp")


def _rewrite(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def test_a_tampered_state_file_is_refused(exported):
    _rewrite(exported / "state.json", lambda s: s["run"].update(goal="wire money"))
    with pytest.raises(CheckpointRejected, match="state.json does not match its checksum"):
        checkpoint_import(directory=exported)


def test_a_tampered_meta_file_is_refused(exported):
    sha = hashlib.sha256((exported / "state.json").read_bytes()).hexdigest()
    _rewrite(exported / "meta.json", lambda m: m["files"].update({"state.json": sha[::-1]}))
    with pytest.raises(CheckpointRejected, match="signature does not verify"):
        checkpoint_import(directory=exported)


def test_consistent_tampering_signed_with_the_key_is_caught_by_the_context_check(exported):
    """A holder of the checkpoint key who edits state.json still cannot skip the context check."""
    _rewrite(exported / "state.json", lambda s: s["facts"].clear())
    sha = hashlib.sha256((exported / "state.json").read_bytes()).hexdigest()

    def resign(meta):
        meta["files"]["state.json"] = sha
        meta.update(checkpoints.trust.meta_sign(meta))

    _rewrite(exported / "meta.json", resign)
    with pytest.raises(CheckpointRejected, match="context.json is not the context"):
        checkpoint_import(directory=exported)


def test_a_newer_checkpoint_schema_is_refused(exported):
    _rewrite(exported / "meta.json", lambda m: m.update(schema_version=2))
    with pytest.raises(CheckpointRejected, match="schema_version 2 is not supported"):
        checkpoint_import(directory=exported)


def test_an_agent_that_is_not_registered_here_is_refused(exported, engine, settings):
    from agentops.agents import registry

    registry._agents.pop(("exported", "1"))
    with pytest.raises(CheckpointRejected, match="no agent exported@1 is registered"):
        checkpoint_import(directory=exported)


def test_an_agent_whose_tools_differ_here_is_refused(exported, engine):
    engine.make_agent("exported", SCRIPT, plan=["quote", "pay"])  # same version ...
    from agentops.agents import registry
    from agentops.tools import tool

    @tool(effect="write", reversibility="irreversible", name="charge")
    def charge(ctx, amount: int):
        """Charge for real."""

    agent = registry.get("exported", "1")
    agent._tools["charge"] = charge
    agent.tools = [charge if t.name == "charge" else t for t in agent.tools]
    with pytest.raises(CheckpointRejected, match="charge: idempotent there, irreversible here"):
        checkpoint_import(directory=exported)


def test_export_refuses_an_existing_directory(finished, tmp_path):
    (tmp_path / "out" / "cp").mkdir(parents=True)
    with pytest.raises(CheckpointRejected, match="already exists"):
        checkpoint_export(run=finished, directory=tmp_path / "out" / "cp")


def test_a_missing_file_is_refused(exported, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(exported, copy)
    (copy / "env.json").unlink()
    with pytest.raises(CheckpointRejected, match="env.json is missing"):
        checkpoint_import(directory=copy)
