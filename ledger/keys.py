"""Idempotency keys, argument hashes and redaction of sensitive arguments."""
from __future__ import annotations

import hashlib
from typing import Any

from agentops.jsonstate import canonical_json
from agentops.redaction import marker


def args_hash(args: dict[str, Any]) -> str:
    """Return the sha256 of the canonical JSON of ``args``."""
    return hashlib.sha256(canonical_json(args).encode()).hexdigest()


def idempotency_key(*, run_id: Any, step: str, tool: str, args: dict[str, Any],
                    turn: int | None = None, generation: int = 1) -> str:
    """Return hash(run, step, tool, canonical args) — plus the turn for reads.

    Writes leave the turn out, so the model asking again for the same write in the same step
    maps to the same ledger row and never runs twice. Reads include it: asking again for a read
    (polling) is a new call. ``generation`` counts redos: a write whose earlier call was
    cancelled or undone (a rollback) may be proposed again, and gets the next generation's
    key, so it is neither refused as a duplicate nor confused with the cancelled call.
    """
    parts = [str(run_id), step, tool, canonical_json(args)]
    if turn is not None:
        parts.append(str(turn))
    if generation > 1:
        # Generation 2 hashes as the old "epoch:1" did: keys already stored stay valid.
        parts.append(f"epoch:{generation - 1}")
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def redact(args: dict[str, Any], sensitive: tuple[str, ...]) -> dict[str, Any]:
    """Return ``args`` with each sensitive value replaced by its keyed marker (HMAC)."""
    if not sensitive:
        return args
    # A value that already is a marker (an approval sent back unchanged) stays that marker.
    return {k: (marker(v) if k in sensitive and not _is_marker(v) else v)
            for k, v in args.items()}


def _is_marker(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("[redacted hmac:")
