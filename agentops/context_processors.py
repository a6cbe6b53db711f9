"""Template context every console page needs."""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest


def console(request: HttpRequest) -> dict[str, Any]:
    """Return the polling trigger prefix ("every 5s, " or "" when polling is off)."""
    every = settings.AGENTOPS_CONSOLE_POLL_S
    return {"poll_every": f"every {every:g}s, " if every > 0 else ""}
