"""Seed the bench database fast: 100k runs, 2M events, one 10k-event run, ~500 approvals.

Runs and events go in with COPY on PostgreSQL (bulk_create elsewhere, for tests), all in one
transaction, so a seed is either whole or absent. The 10k-event run carries a marker
(its idempotency_key names the seed version and size): a second call with the same size
finds it and returns at once. A different size on a bench database is wiped first.

    BENCH_SCALE=0.01 .venv/bin/python bench/seed.py     # 1k runs, 20k events
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import random
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _events

SEED_VERSION = 1
MARKER_PREFIX = "bench-seed:"
BIG_RUN_EVENTS = 10_000
AGENTS = ("support-triage", "refund-desk", "research", "crm-sync", "invoice-chaser",
          "onboarding", "code-review", "report-writer", "data-cleaner", "scheduler")
GOALS = ("Resolve ticket #{i} for the customer", "Refund order {i} if eligible",
         "Write a market brief on segment {i}", "Sync CRM account {i} with billing",
         "Chase unpaid invoice {i}", "Onboard new customer {i}", "Review pull request {i}",
         "Clean the duplicate records of batch {i}")
BLOCK_REASONS = {  # reason -> (recommended action, why)
    "retry_exhausted": ("retry", "Transient errors only; the service is healthy again."),
    "permanent_error": ("skip", "The tool rejected the request; retrying cannot help."),
    "loop_detected": ("skip", "The model repeated the same call 5 times."),
    "stalled": ("terminate", "No progress for 30 minutes and little work done."),
    "budget_exhausted": ("raise_budget", "Most of the work is done; raise the budget."),
    "circuit_open": ("retry", "The tool's circuit is open; retry when it closes."),
    "invalid_output": ("retry", "The model's output failed validation twice."),
}
WAIT_KINDS = ("timer", "signal", "input", "children")
TERMINAL_MIX = (("succeeded", 80), ("failed", 12), ("cancelled", 8))
EVENT_COLUMNS = ("run_id", "seq", "type", "data", "tool_call_id", "attempt", "key",
                 "schema_version", "actor", "at", "run_month")


@dataclass(frozen=True)
class SeedPlan:
    """How much to seed; ``scale`` 1.0 is 100k runs and 2M events."""

    runs: int
    events: int
    approvals: int
    big_run_events: int = BIG_RUN_EVENTS

    @classmethod
    def for_scale(cls, scale: float, *, big_run_events: int = BIG_RUN_EVENTS) -> SeedPlan:
        """Return the plan for ``scale`` (at least 20 runs, 10 events a run on average).

        BENCH_EVENTS_SCALE, when set, sizes the events alone (more or fewer per run): the
        partitions benchmark grows the event table with the runs table held still.
        """
        runs = max(20, round(100_000 * scale))
        events_scale = float(os.environ.get("BENCH_EVENTS_SCALE") or scale)
        events = max(runs * 10, round(2_000_000 * events_scale)) + big_run_events
        return cls(runs=runs, events=events, approvals=max(2, round(500 * scale)),
                   big_run_events=big_run_events)

    @property
    def marker(self) -> str:
        """Return the idempotency_key that marks this seed as complete."""
        return (f"{MARKER_PREFIX}v{SEED_VERSION}:runs={self.runs}:events={self.events}"
                f":big={self.big_run_events}")


def seed(*, scale: float = 1.0, force: bool = False,
         big_run_events: int = BIG_RUN_EVENTS) -> dict[str, Any]:
    """Seed the default database for ``scale`` unless it already holds that seed."""
    from django.db import transaction

    from runs.models import Run

    plan = SeedPlan.for_scale(scale, big_run_events=big_run_events)
    big = Run.objects.filter(idempotency_key=plan.marker).first()
    if big is not None and not force:
        return {**_summary(plan, big.pk), "skipped": True, "seconds": 0.0}
    start = time.perf_counter()
    _wipe_previous(force=force)
    with transaction.atomic(), _indexes_rebuilt_after(big=plan.events >= 200_000):
        big_id, statuses, approvals = _write_all(plan)
    written = time.perf_counter()
    _analyze()
    end = time.perf_counter()
    return {**_summary(plan, big_id), "statuses": statuses, "approvals": approvals,
            "skipped": False, "seconds": round(end - start, 2),
            "write_seconds": round(written - start, 2), "analyze_seconds": round(end - written, 2)}


def seeded_big_run_id(*, scale: float = 1.0, big_run_events: int = BIG_RUN_EVENTS) -> Any:
    """Return the id of the seed's 10k-event run, or None when the seed is absent."""
    from runs.models import Run

    marker = SeedPlan.for_scale(scale, big_run_events=big_run_events).marker
    return Run.objects.filter(idempotency_key=marker).values_list("pk", flat=True).first()


def _summary(plan: SeedPlan, big_id: Any) -> dict[str, Any]:
    return {"runs": plan.runs, "events": plan.events, "big_run_id": str(big_id),
            "big_run_events": plan.big_run_events}


def _wipe_previous(*, force: bool) -> None:
    from django.db import connection

    from runs.models import Run

    stale = Run.objects.filter(idempotency_key__startswith=MARKER_PREFIX).exists()
    if not (stale or force):
        return
    name = connection.settings_dict["NAME"]
    if connection.vendor != "postgresql" or "bench" not in name:
        raise RuntimeError(f"refusing to wipe database {name!r}: only a *bench* PostgreSQL db")
    with connection.cursor() as cur:
        cur.execute("TRUNCATE runs_run CASCADE")


@contextmanager
def _indexes_rebuilt_after(*, big: bool) -> Iterator[None]:
    """Drop the event table's secondary indexes and constraints for a big load; rebuild after.

    One sorted index build is several times cheaper than 2M incremental inserts into seven
    indexes, and one FK validation cheaper than 2M deferred trigger checks. DDL is
    transactional in PostgreSQL: a failed seed leaves the schema as it was.
    """
    from django.db import connection

    if not big or connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cur:
        cur.execute("SET LOCAL maintenance_work_mem = '256MB'")
        cur.execute(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = 'runs_event'::regclass AND contype IN ('u', 'f')")
        constraints = cur.fetchall()
        cur.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'runs_event' "
            "AND indexname NOT IN (SELECT conname FROM pg_constraint "
            "WHERE conrelid = 'runs_event'::regclass)")
        indexes = cur.fetchall()
        for name, _ in constraints:
            cur.execute(f'ALTER TABLE runs_event DROP CONSTRAINT "{name}"')
        for name, _ in indexes:
            cur.execute(f'DROP INDEX "{name}"')
    yield
    with connection.cursor() as cur:
        for _, definition in indexes:
            # A partitioned table's index reads "ON ONLY": built that way it would cover no
            # partition (runs.partitions).
            cur.execute(definition.replace(" ON ONLY ", " ON "))
        for name, definition in constraints:
            cur.execute(f'ALTER TABLE runs_event ADD CONSTRAINT "{name}" {definition}')


def _analyze() -> None:
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            # Fresh statistics and a visibility map, or the planner guesses and index-only
            # scans visit the heap: the console benchmark would measure a cold, unvacuumed db.
            verb = "ANALYZE" if connection.in_atomic_block else "VACUUM ANALYZE"  # tests
            for table in ("runs_run", "runs_event", "ledger_toolcall", "approvals_approval"):
                cur.execute(f"{verb} {table}")


def _write_all(plan: SeedPlan) -> tuple[Any, dict[str, int], int]:
    from runs.models import Event, Run

    rng = random.Random(SEED_VERSION)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    _partitions_for(now - dt.timedelta(days=31), now)
    finals = _finals(plan, rng)
    counts = _event_counts(plan, rng)
    runs, events, waiting_approval, big_id = [], [], [], None
    cache: dict[tuple[Any, ...], list[tuple[str, str, str]]] = {}
    for i, (final, n) in enumerate(zip(finals, counts, strict=True)):
        run_id = uuid.UUID(int=rng.getrandbits(128), version=4)
        created = now - dt.timedelta(seconds=rng.randint(600, 30 * 86400))
        row, tail = _run_row(i, run_id, final, n, created, now, cache, rng)
        runs.append(row)
        events.extend(tail)
        if final.get("wait_kind") == "approval":
            waiting_approval.append((run_id, n, row["agent_name"]))
        if len(events) >= 200_000:
            _flush(Run, runs, Event, events)
        big_id = big_id or run_id
    _flush(Run, runs, Event, events)
    _approvals(waiting_approval, now)
    # The marker goes on last: a seed that died half-way has none and is redone.
    Run.objects.filter(pk=big_id).update(idempotency_key=plan.marker)
    statuses = Counter(f["status"] for f in finals)
    return big_id, dict(sorted(statuses.items())), len(waiting_approval)


def _partitions_for(first: dt.datetime, last: dt.datetime) -> None:
    """Make the event partitions of the months runs are seeded in (PostgreSQL)."""
    from runs.partitions import month_after, partition_make, partitioned, partitions_list

    if not partitioned():
        return
    have = {p.start for p in partitions_list()}
    month = first.date().replace(day=1)
    while month <= last.date():
        if month not in have:
            partition_make(month)
        month = month_after(month)


def _finals(plan: SeedPlan, rng: random.Random) -> list[dict[str, Any]]:
    finals = [{"status": "blocked", "reason": "retry_exhausted"}]  # the 10k-event run
    finals += [{"status": "waiting", "wait_kind": "approval"}] * min(plan.approvals, plan.runs // 4)
    while len(finals) < plan.runs:
        roll = rng.random()
        if roll < 0.03:
            finals.append({"status": "waiting", "wait_kind": rng.choice(WAIT_KINDS)})
        elif roll < 0.075:
            finals.append({"status": "blocked", "reason": rng.choice(list(BLOCK_REASONS))})
        elif roll < 0.09:
            finals.append({"status": "unknown", "reason": "ambiguous_write"})
        elif roll < 0.10:
            finals.append({"status": rng.choice(("queued", "running"))})
        else:
            status = rng.choices([s for s, _ in TERMINAL_MIX], [w for _, w in TERMINAL_MIX])[0]
            finals.append({"status": status})
    return finals


def _event_counts(plan: SeedPlan, rng: random.Random) -> list[int]:
    rest, others = plan.events - plan.big_run_events, plan.runs - 1
    avg, extra = divmod(rest, others)
    counts = [avg + (i < extra) for i in range(others)]
    spread = max(0, min(avg - 6, avg // 2))
    for i in range(0, others - 1, 2):  # move events between pairs: the total stays exact
        d = rng.randint(0, spread)
        counts[i], counts[i + 1] = counts[i] + d, counts[i + 1] - d
    return [plan.big_run_events, *counts]


def _run_row(i: int, run_id: Any, final: dict[str, Any], n: int, created: dt.datetime,
             now: dt.datetime, cache: dict, rng: random.Random) -> tuple[dict, list[tuple]]:
    agent = AGENTS[i % len(AGENTS)] if i else "research"
    goal = GOALS[i % len(GOALS)].format(i=i) if i else "[bench 10k] Long research task"
    key = (n, tuple(sorted(final.items())))
    if key not in cache:
        cache[key] = _template(n, final)
    template = cache[key]
    totals = template[0][2]
    updated = min(now, created + dt.timedelta(seconds=n * 2 + rng.randint(0, 3600)))
    row = _run_fields(final, agent, goal, totals, n, created, updated, run_id, i)
    tc = f"tc_{i:x}_"
    steps = totals["steps_total"]
    first = _events.created_event(agent=agent, goal=goal, steps=steps)
    tick = (updated - created) / n
    month = created.date().replace(day=1)  # the partition key (runs.models.event.run_month)
    rows = [(run_id, 1, first[0], json.dumps(first[1]), "", None, None, 1, "", created, month)]
    for seq, (kind, data, call) in enumerate(template[1:], start=2):
        rows.append((run_id, seq, kind, data.replace("tc_@_", tc), call.replace("tc_@_", tc),
                     None, None, 1, "", created + tick * seq, month))
    return row, rows


def _template(n: int, final: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    script = _events.run_script(n, final=final, tc_prefix="tc_@_")
    totals = _events.script_totals(script)
    return [("run.created", None, totals)] + [
        (kind, json.dumps(data), call) for kind, data, call in script[1:]
    ]


def _run_fields(final: dict[str, Any], agent: str, goal: str, totals: dict[str, int], n: int,
                created: dt.datetime, updated: dt.datetime, run_id: Any, i: int) -> dict:
    status = final["status"]
    row: dict[str, Any] = {
        "id": run_id, "agent_name": agent, "agent_version": "1", "goal": goal,
        "status": status, "current_step": "" if status in ("succeeded",) else "s1",
        "steps_total": totals["steps_total"], "steps_done": totals["steps_done"],
        "tokens_used": totals["tokens"], "model_calls": totals["models"],
        "tool_calls": totals["tools"], "cost_micros": totals["cost"],
        "last_seq": n, "version": n, "created_at": created, "updated_at": updated,
        "started_at": created,
    }
    if status in ("succeeded", "failed", "cancelled"):
        row["finished_at"] = updated
    elif status == "waiting":
        row.update(wait_kind=final["wait_kind"], wait_until=updated + dt.timedelta(hours=4),
                   wait_data={"why": f"waiting for {final['wait_kind']}"})
    elif status in ("blocked", "unknown"):
        reason = final["reason"] if status == "blocked" else ""
        action, why = BLOCK_REASONS.get(reason, ("confirm_executed", "Check the provider."))
        tool = _events.TOOLS[i % len(_events.TOOLS)]
        sig = hashlib.sha256(f"{status}:{reason}:{agent}:{tool}".encode()).hexdigest()[:16]
        row.update(attention_reason=reason, attention_signature=sig,
                   attention_detail=f"{tool} failed: upstream said 503 (attempt 3 of 3)",
                   recommended_action=action, recommendation_why=why)
    return row


def _flush(run_model: Any, runs: list[dict], event_model: Any, events: list[tuple]) -> None:
    if runs:
        columns = [f.attname for f in run_model._meta.concrete_fields]
        defaults = {f.attname: f.get_default() for f in run_model._meta.concrete_fields}
        merged = ({**defaults, **r} for r in runs)
        _copy(run_model, columns, ([m[c] for c in columns] for m in merged))
    # Each seeded event follows from the one before it, the first from the run's start.
    caused = ((*e, f"seq:{e[1] - 1}" if e[1] > 1 else "start:bench") for e in events)
    _copy(event_model, [*EVENT_COLUMNS, "caused_by"], caused)
    runs.clear()
    events.clear()


def _copy(model: Any, columns: list[str], rows: Any) -> None:
    from django.db import connection

    json_cols = {f.attname for f in model._meta.concrete_fields
                 if f.get_internal_type() == "JSONField"}
    if connection.vendor != "postgresql":
        objs = [model(**{c: _json_in(c in json_cols, v) for c, v in zip(columns, r, strict=True)})
                for r in rows]
        model.objects.bulk_create(objs, batch_size=500)
        return
    idx = [i for i, c in enumerate(columns) if c in json_cols]
    sql = f"COPY {model._meta.db_table} ({', '.join(columns)}) FROM STDIN"
    with connection.cursor() as cur, cur.cursor.copy(sql) as copy:
        for r in rows:
            if idx:
                r = list(r)
                for i in idx:
                    if not isinstance(r[i], str):
                        r[i] = json.dumps(r[i])
            copy.write_row(r)


def _json_in(is_json: bool, value: Any) -> Any:
    return json.loads(value) if is_json and isinstance(value, str) else value


def _approvals(waiting: list[tuple[Any, int, str]], now: dt.datetime) -> None:
    from approvals.models import Approval
    from ledger.models import ToolCall

    calls = []
    for i, (run_id, _n, _agent) in enumerate(waiting):
        args = {"to": f"customer{i}@example.com", "amount_cents": 1000 + i, "order": f"A-{i}"}
        key = hashlib.sha256(f"bench-approval:{run_id}".encode()).hexdigest()
        calls.append(ToolCall(
            tool_call_id=f"tc_appr_{i}", run_id=run_id, step_key="s1", turn=1,
            tool="refund_payment" if i % 2 else "send_email", args=args,
            args_hash=hashlib.sha256(json.dumps(args, sort_keys=True).encode()).hexdigest(),
            idempotency_key=key, effect="write", reversibility="irreversible",
            status="awaiting_approval"))
    calls = ToolCall.objects.bulk_create(calls, batch_size=1000)
    Approval.objects.bulk_create([
        Approval(run_id=c.run_id, tool_call=c, tool=c.tool, proposed_args=c.args,
                 risk="high" if c.tool == "refund_payment" else "medium",
                 why=f"{agent} wants to {c.tool.replace('_', ' ')}", state_seq=n,
                 plan_version=1, expires_at=now + dt.timedelta(days=1))
        for c, (_, n, agent) in zip(calls, waiting, strict=True)
    ], batch_size=1000)


def main() -> None:
    """Seed the bench database for BENCH_SCALE and print one JSON line about it."""
    from bench._common import bench_scale, django_boot, emit

    django_boot()
    emit("seed", seed(scale=bench_scale(), force="--force" in sys.argv))


if __name__ == "__main__":
    main()
