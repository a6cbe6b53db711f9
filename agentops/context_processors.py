"""Template context every console page needs."""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest

from agentops.theme import NEXT, theme_of


def console(request: HttpRequest) -> dict[str, Any]:
    """Return the polling trigger prefix ("every 5s, " or "" when polling is off), the poll
    interval in seconds and the colour theme the user chose with the toggle."""
    every = settings.AGENTOPS_CONSOLE_POLL_S
    theme = theme_of(request)
    return {"poll_every": f"every {every:g}s, " if every > 0 else "", "poll_s": f"{every:g}",
            "theme": theme, "theme_next": NEXT[theme]}
