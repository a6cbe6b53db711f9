"""docs/settings.md lists every setting the code reads, and nothing the code does not read."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPS = ("agentops", "runs", "ledger", "approvals")
_READS = [
    re.compile(r"""(?:_env\w*|_csv|os\.environ\.get|os\.getenv)\(\s*["']([A-Z][A-Z0-9_]+)["']"""),
    re.compile(r"""os\.environ\[\s*["']([A-Z][A-Z0-9_]+)["']\s*\]"""),
    re.compile(r"""getattr\(\s*settings\s*,\s*["'](AGENTOPS_[A-Z0-9_]+)["']"""),
    re.compile(r"""\bsettings\.(AGENTOPS_[A-Z0-9_]+)"""),
]
_ROW = re.compile(r"^\|\s*((?:`[A-Z][A-Z0-9_]+`(?:,\s*)?)+)\s*\|", re.M)


def names_read_by_code() -> set[str]:
    """Return every environment variable / AGENTOPS_* setting the application code reads."""
    found: set[str] = set()
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            text = path.read_text()
            for pattern in _READS:
                found.update(pattern.findall(text))
    return found


def names_documented() -> set[str]:
    """Return the setting names in the first column of docs/settings.md's tables."""
    text = (ROOT / "docs" / "settings.md").read_text()
    return {name for cell in _ROW.findall(text) for name in re.findall(r"`([A-Z0-9_]+)`", cell)}


def test_every_setting_the_code_reads_is_documented():
    missing = names_read_by_code() - names_documented()
    assert not missing, f"add these to docs/settings.md: {sorted(missing)}"


def test_every_documented_setting_is_read_by_the_code():
    unread = names_documented() - names_read_by_code()
    assert not unread, f"docs/settings.md lists settings nothing reads: {sorted(unread)}"


def test_the_docs_name_no_missing_module_or_setting():
    docs = "\n".join(p.read_text() for p in (ROOT / "docs").glob("*.md"))
    for gone in ("AGENTOPS_SNAPSHOT_EVERY", "runs.engine.approval_waits"):
        assert gone not in docs
