"""unit_cost: durable commits, rows and WAL bytes per tool call, by the tool's effect class.

Each kind runs one run of 40 turns, one tool call per turn, on PostgreSQL. Commits are
pg_stat_database's xact_commit (read-only statements outside a transaction count as one each),
rows are the rows added to the event, snapshot, ledger and attempt tables.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import engine_env

engine_env(in_process=True)

from bench._common import django_boot, emit, log, pg_counters, pg_delta  # noqa: E402

CALLS = 40
_SCHEMA = {"type": "object", "properties": {"i": {"type": "integer"}}, "required": ["i"]}


def _kinds() -> dict:
    return {
        "read": {"effect": "read"},
        "idempotent_write": {"effect": "write", "idempotent": True},
        "probeable_write": {"effect": "write", "probe": lambda ctx, i: None},
        "unsafe_write": {"effect": "write", "reversibility": "irreversible"},
    }


def _rows() -> int:
    from ledger.models import ToolAttempt, ToolCall
    from runs.models import Event, Snapshot

    return sum(m.objects.count() for m in (Event, Snapshot, ToolCall, ToolAttempt))


def _measure(name: str, options: dict) -> dict:
    from agentops.agents import Agent, StepSpec, registry
    from agentops.llm.scripted import ScriptedModel, call, say
    from agentops.tools import ToolResult, tool
    from runs.engine.runtime.loop import run_tick
    from runs.services import run_start

    spec = tool(lambda ctx, i: ToolResult(facts={"i": i}, summary="ok"), name=f"t_{name}",
                parameters=_SCHEMA, **options)

    def script(ctx):
        return call(f"t_{name}", i=ctx.turn) if ctx.turn <= CALLS else say("done")

    registry.register(Agent(name=f"cost-{name}", version="1", system_prompt="Benchmark.",
                            tools=[spec], plan=[StepSpec("s")],
                            model=lambda: ScriptedModel(script), max_turns_per_step=10**6))
    run = run_start(agent=f"cost-{name}", goal="cost")
    rows0, pg0 = _rows(), pg_counters()
    assert run_tick(run.pk, worker="bench") == "succeeded"
    delta = pg_delta(pg0)
    return {"commits_per_call": round(delta["commits"] / CALLS, 2),
            "rows_per_call": round((_rows() - rows0) / CALLS, 2),
            "wal_bytes_per_call": round(delta["wal_bytes"] / CALLS)}


def main() -> None:
    django_boot()
    figures = {}
    for name, options in _kinds().items():
        figures[name] = _measure(name, options)
        log(f"{name}: {figures[name]}")
    emit("unit_cost", figures)


if __name__ == "__main__":
    main()
