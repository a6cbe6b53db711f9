"""Probing: ask the outside world whether an ambiguous write happened, and whether it is ours.

A probe finds what exists under the call's key. It is the call's effect only when it agrees
with what the call asked for: every fact that identifies the effect (the tool's ``identity``,
or each fact named like an argument) holds the argument's value. An answer that disagrees, or
a probe that says "found, but different" (``FoundDifferent``), leaves the call ambiguous and
marks it ``probe: different`` with what was asked and what was found, so a person decides.
"""
from __future__ import annotations

from typing import Any

from agentops.control import RunControl
from agentops.tools import FoundDifferent, ToolContext, ToolResult, ToolSpec
from ledger.services.execute import Outcome, call_secrets_of, outcome_scrubbed
from ledger.services.results import result_layer

HIDDEN = "(sensitive)"
MISSING = "(not in the probe's answer)"


def probe_call(spec: ToolSpec, ctx: ToolContext, args: dict[str, Any], failed: Outcome) -> Outcome:
    """Return the outcome after probing: succeeded, a safe retry, or still ambiguous.

    The probe returns a ToolResult/dict when the call ran, None when it did not, and
    FoundDifferent when something else exists under the key; if the probe itself fails, or
    its answer contradicts the call, the outcome stays ambiguous (a person must confirm).
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
    differs = probe_differences(spec, args, found)
    if differs or isinstance(found, FoundDifferent):
        return outcome_scrubbed(_contradicted(spec, found, differs, failed), secrets)
    return Outcome("succeeded", result=result_layer(found, tool=spec.name, secrets=secrets))


def _facts_of(found: Any) -> dict[str, Any]:
    facts = found.facts if isinstance(found, (ToolResult, FoundDifferent)) else found
    return facts if isinstance(facts, dict) else {}


def probe_differences(spec: ToolSpec, args: dict[str, Any], found: Any) -> list[dict[str, Any]]:
    """Return each identifying fact of ``found`` that disagrees with the call's ``args``.

    Each entry: ``{"argument", "fact", "asked", "found"}`` (sensitive values hidden). With a
    declared ``identity`` a fact missing from the answer disagrees too; without one, only facts
    named like a non-sensitive argument are compared.
    """
    facts = _facts_of(found)
    pairs = spec.identity or {a: a for a in args if a not in spec.sensitive}
    out = []
    for arg, fact in pairs.items():
        if arg not in args or (fact not in facts and not spec.identity):
            continue
        if fact in facts and same_value(args[arg], facts[fact]):
            continue
        hide = arg in spec.sensitive
        found_value = MISSING if fact not in facts else HIDDEN if hide else facts[fact]
        out.append({"argument": arg, "fact": fact, "asked": HIDDEN if hide else args[arg],
                    "found": found_value})
    return out


def same_value(asked: Any, found: Any) -> bool:
    """Return True when a found value is the asked one (120 == 120.0; True is not 1)."""
    if isinstance(asked, bool) or isinstance(found, bool):
        return type(asked) is type(found) and asked == found
    if isinstance(asked, dict) and isinstance(found, dict):
        return asked.keys() == found.keys() and all(same_value(v, found[k])
                                                    for k, v in asked.items())
    if isinstance(asked, (list, tuple)) and isinstance(found, (list, tuple)):
        return len(asked) == len(found) and all(same_value(a, f) for a, f in zip(asked, found))
    return asked == found


def contradiction_text(tool: str, differs: list[dict[str, Any]], said: str = "") -> str:
    """Return "its probe found <tool> under the call's key, but amount 210, not 120"."""
    parts = [f"{d['argument']} {_shown(d['found'])}, not {_shown(d['asked'])}" for d in differs]
    what = "; ".join(parts) or said or "the probe says it is not the effect asked for"
    return f"its probe found {tool} under the call's key, but different: {what}"


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _contradicted(spec: ToolSpec, found: Any, differs: list[dict[str, Any]],
                  failed: Outcome) -> Outcome:
    said = found.summary if isinstance(found, (ToolResult, FoundDifferent)) else ""
    text = contradiction_text(spec.name, differs, said)
    details = {**failed.details, "probe": "different", "differs": differs,
               "found_summary": said[:500]}
    return Outcome(failed.status, category=failed.category, message=f"{failed.message}; {text}",
                   retryable=False, ambiguous=True, log=failed.log, details=details)
