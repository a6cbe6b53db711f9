"""Map a provider's failure (HTTP status, error code, headers) to a typed ModelError.

Both clients (OpenAI-compatible and Anthropic) answer failures in the same terms; each only
says how its SDK words the status, the code and "the prompt is too long". Messages are short
and secret-free: a status, a vetted code, never the provider's body, URL or key.
"""
from __future__ import annotations

import json
import math
import re
import time
from email.utils import parsedate_to_datetime
from typing import Any

from agentops.llm.protocol import (
    AuthError,
    ContextOverflow,
    InvalidRequest,
    ModelError,
    ModelTimeout,
    RateLimited,
    ServerError,
)

# Providers word "prompt too long" differently; the failure policy must still see one category.
CONTEXT_HINT = re.compile(
    r"context[_ ]length|context window|maximum context|n_ctx|too many tokens|prompt is too long"
    r"|input is too long|exceed\w*\W+(?:\w+\W+){0,4}?(?:context|tokens?|window)\b",
    re.IGNORECASE,
)
_SAFE_CODE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")


def safe_code(code: object) -> str:
    """Return a provider error code fit to show (short, plain characters), else ""."""
    return code if isinstance(code, str) and _SAFE_CODE.match(code) else ""


def mentions_context(message: str, body: object) -> bool:
    """Tell whether an error's message or body says the prompt does not fit the window."""
    text = json.dumps(body) if isinstance(body, dict) else body if isinstance(body, str) else ""
    return bool(CONTEXT_HINT.search(f"{message} {text}"))


def transport_error(*, timed_out: bool) -> ModelError:
    """Return the error for a call that got no HTTP answer (timeout or connection failure)."""
    if timed_out:
        return ModelTimeout("timeout: no answer in time")
    return ServerError("server_error: connection failed")


def cut_stream(missing: str, text: list[str] | str = "") -> ModelError:
    """Return the error for a streamed reply that ended without its end marker.

    The connection closed (or the server stopped) before the protocol's end: what arrived is
    a fragment, never a reply; it is a transport failure, retried as a server error.
    """
    got = len("".join(text)) if not isinstance(text, str) else len(text)
    return ServerError(f"server_error: the stream ended before its end ({missing}) "
                       f"after {got} characters of text")


def garbled_stream(exc: Exception) -> ModelError:
    """Return the error for streamed bytes that are not UTF-8 or events that are not JSON."""
    what = "not UTF-8" if isinstance(exc, UnicodeDecodeError) else "not JSON"
    return ServerError(f"server_error: the streamed reply is {what} ({type(exc).__name__})")


def status_error(status: object, code: str, *, response: Any, overflow: bool) -> ModelError:
    """Return the ModelError for an HTTP error answer, carrying ``status_code`` and ``provider_code``.

    ``overflow`` is the client's verdict that a 4xx means the prompt is too long; a status
    that is not an HTTP error is a malformed response.
    """
    if not isinstance(status, int) or status < 400:
        return ServerError("server_error: malformed response")
    error = _by_status(status, code, response=response, overflow=overflow)
    error.status_code = status  # type: ignore[attr-defined]
    error.provider_code = code  # type: ignore[attr-defined]
    return error


def _by_status(status: int, code: str, *, response: Any, overflow: bool) -> ModelError:
    """Pick the ModelError class for an HTTP error status (529 is Anthropic's "overloaded")."""
    suffix = f" ({code})" if code else ""
    if status == 429:
        return RateLimited(f"rate_limited: HTTP 429{suffix}", retry_after=retry_after(response))
    if status == 408:
        return ModelTimeout(f"timeout: HTTP 408{suffix}")
    if status >= 500 or status == 409:
        return ServerError(f"server_error: HTTP {status}{suffix}")
    if status in (401, 403):
        return AuthError(f"auth_error: HTTP {status}{suffix}")
    if overflow:
        return ContextOverflow(f"context_overflow: HTTP {status}{suffix}")
    return InvalidRequest(f"invalid_request: HTTP {status}{suffix}")


def retry_after(response: Any) -> float | None:
    """Return the seconds a 429 asks us to wait (Retry-After as seconds or HTTP-date)."""
    headers = getattr(response, "headers", None) or {}
    millis = headers.get("retry-after-ms")
    value = headers.get("retry-after")
    try:
        seconds = float(millis) / 1000 if millis is not None else float(value or "")
    except ValueError:
        seconds = _seconds_until(value) if value else math.nan
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _seconds_until(http_date: str) -> float:
    """Return the seconds from now until an HTTP-date, or NaN when it is not one."""
    try:
        return parsedate_to_datetime(http_date).timestamp() - time.time()
    except (TypeError, ValueError):
        return math.nan
