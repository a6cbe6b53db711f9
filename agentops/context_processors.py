"""Template context every console page needs."""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest

from agentops.replica.probe import replica_status
from agentops.replica.router import replica_reads_active
from agentops.theme import NEXT, theme_of

LAG_NOTICE_S = 1.0  # a page read from a replica further behind than this says so


def console(request: HttpRequest) -> dict[str, Any]:
    """Return the polling trigger prefix ("every 5s, " or "" when polling is off), the poll
    interval in seconds, the colour theme the user chose with the toggle and, on a page read
    from a replica more than a second behind, by how many seconds (``replica_behind_s``)."""
    every = settings.AGENTOPS_CONSOLE_POLL_S
    theme = theme_of(request)
    return {"poll_every": f"every {every:g}s, " if every > 0 else "", "poll_s": f"{every:g}",
            "theme": theme, "theme_next": NEXT[theme], "replica_behind_s": _replica_behind_s()}


def _replica_behind_s() -> int:
    """Return the whole seconds this page's replica reads lag the primary, 0 under a second."""
    status = replica_status() if replica_reads_active() else None
    if status is None or status.lag_s <= LAG_NOTICE_S:
        return 0
    return max(1, round(status.lag_s))
