"""Probing: ask the outside world whether an ambiguous write happened."""
from __future__ import annotations

from typing import Any

from agentops.control import RunControl
from agentops.tools import ToolContext, ToolSpec
from ledger.services.execute import Outcome, call_secrets_of, outcome_scrubbed
from ledger.services.results import result_layer


def probe_call(spec: ToolSpec, ctx: ToolContext, args: dict[str, Any], failed: Outcome) -> Outcome:
    """Return the outcome after probing: succeeded, a safe retry, or still ambiguous.

    The probe returns a ToolResult/dict when the call ran, None when it did not; if the probe
    itself fails, the outcome stays ambiguous (a person must confirm).
    """
    secrets = call_secrets_of(spec, args)
    try:
        found = spec.probe(ctx, **args)
    except RunControl:
        raise
    except Exception as exc:  # noqa: BLE001 - a failing probe leaves the outcome unknown
        failed.log += f"\nprobe failed: {exc!r}"
        failed.details = {**failed.details, "probe": "unreachable"}
        return outcome_scrubbed(failed, secrets)
    if found is None:
        # It did not happen: retrying with the same key is safe.
        return Outcome("failed", category=failed.category, message=f"{failed.message}; probe "
                       "says it did not happen", retryable=True, ambiguous=False,
                       next_retry_delay=failed.next_retry_delay)
    return Outcome("succeeded", result=result_layer(found, tool=spec.name, secrets=secrets))
