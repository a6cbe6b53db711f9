"""Every Python block of docs/sdk.md runs, in order, in one namespace, and its asserts hold."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "sdk.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks() -> list[str]:
    """Return the page's fenced Python blocks."""
    return BLOCK.findall(DOC.read_text())


def test_the_page_has_the_sections_authors_need():
    text = DOC.read_text()
    for heading in ("## Agent", "## StepSpec", "### Step completion", "## @tool", "## Probes",
                    "## Compensation and its key", "## Approvals", "## Models", "## MCP tools",
                    "## Testing an agent with the scripted model", "## Run your own agent",
                    "## Testing against an OpenAI-compatible endpoint without a model"):
        assert f"\n{heading}\n" in text, heading
    assert len(blocks()) >= 8


@pytest.mark.django_db
@pytest.mark.timeout(240)
def test_every_python_block_runs(engine, settings, tmp_path, monkeypatch):
    # The MCP block starts the test CRM server by its file name, as a reader would.
    shutil.copy(ROOT / "tests" / "mcp" / "crm_server.py", tmp_path / "crm_server.py")
    monkeypatch.chdir(tmp_path)
    settings.AGENTOPS_LEASE_TTL_S = 120  # no lease-renewal thread during the slow MCP spawn
    namespace: dict = {"__name__": "sdk_docs"}
    for i, code in enumerate(blocks(), 1):
        try:
            exec(compile(code, f"docs/sdk.md block {i}", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"docs/sdk.md block {i} failed: {exc!r}\n{code}") from exc
