"""A checkpoint signed with the installation's own key but holding a value that cannot be
stored (a NUL byte, an integer out of range, a wrong type) is refused through ``agentops
import`` with one line naming the field, and nothing is written (issue 39 item 8)."""
from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from agentops.llm.scripted import call, say
from runs import checkpoint_trust as trust
from runs.checkpoints import checkpoint_export
from runs.management.commands.agentops import Command
from runs.models import Event, Run, Step
from runs.services import run_start
from tests.conftest import drive

pytestmark = pytest.mark.django_db
SCRIPT = {"approve": [say("approved")], "refund": [call("charge", amount=-120), say("refunded")]}
Change = Callable[[dict], None]


@pytest.fixture
def checkpoint(engine, tmp_path, settings) -> Path:
    """A checkpoint of a two-step run exported after its first step, signed with our key."""
    settings.AGENTOPS_CHECKPOINT_KEYS = ["checkpoint-key-" + "v" * 40]
    engine.make_agent("refunder", SCRIPT, plan=["approve", "refund"])
    run = run_start(agent="refunder", goal="refund order 7")
    assert drive(run) == "succeeded"
    seq = Event.objects.get(run=run, type="step.completed", data__step="approve").seq
    return checkpoint_export(run=run, seq=seq, directory=tmp_path / "cp")


def _resigned(cp: Path, target: Path, *, meta: Change | None = None,
              state: Change | None = None) -> Path:
    """Copy ``cp`` to ``target`` with its JSON changed, re-hashed and re-signed with our key."""
    target.mkdir()
    for name in ("context.json", "env.json"):
        (target / name).write_bytes((cp / name).read_bytes())
    data = json.loads((cp / "state.json").read_text())
    if state:
        state(data)
    raw = json.dumps(data).encode()  # ensure_ascii: a NUL byte travels as \u0000
    (target / "state.json").write_bytes(raw)
    m = json.loads((cp / "meta.json").read_text())
    m["files"]["state.json"] = hashlib.sha256(raw).hexdigest()
    if meta:
        meta(m)
    (target / "meta.json").write_text(json.dumps(trust.meta_sign(m)))
    return target


def _goal(value: str) -> tuple[Change, Change]:
    return (lambda m: m.update(goal=value)), (lambda s: s["run"].update(goal=value))


def _set(path: str, value) -> Change:
    def change(doc: dict) -> None:
        *parents, last = path.split(".")
        for part in parents:
            doc = doc[int(part)] if isinstance(doc, list) else doc[part]
        doc[int(last) if isinstance(doc, list) else last] = value
    return change


NUL_GOAL = _goal("refund\x00order 7")
CASES: dict[str, tuple[str, Change | None, Change | None]] = {
    # what: (the field the message must name, change to meta.json, change to state.json)
    "NUL in the goal": ("goal", *NUL_GOAL),
    "NUL in a step title": ("state.json: plan[1].title", None, _set("plan.1.title", "re\x00fund")),
    "NUL in an input key": ("state.json: run.input.a\\u0000b", None,
                            _set("run.input", {"a\x00b": 1})),
    "NUL deep in a fact": ("state.json: facts", None, _set("facts", {"x": {"y": ["ok", "\x00"]}})),
    "budget_tokens past 64 bits": ("meta.json: budget.budget_tokens",
                                   _set("budget.budget_tokens", 1 << 70), None),
    "recovery_limit negative": ("meta.json: budget.recovery_limit",
                                _set("budget.recovery_limit", -1), None),
    "budget_model_calls past its column": ("meta.json: budget.budget_model_calls",
                                           _set("budget.budget_model_calls", 1 << 40), None),
    "usage.tokens huge": ("state.json: usage.tokens", None, _set("usage.tokens", 10 ** 30)),
    "a huge integer in the input": ("state.json: run.input.n", None,
                                    _set("run.input", {"n": 10 ** 40})),
    "budget_tool_calls a string": ("meta.json: budget.budget_tool_calls",
                                   _set("budget.budget_tool_calls", "ten"), None),
    "recoveries a string": ("state.json: recoveries", None, _set("recoveries", "3")),
    "usage.tokens a float": ("state.json: usage.tokens", None, _set("usage.tokens", 1.5)),
    "a step key a number": ("state.json: plan[0].key", None, _set("plan.0.key", 5)),
    "a step title too long": ("state.json: plan[0].title", None, _set("plan.0.title", "t" * 300)),
    "depends_on a string": ("state.json: plan[1].depends_on", None,
                            _set("plan.1.depends_on", "approve")),
    "run input a string": ("state.json: run.input", None, _set("run.input", "x")),
    "steps an array": ("state.json: steps", None, _set("steps", [])),
    "current_step an object": ("state.json: current_step", None, _set("current_step", {"a": 1})),
}


def _import(directory: Path) -> tuple[int, list[str]]:
    err = io.StringIO()
    command = Command(stdout=io.StringIO(), stderr=err)
    with pytest.raises(SystemExit) as exit_:
        command.run_from_argv(["manage.py", "agentops", "import", str(directory)])
    return exit_.value.code, err.getvalue().strip().splitlines()


@pytest.mark.parametrize("what", list(CASES))
def test_import_of_a_signed_checkpoint_with_a_bad_value_names_the_field(
        what, checkpoint, tmp_path, monkeypatch):
    # run_from_argv closes every connection when it ends, which would end the test's own.
    monkeypatch.setattr("django.core.management.base.connections.close_all", lambda: None)
    field, meta, state = CASES[what]
    bad = _resigned(checkpoint, tmp_path / "bad", meta=meta, state=state)
    runs, steps, events = Run.objects.count(), Step.objects.count(), Event.objects.count()
    code, lines = _import(bad)
    assert code != 0, what
    assert len(lines) == 1 and lines[0].startswith("CommandError: "), (what, lines)
    assert field in lines[0] and "Traceback" not in lines[0], (what, lines)
    assert (Run.objects.count(), Step.objects.count(), Event.objects.count()) == \
        (runs, steps, events)


def test_the_same_checkpoint_resigned_unchanged_imports(checkpoint, tmp_path, capsys):
    """The copy-and-resign helper itself produces an importable checkpoint."""
    from django.core.management import call_command

    call_command("agentops", "import", str(_resigned(checkpoint, tmp_path / "same")))
    assert "imported as run" in capsys.readouterr().out
