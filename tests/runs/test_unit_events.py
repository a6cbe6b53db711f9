"""runs/engine/runtime/unit_events.py: a unit's events as the JSON text its statement reads."""
from __future__ import annotations

import datetime as dt
import json
import uuid

import pytest

from agentops.jsonstate import compact_json
from runs.engine.runtime.events import NewEvent
from runs.engine.runtime.unit_events import events_json
from runs.event_types import EventType
from runs.models.event import CURRENT_EVENT_SCHEMA

AT = dt.datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=dt.UTC)
MONTH = dt.date(2026, 1, 1)


def _as_before(run_id: str, events: list[NewEvent], first_seq: int) -> str:
    """The text the unit wrote before the heads were written directly (a dict per event)."""
    docs = []
    for i, e in enumerate(events):
        head = {"seq": first_seq + i, "type": e.type, "tool_call_id": e.tool_call_id,
                "actor": e.actor, "caused_by": e.caused_by}
        if e.attempt is not None:
            head["attempt"] = e.attempt
        if e.key is not None:
            head["key"] = e.key
        docs.append(f'{compact_json(head)[:-1]},"run_id":"{run_id}","schema_version":'
                    f'{CURRENT_EVENT_SCHEMA},"at":"{AT.isoformat()}","run_month":"{MONTH.isoformat()}",'
                    f'"data":{e.data_json}}}')
    return "[" + ",".join(docs) + "]"


@pytest.mark.parametrize("text", ["plain", 'quote " and \\ back', "tab\tnew\nline\x01",
                                  "ünïcødé ✓ 日本", "", "</script>"])
def test_event_heads_are_the_text_compact_json_makes(text: str) -> None:
    """Ids, actors, causes and keys with quotes, control characters or non-ASCII text read
    back exactly as given (written as compact_json writes them)."""
    run_id = str(uuid.uuid4())
    events = [NewEvent(EventType.TOOL_STARTED, {"id": text, "attempt": 2}, tool_call_id=text,
                       attempt=2, key=f"k{text}", actor=text, caused_by=text),
              NewEvent(EventType.MODEL_REQUESTED, {"step": text, "turn": 1}, actor=text)]
    made = events_json(run_id, events, 41, AT, MONTH)
    assert made == _as_before(run_id, events, 41)
    rows = json.loads(made)
    assert [r["seq"] for r in rows] == [41, 42]
    assert rows[0]["tool_call_id"] == rows[0]["actor"] == rows[0]["caused_by"] == text
    assert rows[0]["key"] == f"k{text}" and rows[0]["attempt"] == 2
    assert "attempt" not in rows[1] and "key" not in rows[1]


def test_an_event_with_unusual_types_reads_back_as_compact_json_writes_it() -> None:
    """A bool attempt or a None actor (never made by the engine) still reads back as JSON
    (true, null), not as Python's text for them."""
    e = NewEvent(EventType.TOOL_STARTED, {"id": "c"}, tool_call_id="c")
    e.attempt, e.actor = True, None  # type: ignore[assignment]
    made = events_json("r", [e], 1, AT, MONTH)
    assert made == _as_before("r", [e], 1)
    assert json.loads(made)[0]["attempt"] is True and json.loads(made)[0]["actor"] is None
