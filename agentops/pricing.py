"""The AGENTOPS_MODEL_PRICES setting: parsed at settings time, so it imports no Django model."""
from __future__ import annotations

import json
from typing import Any

ANY_MODEL = "*"


def prices_from_setting(raw: str) -> dict[str, tuple[int, int]]:
    """Parse AGENTOPS_MODEL_PRICES: {"model": {"input": $/Mtok, "output": $/Mtok}, ...}."""
    if not raw.strip():
        return {}
    try:
        table = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"AGENTOPS_MODEL_PRICES is not JSON: {exc}") from None
    if not isinstance(table, dict):
        raise ValueError("AGENTOPS_MODEL_PRICES must be a JSON object of model -> prices")
    out = {}
    for model, price in table.items():
        try:
            out[str(model)] = (_micros(price["input"]), _micros(price["output"]))
        except (TypeError, KeyError, ValueError):
            raise ValueError(f"AGENTOPS_MODEL_PRICES[{model!r}] must be "
                             '{"input": <$ per million tokens>, "output": <...>} '
                             f"with numbers >= 0, got {price!r}") from None
    return out


def _micros(dollars: Any) -> int:
    if isinstance(dollars, bool) or not isinstance(dollars, (int, float)) or dollars < 0:
        raise ValueError(dollars)
    return round(dollars * 1_000_000)
