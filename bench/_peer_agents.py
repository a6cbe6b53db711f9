"""The density workload on the peers: N agent runs, each step one model call + a checkpoint.

Run by bench/density_peers.py as its own process, one engine each:
``python bench/_peer_agents.py ENGINE RUNS MODEL_URL DATABASE_URL [POOL]`` with ENGINE one of
``dbos`` (DBOS 3, threads: one ``@DBOS.workflow`` per run started with
``DBOS.start_workflow``, each model call an ``@DBOS.step`` through the sync ``openai.OpenAI``
client; DBOS's defaults: unbounded executor threads, a system-database pool of 20),
``langgraph`` (a ``StateGraph`` whose one node calls the model with ``openai.AsyncOpenAI`` and
loops on itself; ONE ``AsyncPostgresSaver`` on one connection, the documented set-up; the
N runs are ``ainvoke``d together on one asyncio loop, ``durability="sync"``: a step's
checkpoint is written before the next step starts) and ``langgraph_per_run`` (the same, one
saver per run over a shared ``AsyncConnectionPool`` of POOL connections: the saver holds an
``asyncio.Lock`` around every checkpoint read and write, so a shared one serialises them, and
one connection per run does not fit in max_connections at N = 200).

An engine name ending in ``_tool`` also records the noop's call as a durable step of its
own (DBOS: a second ``@DBOS.step``; LangGraph: a ``tool`` node between two model turns, the
usual agent graph), as AgentOps records each tool call: two durable records a step.

Every run is a conversation with bench.model_server keyed by its goal, which answers
``steps`` times with a ``noop`` tool call and then "done", as it does for AgentOps'
bench-remote agent: a run makes steps + 1 model calls. A step's durable record holds the
model's reply (and the noop's result, computed in process); the next request sends the
system prompt, the goal and the last exchange, as AgentOps sends its recent turns.

Protocol: the process sets up (imports, database tables, clients, graphs), prints ``ready``
on stdout and waits for a line on stdin; then runs the N runs and prints one JSON line
(runs ended, errors, wall seconds). Progress and errors go to stderr.
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any, TypedDict
from urllib.parse import urlsplit, urlunsplit

SYSTEM = "Benchmark."
TOOLS = [{"type": "function", "function": {
    "name": "noop", "description": "Do nothing, durably.",
    "parameters": {"type": "object", "properties": {"i": {"type": "integer"}},
                   "required": ["i"]}}}]


def goals(runs: int) -> list[str]:
    """Return the runs' goals: unique, so the model server keeps one conversation each."""
    tag = os.urandom(4).hex()
    return [f"density {tag} {i}" for i in range(runs)]


def messages(goal: str, last: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Return the request's messages: system, goal, and the last reply with its tool result."""
    out: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM},
                                 {"role": "user", "content": goal}]
    if last:
        out.append({"role": "assistant", "content": None, "tool_calls": last["tool_calls"]})
        out.extend({"role": "tool", "tool_call_id": c["id"], "content": json.dumps({"ok": True})}
                   for c in last["tool_calls"])
    return out


def reply_dict(completion: Any) -> dict[str, Any]:
    """Return what a step records of the model's reply (JSON-serialisable)."""
    msg = completion.choices[0].message
    calls = [{"id": c.id, "type": "function",
              "function": {"name": c.function.name, "arguments": c.function.arguments}}
             for c in msg.tool_calls or ()]
    return {"content": msg.content, "tool_calls": calls}


def _ready() -> None:
    """Tell the parent the engine is set up, and wait for its go."""
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.readline()
    _CPU0[0] = time.process_time()


def noop(call: dict[str, Any]) -> dict[str, Any]:
    """Return the noop tool's result for one tool call of a reply."""
    return {"ok": True, "i": json.loads(call["function"]["arguments"] or "{}").get("i")}


def run_dbos(runs: int, model_url: str, db_url: str, *, tool_step: bool) -> dict[str, Any]:
    """Run the workload on DBOS with its default thread executor."""
    import openai
    from dbos import DBOS

    client = openai.OpenAI(base_url=model_url, api_key="bench", timeout=300)

    @DBOS.step()
    def model_step(goal: str, last: dict[str, Any] | None) -> dict[str, Any]:
        return reply_dict(client.chat.completions.create(
            model="sleepy", messages=messages(goal, last), tools=TOOLS))

    @DBOS.step()
    def tool_step(call: dict[str, Any]) -> dict[str, Any]:
        return noop(call)

    @DBOS.workflow()
    def agent_run(goal: str) -> int:
        last, turns = None, 0
        while True:
            last = model_step(goal, last)
            turns += 1
            if not last["tool_calls"]:
                return turns
            for call in last["tool_calls"] if tool_step else ():
                tool_step(call)

    system_url = urlunsplit(urlsplit(db_url)._replace(scheme="postgresql"))
    DBOS(config={"name": "agentops-density-peers", "system_database_url": system_url,
                 "log_level": "WARNING"})
    DBOS.launch()
    try:
        todo = goals(runs)
        _ready()
        start = time.perf_counter()
        handles = [DBOS.start_workflow(agent_run, goal) for goal in todo]
        return _outcomes([_result(h.get_result) for h in handles], start)
    finally:
        DBOS.destroy()


def _result(get: Any) -> Any:
    """Return ``get()``, or the exception it raised (a run that failed)."""
    try:
        return get()
    except Exception as exc:  # noqa: BLE001 - a failed run is a figure, not a crash
        return exc


def _outcomes(results: list[Any], start: float) -> dict[str, Any]:
    errors = [repr(r) for r in results if isinstance(r, BaseException)]
    return {"runs_ended": len(results) - len(errors), "errors": len(errors),
            "first_errors": errors[:3], "wall_s": round(time.perf_counter() - start, 2),
            "cpu_s": round(time.process_time() - _CPU0[0], 2)}


_CPU0 = [0.0]  # the process's CPU time at the parent's go


class _AgentState(TypedDict):
    goal: str
    last: dict[str, Any] | None
    turns: int
    results: list[dict[str, Any]]


def _graph_builder(model_url: str, *, tool_step: bool) -> Any:
    """Return the graph: call the model, loop while it asks for a tool (through a ``tool``
    node when ``tool_step``)."""
    import openai
    from langgraph.graph import END, START, StateGraph

    client = openai.AsyncOpenAI(base_url=model_url, api_key="bench", timeout=300)

    async def call_model(state: _AgentState) -> dict[str, Any]:
        completion = await client.chat.completions.create(
            model="sleepy", messages=messages(state["goal"], state["last"]), tools=TOOLS)
        return {"last": reply_dict(completion), "turns": state["turns"] + 1}

    def call_tool(state: _AgentState) -> dict[str, Any]:
        return {"results": [noop(c) for c in state["last"]["tool_calls"]]}

    def again(state: _AgentState) -> str:
        asks = state["last"] and state["last"]["tool_calls"]
        return ("tool" if tool_step else "model") if asks else END

    builder = StateGraph(_AgentState)
    builder.add_node("model", call_model)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", again)
    if tool_step:
        builder.add_node("tool", call_tool)
        builder.add_edge("tool", "model")
    return builder


async def _invoke_all(graphs: list[Any], todo: list[str]) -> dict[str, Any]:
    """Start every run together on this loop (after the parent's go); wait for them all."""
    await asyncio.to_thread(_ready)
    start = time.perf_counter()
    results = await asyncio.gather(*(
        graph.ainvoke({"goal": goal, "last": None, "turns": 0, "results": []},
                      {"configurable": {"thread_id": goal}, "recursion_limit": 100_000},
                      durability="sync")
        for graph, goal in zip(graphs, todo)), return_exceptions=True)
    return _outcomes(list(results), start)


async def run_langgraph(runs: int, model_url: str, db_url: str, *, pool_size: int | None,
                        tool_step: bool) -> dict[str, Any]:
    """Run the workload on LangGraph: one shared saver, or one per run over a pool."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    builder = _graph_builder(model_url, tool_step=tool_step)
    todo = goals(runs)
    async with AsyncPostgresSaver.from_conn_string(db_url) as saver:
        await saver.setup()
        if pool_size is None:
            graph = builder.compile(checkpointer=saver)
            return await _invoke_all([graph] * runs, todo)
    return await _per_run_savers(builder, todo, db_url, pool_size)


async def _per_run_savers(builder: Any, todo: list[str], db_url: str,
                          pool_size: int) -> dict[str, Any]:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    pool = AsyncConnectionPool(db_url, min_size=pool_size, max_size=pool_size, open=False,
                               kwargs={"autocommit": True, "prepare_threshold": 0,
                                       "row_factory": dict_row})
    await pool.open(wait=True)
    try:
        graphs = [builder.compile(checkpointer=AsyncPostgresSaver(pool)) for _ in todo]
        return await _invoke_all(graphs, todo)
    finally:
        await pool.close()


def main() -> None:
    engine, runs, model_url, db_url = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    tool_step = engine.endswith("_tool")
    engine = engine.removesuffix("_tool")
    if engine == "dbos":
        out = run_dbos(runs, model_url, db_url, tool_step=tool_step)
    elif engine in ("langgraph", "langgraph_per_run"):
        pool = int(sys.argv[5]) if engine == "langgraph_per_run" else None
        out = asyncio.run(run_langgraph(runs, model_url, db_url, pool_size=pool,
                                        tool_step=tool_step))
    else:
        raise SystemExit(f"unknown engine {engine!r}")
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
