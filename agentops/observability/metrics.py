"""Prometheus metrics: the counters and histograms the engine feeds, and their exposition.

The engine calls the small helpers below (``observe_tool_call``, ``count_retry`` ...); they
never raise and never touch the database. Gauges that describe the fleet (runs by status,
queue depth, pending approvals) are computed from the database at scrape time by
``agentops.observability.collectors`` so every web process reports the same truth.

Worker processes are separate from the web process. Set ``PROMETHEUS_MULTIPROC_DIR`` (before
the process starts) on every host so the web process's ``/metrics`` aggregates the counters of
all processes of that host; see docs/deploy.md.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector

REGISTRY = CollectorRegistry(auto_describe=True)

# Buckets span a fast local tool (5 ms) to a slow model or human-scale step (10 min).
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)

STEP_SECONDS = Histogram(
    "agentops_step_duration_seconds",
    "Wall time of one plan step from start to its outcome.",
    ["agent", "outcome"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
TOOL_CALL_SECONDS = Histogram(
    "agentops_tool_call_duration_seconds",
    "Wall time of one tool-call attempt.",
    ["tool"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
TOOL_CALLS = Counter(
    "agentops_tool_calls",
    "Tool-call attempts by tool and outcome class (ok, timeout, transient, permanent ...).",
    ["tool", "outcome"],
    registry=REGISTRY,
)
UNITS = Counter(
    "agentops_units",
    "Units of work the engine committed (model turns, tool phases, step moves), by agent.",
    ["agent"],
    registry=REGISTRY,
)
MODEL_CALLS = Counter(
    "agentops_model_calls",
    "Model calls by agent and outcome (ok, or the error category: rate_limited, timeout ...).",
    ["agent", "outcome"],
    registry=REGISTRY,
)
RETRIES = Counter(
    "agentops_retries",
    "Automatic retries by kind (tool, model, step, repair).",
    ["kind"],
    registry=REGISTRY,
)
RECOVERIES = Counter(
    "agentops_recoveries",
    "Runs resumed from a checkpoint after their worker died or lost the lease.",
    registry=REGISTRY,
)
WORKER_REPLACEMENTS = Counter(
    "agentops_worker_replacements",
    "Worker processes that exited to be replaced by their q2 cluster, by reason (hung_threads).",
    ["reason"],
    registry=REGISTRY,
)
LEASE_LOST = Counter(
    "agentops_lease_lost",
    "Ticks that stopped because another worker took the run's lease.",
    registry=REGISTRY,
)
BUDGET_EXHAUSTED = Counter(
    "agentops_budget_exhausted",
    "Runs paused because a budget (tokens, calls, cost, deadline) ran out.",
    ["agent"],
    registry=REGISTRY,
)
MODEL_TOKENS = Counter(
    "agentops_model_tokens",
    "Model tokens used, by agent.",
    ["agent"],
    registry=REGISTRY,
)
MODEL_COST = Counter(
    "agentops_model_cost_micros",
    "Model cost in millionths of the billing currency, by agent.",
    ["agent"],
    registry=REGISTRY,
)


def observe_step(agent: str, outcome: str, seconds: float) -> None:
    """Record one finished step's duration and outcome (succeeded, failed, blocked ...)."""
    STEP_SECONDS.labels(agent=agent, outcome=outcome).observe(max(seconds, 0.0))


# Labelled children of the per-step metrics, cached: ``labels()`` takes a lock and builds a
# key on every call, and these are fed several times per step.
_CHILDREN: dict[tuple, Any] = {}


def _child(metric: Any, *values: str) -> Any:
    key = (metric, values)
    child = _CHILDREN.get(key)
    if child is None:
        child = _CHILDREN[key] = metric.labels(*values)
    return child


def observe_tool_call(tool: str, outcome: str, seconds: float) -> None:
    """Record one tool-call attempt's duration and outcome class."""
    _child(TOOL_CALL_SECONDS, tool).observe(max(seconds, 0.0))
    _child(TOOL_CALLS, tool, outcome).inc()


def count_unit(agent: str) -> None:
    """Count one unit of work of ``agent``."""
    _child(UNITS, agent).inc()


def count_model_call(agent: str, outcome: str) -> None:
    """Count one model call of ``agent`` by outcome (ok or the error category)."""
    _child(MODEL_CALLS, agent, outcome).inc()


def count_retry(kind: str) -> None:
    """Count one automatic retry of ``kind`` (tool, model, step, repair)."""
    RETRIES.labels(kind=kind).inc()


def count_recovery() -> None:
    """Count one run resumed after a dead worker or an expired lease."""
    RECOVERIES.inc()


def count_worker_replacement(reason: str) -> None:
    """Count a worker process leaving to be replaced (runs.hung_threads)."""
    _child(WORKER_REPLACEMENTS, reason).inc()


def count_lease_lost() -> None:
    """Count one tick that stopped because its lease was taken."""
    LEASE_LOST.inc()


def count_budget_exhausted(agent: str) -> None:
    """Count one run of ``agent`` paused on an exhausted budget."""
    BUDGET_EXHAUSTED.labels(agent=agent).inc()


def observe_model_usage(agent: str, tokens: int, cost_micros: int) -> None:
    """Add one model call's tokens and cost to ``agent``'s totals."""
    if tokens > 0:
        _child(MODEL_TOKENS, agent).inc(tokens)
    if cost_micros > 0:
        _child(MODEL_COST, agent).inc(cost_micros)


class _Chain:
    """Duck-typed registry that yields the metrics of several collectors in turn."""

    def __init__(self, collectors: Iterable[object]) -> None:
        self._collectors = list(collectors)

    def collect(self) -> Iterator[Metric]:
        for collector in self._collectors:
            yield from collector.collect()  # type: ignore[attr-defined]


def _process_collector() -> object:
    multiproc_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not multiproc_dir:
        return REGISTRY

    # registry=None: build the collector without registering it anywhere global.
    return MultiProcessCollector(None, path=multiproc_dir)


def metrics_exposition(*, extra: Iterable[object] = ()) -> bytes:
    """Return the text exposition of every AgentOps metric, plus ``extra`` collectors.

    The /metrics view passes the database gauges (agentops.observability.collectors); this
    module imports no models, so worker processes load it before Django is set up.
    """
    collectors: list[object] = [_process_collector(), *extra]
    return generate_latest(_Chain(collectors))  # type: ignore[arg-type]
