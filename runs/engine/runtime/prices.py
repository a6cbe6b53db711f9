"""Model prices and the cost of a model reply, from its token usage.

Prices come from the AGENTOPS_MODEL_PRICES setting (dollars per million tokens) overridden by
ModelPrice rows (editable on the console's settings page). The engine reads them once every
few seconds per process, never per reply, so pricing adds no query to a unit of work.
"""
from __future__ import annotations

import threading
import time
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from agentops.llm.protocol import Usage
from agentops.pricing import ANY_MODEL
from runs.models import ModelPrice

CACHE_S = 5.0
_cache: dict[str, Any] = {"at": None, "prices": {}}
_lock = threading.Lock()


def prices_load() -> dict[str, tuple[int, int]]:
    """Return model -> (input, output) micro-dollars per million tokens (cached a few seconds)."""
    now = time.monotonic()  # a cache age, not engine time: a frozen test clock must not pin it
    with _lock:
        if _cache["at"] is not None and now - _cache["at"] < CACHE_S:
            return _cache["prices"]
    prices = dict(settings.AGENTOPS_MODEL_PRICES)
    for row in ModelPrice.objects.values_list("model", "input_per_mtok_micros",
                                              "output_per_mtok_micros"):
        prices[row[0]] = (row[1], row[2])
    with _lock:
        _cache.update(at=now, prices=prices)
    return prices


def prices_forget() -> None:
    """Drop the cached prices (an admin just changed them in this process)."""
    with _lock:
        _cache["at"] = None


@receiver(setting_changed)
def _setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "AGENTOPS_MODEL_PRICES":
        prices_forget()


def reply_cost(prices: dict[str, tuple[int, int]], model: str, usage: Usage) -> int:
    """Return the reply's cost in micro-dollars: what the provider reported, else usage x price."""
    if usage.cost_micros > 0:
        return usage.cost_micros
    price = prices.get(model) or prices.get(ANY_MODEL)
    if price is None:
        return 0
    total = usage.prompt_tokens * price[0] + usage.completion_tokens * price[1]
    return (total + 500_000) // 1_000_000
