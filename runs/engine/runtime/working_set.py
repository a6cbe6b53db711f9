"""The memory budget: a run's working set may use AGENTOPS_MEMORY_SHARE of the process's memory.

A run's working set is what a worker holds for it: its loaded state (measured as JSON when
the session opens, then grown by each event applied and re-measured at each snapshot) and
the results of the tool calls it is running (measured as they come back, before anything
copies them: ledger.services.execute). A result that would take the run past its share is
dropped and the run blocks as ``memory_budget`` saying the sizes; the worker goes on serving
its other runs instead of dying of it.
"""
from __future__ import annotations


from agentops.hot_settings import hot_setting
from agentops.errors import ConfigError
from agentops.memory import Allowance, process_limit
from runs.engine.runtime.session import RunSession


def run_allowance(session: RunSession) -> Allowance:
    """Return how many more bytes of tool results ``session``'s run may hold, and why."""
    share = hot_setting("AGENTOPS_MEMORY_SHARE")
    if not 0 < share <= 1:
        raise ConfigError(f"AGENTOPS_MEMORY_SHARE must be a fraction in (0, 1], not {share!r}")
    limit, source = process_limit(hot_setting("AGENTOPS_MEMORY_LIMIT_BYTES"))
    budget, state = int(limit * share), session.state_bytes()
    return Allowance(max(budget - state, 0), lambda: (
        f"AGENTOPS_MEMORY_SHARE {share * 100:g}% of this process's {limit:,} bytes ({source}) "
        f"is {budget:,}, less the {state:,} bytes of the run's state"))


def state_too_big(session: RunSession) -> str:
    """Return why the run's state alone is past its memory share, or ""."""
    allowance = run_allowance(session)
    if allowance.bytes > 0:
        return ""
    return f"the run's working set is past its memory budget: {allowance.why}"
