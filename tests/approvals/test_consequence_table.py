"""docs/triage.md's table "action → what it does to each effect class" is the model's."""
from __future__ import annotations

from io import StringIO
from pathlib import Path

from django.core.management import call_command


def test_the_docs_table_is_generated_from_the_one_model():
    out = StringIO()
    call_command("consequence_table", stdout=out)
    table = out.getvalue().strip()
    assert table.startswith("| Action | read | idempotent write (keyed) |")
    docs = Path(__file__).resolve().parents[2].joinpath("docs", "triage.md").read_text()
    assert table in docs, "docs/triage.md drifted: paste `manage.py consequence_table`"
    assert "this may send the email a second time" in table
