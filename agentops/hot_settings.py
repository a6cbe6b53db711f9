"""Settings the engine reads several times a step, without the lazy settings proxy per read.

``django.conf.settings`` answers each read through ``LazyObject.__getattribute__`` (a Python
call and a ``_mask_wrapped`` lookup); the engine reads a dozen settings per step. Values are
kept per name and forgotten when a setting changes the way Django announces it
(``setting_changed``: ``override_settings``, pytest-django's ``settings``). Only for settings
nothing assigns to at run time: an assignment to ``settings.X`` outside those is not seen.
"""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.signals import setting_changed

_values: dict[str, Any] = {}


def hot_setting(name: str) -> Any:
    """Return ``settings.<name>`` (read once until a setting changes)."""
    try:
        return _values[name]
    except KeyError:
        value = _values[name] = getattr(settings, name)
        return value


def _forget(**_: Any) -> None:
    _values.clear()


setting_changed.connect(_forget, weak=False, dispatch_uid="agentops.hot_settings")
