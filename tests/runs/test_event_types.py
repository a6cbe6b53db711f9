"""The EventType registry: every type is reduced or audit-only, nothing undeclared is written."""
from __future__ import annotations

import pathlib
import re

import pytest
from django.urls import reverse

from runs.engine.core import reducer
from runs.engine.runtime.events import NewEvent, event_append
from runs.errors import UnknownEventType
from runs.event_types import AUDIT_ONLY, REDUCED, EventType
from runs.models import Event
from tests.console_factories import client_for, make_attention_run
from tests.factories import make_run

_ROOT = pathlib.Path(__file__).resolve().parents[2]
_EMITTED = re.compile(r'NewEvent\(\s*"([^"]+)"')


def test_reduced_types_are_exactly_the_reducer_s_handlers():
    assert set(reducer._HANDLERS) == {t.value for t in REDUCED}
    assert not AUDIT_ONLY & REDUCED


def test_every_type_the_code_emits_is_declared():
    emitted = set()
    for folder in ("runs", "ledger", "approvals", "agentops"):
        for path in (_ROOT / folder).rglob("*.py"):
            emitted |= set(_EMITTED.findall(path.read_text()))
    emitted.add("tool.result")  # runs.engine.runtime.events.result_event
    assert emitted, "found no emitters: the pattern is stale"
    assert emitted <= set(EventType.values), emitted - set(EventType.values)


def test_an_undeclared_type_is_refused_and_nothing_is_written(db):
    run = make_run()
    with pytest.raises(UnknownEventType, match="'tool.exploded' is not declared"):
        event_append(run=run, events=[NewEvent("tool.exploded", {})])
    assert list(Event.objects.filter(run=run).values_list("type", flat=True)) == ["run.created"]


def test_the_console_event_filter_lists_the_registry(db, users):
    run = make_attention_run()
    html = client_for(users["viewer"]).get(reverse("console:run", args=[run.pk])).content.decode()
    select = html[html.index('name="type" aria-label="Event type"'):]
    select = select[:select.index("</select>")]
    assert re.findall(r'<option value="([a-z_.]+)"', select) == EventType.values
