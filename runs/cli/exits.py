"""The exit codes of ``agentops run --follow`` / ``--inline`` and ``agentops follow``.

Each way a followed run can stop has its own code, so a script can tell a clean success from
a run that needs a person without parsing the output (docs/workers.md lists them).
"""
from __future__ import annotations

from runs.models import Run
from runs.statuses import RunStatus

SUCCEEDED = 0
ERROR = 1  # the command itself failed: bad input, an unknown agent, a configuration error
FAILED = 3  # the run failed or was cancelled
WITH_EXCEPTIONS = 4  # completed, but not cleanly (run.exceptions says what)
BLOCKED = 5  # blocked: a person must act (the reason is printed)
UNKNOWN = 6  # a write's outcome is unknown: a person must confirm it
WAITING = 7  # waiting for a person (an approval) or, with --timeout, still waiting
STILL_RUNNING = 8  # still queued or running when --timeout ran out

_BY_STATUS = {
    RunStatus.SUCCEEDED: SUCCEEDED,
    RunStatus.COMPLETED_WITH_EXCEPTIONS: WITH_EXCEPTIONS,
    RunStatus.FAILED: FAILED,
    RunStatus.CANCELLED: FAILED,
    RunStatus.BLOCKED: BLOCKED,
    RunStatus.UNKNOWN: UNKNOWN,
    RunStatus.WAITING: WAITING,
}


def exit_code_for(run: Run) -> int:
    """Return the exit code for the status a followed run stopped in."""
    return _BY_STATUS.get(run.status, STILL_RUNNING)
