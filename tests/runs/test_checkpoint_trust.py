"""Checkpoint imports are trusted only when signed: forgeries, oversize files, symlinks and
every crafted directory get a one-line refusal, never a traceback or a run."""
from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tracemalloc
from pathlib import Path

import pytest
from django.core.management import call_command

from agentops.llm.scripted import call, say
from ledger.models import ToolCall
from runs import checkpoint_trust as trust
from runs.checkpoints import CheckpointRejected, checkpoint_export, checkpoint_import
from agentops.jsonstate import canonical_json
from runs.management.commands.agentops import Command
from runs.models import Run
from runs.services import run_start
from tests.conftest import drive

pytestmark = pytest.mark.django_db
SCRIPT = {"approve": [say("the refund is approved")],
          "refund": [call("charge", amount=-120), say("refunded")]}


@pytest.fixture
def halfway(engine, tmp_path, settings):
    """A checkpoint exported after step ``approve``, before the refund (step ``refund``)."""
    settings.AGENTOPS_CHECKPOINT_KEYS = ["checkpoint-key-" + "k" * 40]
    engine.make_agent("refunder", SCRIPT, plan=["approve", "refund"])
    run = run_start(agent="refunder", goal="refund order 7")
    assert drive(run) == "succeeded"
    from runs.models import Event

    seq = Event.objects.get(run=run, type="step.completed", data__step="approve").seq
    return checkpoint_export(run=run, seq=seq, directory=tmp_path / "cp")


def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2) + "\n")


def _forge_refund_done(cp: Path) -> None:
    """What an attacker can do without the key: mark the refund done, recompute sha256s."""
    def done(state):
        state["steps"]["refund"] = {**state["steps"].get("refund", {}), "status": "succeeded"}
    _edit(cp / "state.json", done)
    sha = hashlib.sha256((cp / "state.json").read_bytes()).hexdigest()

    def rehash(meta):
        meta["files"]["state.json"] = sha
        body = {k: v for k, v in meta.items() if k not in ("signature", "checksum")}
        meta["checksum"] = hashlib.sha256(canonical_json(body).encode()).hexdigest()
        meta["signature"] = "hmac-sha256:00000000:" + hashlib.sha256(
            canonical_json(body).encode()).hexdigest()
    _edit(cp / "meta.json", rehash)


def test_a_forged_checkpoint_with_the_refund_marked_done_is_refused(halfway, engine):
    _forge_refund_done(halfway)
    before = Run.objects.count()
    with pytest.raises(CheckpointRejected, match="signature does not verify"):
        checkpoint_import(directory=halfway)
    assert Run.objects.count() == before


def test_the_genuine_checkpoint_imports_and_refunds(halfway, engine):
    copy = checkpoint_import(directory=halfway)
    assert drive(copy) == "succeeded"
    assert ToolCall.objects.filter(run=copy, tool="charge", status="succeeded").count() == 1


def test_another_installations_key_does_not_verify(halfway, settings):
    settings.AGENTOPS_CHECKPOINT_KEYS = ["someone-elses-key-" + "q" * 40]
    with pytest.raises(CheckpointRejected, match="signature does not verify"):
        checkpoint_import(directory=halfway)


def test_an_old_key_still_verifies_after_rotation(halfway, settings, engine):
    settings.AGENTOPS_CHECKPOINT_KEYS = ["new-key-" + "n" * 40, *settings.AGENTOPS_CHECKPOINT_KEYS]
    assert checkpoint_import(directory=halfway).status == "queued"


def test_a_150_mb_state_is_refused_before_it_is_read(halfway):
    state = halfway / "state.json"
    with open(state, "r+b") as fh:
        fh.truncate(150 * 1024 * 1024)  # sparse: costs no disk, would cost memory to read
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointRejected, match="state.json is 157286400 bytes, over"):
            checkpoint_import(directory=halfway)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5 << 20  # the file was never read


def _sign(meta: dict) -> dict:
    return trust.meta_sign(meta)


def _crafted(base: Path, cp: Path) -> dict[str, Path]:
    """Return bad checkpoint directories, by what is wrong with them."""
    out: dict[str, Path] = {}

    def copy(name: str) -> Path:
        out[name] = base / name
        shutil.copytree(cp, out[name], symlinks=True)
        return out[name]

    out["does not exist"] = base / "nowhere"
    (base / "a-file").write_text("x")
    out["a file, not a directory"] = base / "a-file"
    (base / "empty").mkdir()
    out["empty directory"] = base / "empty"
    os.symlink(cp, base / "linked-dir")
    out["directory is a symlink"] = base / "linked-dir"
    d = copy("meta symlink")
    (d / "meta.json").rename(d / "real-meta.json")
    os.symlink(d / "real-meta.json", d / "meta.json")
    d = copy("state symlink to /etc/passwd")
    (d / "state.json").unlink()
    os.symlink("/etc/passwd", d / "state.json")
    copy("meta not JSON").joinpath("meta.json").write_bytes(b"{not json")
    copy("meta not UTF-8").joinpath("meta.json").write_bytes(b"\xff\xfe\x00garbage")
    copy("meta is an array").joinpath("meta.json").write_text("[1, 2, 3]")
    copy("meta nested 100000 deep").joinpath("meta.json").write_text("[" * 100000)
    _edit(copy("schema_version is a dict") / "meta.json", lambda m: m.update(schema_version={"a": 1}))
    _edit(copy("meta.json unsigned") / "meta.json", lambda m: m.pop("signature"))
    _edit(copy("signature not a string") / "meta.json", lambda m: m.update(signature=7))
    _edit(copy("signature scheme sha256") / "meta.json",
          lambda m: m.update(signature="sha256:x:" + "0" * 64))
    _forge_refund_done(copy("refund forged"))
    (copy("state missing") / "state.json").unlink()
    d = copy("state is a directory")
    (d / "state.json").unlink()
    (d / "state.json").mkdir()
    d = copy("state.json cut short")
    (d / "state.json").write_bytes((d / "state.json").read_bytes()[:50])
    d = copy("signed meta, files not a dict")
    _edit(d / "meta.json", lambda m: m.update(_sign({**m, "files": ["state.json"]})))
    d = copy("signed meta, seq is a string")
    _edit(d / "meta.json", lambda m: m.update(_sign({**m, "seq": "7"})))
    d = copy("signed, state.json not JSON")
    (d / "state.json").write_bytes(b"\x00\x01 not json")
    _edit(d / "meta.json", lambda m: m.update(_sign({**m, "files": {
        **m["files"], "state.json": hashlib.sha256(b"\x00\x01 not json").hexdigest()}})))
    d = copy("signed, state.json a list")
    (d / "state.json").write_bytes(b"[]")
    _edit(d / "meta.json", lambda m: m.update(_sign({**m, "files": {
        **m["files"], "state.json": hashlib.sha256(b"[]").hexdigest()}})))
    d = copy("signed, state without steps")
    _edit(d / "state.json", lambda s: s.pop("steps"))
    sha = hashlib.sha256((d / "state.json").read_bytes()).hexdigest()
    _edit(d / "meta.json", lambda m: m.update(_sign({**m, "files": {**m["files"],
                                                                     "state.json": sha}})))
    return out


def test_every_crafted_directory_gets_a_one_line_error_and_a_nonzero_exit(halfway, tmp_path,
                                                                         monkeypatch):
    # run_from_argv closes every connection when it ends, which would end the test's own.
    monkeypatch.setattr("django.core.management.base.connections.close_all", lambda: None)
    (tmp_path / "crafted").mkdir()
    crafted = _crafted(tmp_path / "crafted", halfway)
    assert len(crafted) == 23
    runs_before = Run.objects.count()
    for what, directory in crafted.items():
        err = io.StringIO()
        command = Command(stdout=io.StringIO(), stderr=err)
        with pytest.raises(SystemExit) as exit_:
            command.run_from_argv(["manage.py", "agentops", "import", str(directory)])
        lines = err.getvalue().strip().splitlines()
        assert exit_.value.code != 0, what
        assert len(lines) == 1 and lines[0].startswith("CommandError: "), (what, lines)
        assert "Traceback" not in err.getvalue(), what
    assert Run.objects.count() == runs_before


def test_the_command_imports_a_genuine_checkpoint(halfway, capsys):
    call_command("agentops", "import", str(halfway))
    assert "imported as run" in capsys.readouterr().out
