"""What a durable step costs the database: time-ordered ids, and only the index entries queried.

A no-op step writes three events, one ledger row and one attempt. Its call id sorts by time (the
B-tree appends), the per-step event types stay out of the (run, type, seq) index, the ledger
keeps one unique (run, key) index where it had two and indexes by tool only running calls;
every query a page or the engine makes by those columns still finds an index, and a reused
key is still refused.
"""
import json
import time

import pytest
from django.db import connection, transaction

from agentops import clock
from ledger.errors import DuplicateToolCall
from ledger.models import ToolCall
from ledger.services.record import toolcalls_insert
from runs.engine.runtime.events import NewEvent, event_append
from runs.models import Event
from runs.models.event import PER_STEP_TYPES
from runs.services import run_start
from tests.conftest import drive
from tests.engine_agents import call, make_agent, say

pytestmark = pytest.mark.django_db


def _call(run, n, key):
    return ToolCall(tool_call_id=clock.new_id("tc"), run=run, step_key="s", turn=n,
                    tool="lookup", args={"n": n}, args_hash="h", idempotency_key=key,
                    status="succeeded", attempts=1)


def test_tool_call_ids_made_later_sort_later_and_end_in_random_digits():
    first = clock.new_id("tc")
    time.sleep(0.002)
    later = [clock.new_id("tc") for _ in range(3)]
    assert all(x > first for x in later) and len(first) == len("tc_") + 24
    # The console shows a call by its last 8 digits: those stay random, never the clock.
    assert len({x[-8:] for x in later}) == 3


def test_a_reused_idempotency_key_in_a_run_is_still_refused(run):
    event_append(run=run, expected_version=run.version, events=[],
                 also=[toolcalls_insert([_call(run, 1, "same")])])
    with pytest.raises(DuplicateToolCall):
        with transaction.atomic():
            event_append(run=run, expected_version=run.version, events=[NewEvent("run.note", {})],
                         also=[toolcalls_insert([_call(run, 2, "same")])])
    assert ToolCall.objects.filter(run=run, idempotency_key="same").count() == 1


def test_the_per_step_event_types_are_what_a_tool_step_writes(engine):
    make_agent("steps", {"s": [call("lookup", item="a"), call("lookup", item="b"), say("ok")]},
               plan=["s"])
    run = run_start(agent="steps", goal="two lookups")
    assert drive(run) == "succeeded"
    types = list(Event.objects.filter(run=run).values_list("type", flat=True))
    assert all(types.count(t) >= 2 for t in PER_STEP_TYPES)  # once per step or more
    assert types.count("step.started") == types.count("run.created") == 1  # these stay indexed


def _plan(sql, params):
    with connection.cursor() as cur:
        cur.execute("SET LOCAL enable_seqscan = off")  # a tiny test table: ask what it CAN use
        cur.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        plan = cur.fetchone()[0]
    return plan if isinstance(plan, list) else json.loads(plan)


def _indexes(node):
    found = {node["Index Name"]} if "Index Name" in node else set()
    for child in node.get("Plans", []):
        found |= _indexes(child)
    return found


def _parents(names):
    """Name each partition's index by the partitioned table's index it belongs to."""
    with connection.cursor() as cur:
        cur.execute("SELECT c.relname, p.relname FROM pg_inherits i "
                    "JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent "
                    "WHERE c.relname = ANY(%s)", [list(names)])
        parent = dict(cur.fetchall())
    return {parent.get(name, name) for name in names}


def _uses(qs):
    sql, params = qs.query.sql_with_params()
    with transaction.atomic():
        return _parents(_indexes(_plan(sql, params)[0]["Plan"]))


@pytest.mark.postgres
def test_every_query_by_event_type_or_tool_still_has_an_index(run):
    rare = Event.objects.filter(run=run, type="step.started").order_by("seq")
    assert "event_run_type" in _uses(rare)
    # Per-step types (a third of a run's events each) walk the run's (run, seq) index.
    frequent = Event.objects.filter(run=run, type="model.replied", seq__gt=3).order_by("-seq")
    assert "event_unique_seq" in _uses(frequent)
    assert "event_tool_call" in _uses(Event.objects.filter(run=run, tool_call_id="tc_x"))
    running = ToolCall.objects.filter(tool="lookup", status="running").order_by()
    assert _uses(running) == {"toolcall_tool_running"}
    by_run = ToolCall.objects.filter(run=run, status__in=["pending", "running"]).order_by()
    assert _uses(by_run) == {"toolcall_unique_run_key"}
    by_key = ToolCall.objects.filter(run_id=run.pk, idempotency_key__in=["k1", "k2"]).order_by()
    assert _uses(by_key) == {"toolcall_unique_run_key"}


def test_a_run_ending_right_after_its_last_step_keeps_that_steps_snapshot(engine):
    from runs.engine.runtime.snapshots import load_state, replay_state
    from runs.models import Snapshot

    make_agent("one", {"s": [call("big", n=80), say("ok")]}, plan=["s"])  # > 4 KB of events
    run = run_start(agent="one", goal="one big read")
    assert drive(run) == "succeeded"
    phases = list(Snapshot.objects.filter(run=run).order_by("seq").values_list("phase", "seq"))
    # The step's end took a snapshot; the run's end a unit later adds a few events, no copy.
    assert phases[-1][0] == "step_complete" and phases[-1][1] >= run.last_seq - 2
    assert load_state(run.pk) == replay_state(run.pk)
