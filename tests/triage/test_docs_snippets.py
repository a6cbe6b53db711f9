"""Every Python block of docs/triage.md runs, in order, in one namespace, and its asserts hold."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "triage.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


@pytest.mark.django_db
def test_every_python_block_runs(engine):
    blocks = BLOCK.findall(DOC.read_text())
    assert blocks, "docs/triage.md has no Python block"
    namespace: dict = {"__name__": "triage_docs"}
    for i, code in enumerate(blocks, 1):
        try:
            exec(compile(code, f"docs/triage.md block {i}", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"docs/triage.md block {i} failed: {exc!r}\n{code}") from exc
