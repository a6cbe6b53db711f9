"""What an unclassified tool exception means: read its HTTP status and its type.

A tool that lets its HTTP client's exception escape (``httpx.HTTPStatusError``,
``requests.HTTPError``, ``urllib.error.HTTPError``, an SDK's ``APIStatusError``) still says
what happened: 401 our credentials were refused, 403 permission, 404 not found, 400/422 the
request (or the adapter building it) is wrong, 429 slow down, 5xx the backend failed. An
exception raised while reading an answer (``KeyError``, ``json.JSONDecodeError``) means the
answer no longer has the shape the adapter expects. The typed ``ledger.errors`` a tool raises
say the same things directly and are read before this.
"""
from __future__ import annotations

import json
from typing import Any

# HTTP status -> (category, retryable, what it means in words)
_BY_STATUS = {
    401: ("credentials", False, "the backend refused our credentials"),
    403: ("permission", False, "the backend refused: no permission"),
    404: ("not_found", False, "the backend found nothing at what was asked for"),
    400: ("bad_request", False, "the backend refused the request as invalid"),
    422: ("bad_request", False, "the backend refused the request as invalid"),
    429: ("rate_limited", True, "the backend asked us to slow down"),
}
# Raised while reading an answer: the answer is not what the adapter expects.
_SHAPE = (KeyError, IndexError, json.JSONDecodeError, AttributeError)


def http_status(exc: BaseException) -> int | None:
    """Return the HTTP status an exception carries (its own, or its response's), else None."""
    for holder in (exc, getattr(exc, "response", None)):
        for name in ("status_code", "status", "code"):
            value = getattr(holder, name, None)
            if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
                return value
    return None


def meaning_of(exc: BaseException) -> tuple[str, bool, str] | None:
    """Return (category, retryable, meaning) for an exception the tool did not type, or None."""
    status = http_status(exc)
    if status is not None:
        if status in _BY_STATUS:
            category, retryable, said = _BY_STATUS[status]
            return category, retryable, f"{said} (HTTP {status})"
        if status >= 500:
            return "transient", True, f"the backend failed (HTTP {status})"
        if status >= 400:
            return "permanent", False, f"the backend refused (HTTP {status})"
    if isinstance(exc, _SHAPE):
        return ("api_changed", False, f"its answer did not have the shape the adapter reads "
                f"({type(exc).__name__})")
    if isinstance(exc, PermissionError):
        return "permission", False, "permission denied (PermissionError)"
    return None


def details_of(exc: BaseException) -> dict[str, Any]:
    """Return the HTTP status and exception type, for the ledger and the recommendation."""
    status = http_status(exc)
    return {"exception": type(exc).__name__, **({"http_status": status} if status else {})}
