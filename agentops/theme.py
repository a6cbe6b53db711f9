"""The console's colour theme: "auto" follows the browser (prefers-color-scheme), or a choice
the user made with the toggle, kept in a cookie so it holds on every page and after a restart."""
from __future__ import annotations

from django.http import HttpRequest

COOKIE = "agentops_theme"
THEMES = ("auto", "light", "dark")
# The toggle steps through the themes in this order.
NEXT = {"auto": "dark", "dark": "light", "light": "auto"}
MAX_AGE = 365 * 24 * 3600


def theme_of(request: HttpRequest) -> str:
    """Return the theme the user chose ("auto" when none or an unknown value)."""
    value = request.COOKIES.get(COOKIE, "")
    return value if value in THEMES else "auto"
