"""A unit's events as the JSON text its one statement reads (runs.engine.runtime.unit_sql).

Each event is one JSON object ``jsonb_populate_record`` turns into a row of ``runs_event``;
its data is pasted in as the text ``NewEvent.data_json`` already made (checked by
``check_json`` when the event was made, scrubbed before it got here).
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from functools import lru_cache
from json.encoder import encode_basestring as _text  # how compact_json writes a str
from typing import Any

from agentops.jsonstate import compact_json
from runs.models.event import CURRENT_EVENT_SCHEMA


def events_json(run_id: Any, events: Sequence[Any], first_seq: int, at: dt.datetime,
                month: dt.date) -> str:
    """Return the events as the JSON array ``jsonb_populate_record`` reads (data pasted in as is)."""
    common = (f'"run_id":"{run_id}","schema_version":{CURRENT_EVENT_SCHEMA},'
              f'"at":"{at.isoformat()}",{_month_part(month)}')
    docs = [f'{_event_head(e, first_seq + i)},{common},"data":{e.data_json}}}'
            for i, e in enumerate(events)]
    return "[" + ",".join(docs) + "]"


@lru_cache(maxsize=64)
def _month_part(month: dt.date) -> str:
    """Return the month column of the events' JSON (``date.isoformat`` formats with sprintf)."""
    return f'"run_month":"{month.isoformat()}"'


def _event_head(e: Any, seq: int) -> str:
    """Return the event's own columns as an unclosed JSON object: the text ``compact_json``
    makes of them (its string escaping), written directly when they have their usual types."""
    attempt, key, text = e.attempt, e.key, _text
    if (type(e.tool_call_id) is str and type(e.actor) is str and type(e.caused_by) is str
            and isinstance(e.type, str) and (attempt is None or type(attempt) is int)
            and (key is None or type(key) is str)):
        head = (f'{{"seq":{seq:d},"type":{text(e.type)},"tool_call_id":{text(e.tool_call_id)},'
                f'"actor":{text(e.actor)},"caused_by":{text(e.caused_by)}')
        if attempt is not None:  # left out, None reads as NULL (see unit_rows.rows_json)
            head += f',"attempt":{attempt:d}'
        return head if key is None else f'{head},"key":{text(key)}'
    fields: dict[str, Any] = {"seq": seq, "type": e.type, "tool_call_id": e.tool_call_id,
                              "actor": e.actor, "caused_by": e.caused_by}
    if attempt is not None:
        fields["attempt"] = attempt
    if key is not None:
        fields["key"] = key
    return compact_json(fields)[:-1]
