"""Every Python block of docs/triage.md runs, in order, in one namespace, through the engine."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.triage.world import world

DOC = Path(__file__).resolve().parents[2] / "docs" / "triage.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


@pytest.mark.django_db
def test_every_python_block_runs(engine):
    blocks = BLOCK.findall(DOC.read_text())
    assert blocks, "docs/triage.md has runnable examples"
    namespace: dict = {"__name__": "triage_docs"}
    world.reset()
    try:
        for i, code in enumerate(blocks, 1):
            try:
                exec(compile(code, f"docs/triage.md block {i}", "exec"), namespace)
            except Exception as exc:
                raise AssertionError(f"docs/triage.md block {i} failed: {exc!r}\n{code}") from exc
    finally:
        world.reset()


def test_each_stop_of_issue_32_has_its_own_runnable_example():
    text = DOC.read_text()
    for heading, reason in (
            ("## Run budgets: failures across steps, deadlines, child shares", "failure_budget"),
            ("## Edit plan and Restart from input in the recommendation", "restart"),
            ("## The world changed while this run waited", "world_changed"),
            ("## Stopped by the memory budget, or short of a count", "memory_budget")):
        assert f"\n{heading}\n" in text, heading
        section = text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
        assert "```python" in section and reason in section, heading
