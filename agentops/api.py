"""The REST API root: one NinjaAPI, one Router per app, errors mapped in one place.

Every error leaves as ``{"error": {"code", "message", "details"}}`` with its status; a bug
is logged with its trace and answered 500 with the same shape and no trace.
"""
from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Callable
from typing import Any

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.db import DataError
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import URLPattern, re_path
from ninja import NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError, ValidationError

from agentops.api_auth import API_AUTH, UserRateThrottle, docs_guard
from agentops.errors import AgentOpsError
from agentops.jsonstate import unstorable_path
from approvals.api import keys_router
from approvals.api import router as approvals_router
from approvals.api_audit import router as audit_router
from approvals.api_notify import router as notify_router
from approvals.api_teams import router as team_members_router
from ledger.api import admin_router as ledger_admin_router
from ledger.api import router as ledger_router
from runs.api import admin_router as runs_admin_router
from runs.api import router as runs_router

logger = logging.getLogger("agentops.api")

ERROR_STATUSES = ("400", "401", "403", "404", "409", "422", "429")
_HTTP_CODES = {
    400: "bad_request", 401: "unauthenticated", 403: "forbidden", 404: "not_found",
    405: "method_not_allowed", 409: "conflict", 422: "invalid", 429: "rate_limited",
}


class ErrorBody(Schema):
    """What went wrong: a stable code, a message for people, structured details."""

    code: str
    message: str
    details: dict[str, Any]


class ErrorOut(Schema):
    """The one error shape every endpoint answers with."""

    error: ErrorBody


class AgentOpsAPI(NinjaAPI):
    """NinjaAPI whose OpenAPI document lists the shared error responses on every operation."""

    def get_openapi_schema(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Return the schema with ErrorOut documented for each 4xx an operation can answer."""
        schema = super().get_openapi_schema(*args, **kwargs)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components["ErrorBody"] = ErrorBody.model_json_schema()
        components["ErrorOut"] = {
            "type": "object",
            "title": "ErrorOut",
            "required": ["error"],
            "properties": {"error": {"$ref": "#/components/schemas/ErrorBody"}},
        }
        ref = {"content": {"application/json": {"schema": {
            "$ref": "#/components/schemas/ErrorOut"}}}}
        for path_item in schema.get("paths", {}).values():
            for operation in path_item.values():
                responses = operation.setdefault("responses", {})
                for status in ERROR_STATUSES:
                    responses.setdefault(status, {"description": "Error", **ref})
        return schema

    def _get_urls(self) -> list[Any]:
        """Return ninja's routes guarded by ``_guarded``, then a JSON 404 for anything else."""
        patterns = super()._get_urls()
        for pattern in patterns:
            if isinstance(pattern, URLPattern):
                pattern.callback = _guarded(pattern.callback)
        patterns.append(re_path(r"^.*$", _guarded(_no_route)))
        return patterns


def _has_nul(request: HttpRequest) -> bool:
    query = request.META.get("QUERY_STRING", "").lower()
    return ("\x00" in request.path or "%00" in query or "\x00" in query
            or b"\x00" in request.body or b"\\u0000" in request.body)


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _unstorable_json(request: HttpRequest) -> str:
    """Return where a JSON body holds a string PostgreSQL cannot store (keys too), else "".

    A lone UTF-16 surrogate (``"\\ud800"``) is valid JSON but not UTF-8; it would fail
    deep inside the database write. Only bodies that escape a surrogate are parsed here.
    """
    body = request.body
    if not body or not _SURROGATE_ESCAPE.search(body):
        return ""
    try:
        data = json.loads(body)
    except ValueError:
        return ""  # not JSON: the endpoint's own parsing answers
    path, why = unstorable_path(data, "body")
    return f"{why} at {path}" if path else ""


def _guarded(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Wrap a view: refuse NUL characters up front, give 405s the error shape."""

    @functools.wraps(view)
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        # PostgreSQL cannot store NUL in text or jsonb; refuse it the same way on every
        # database instead of failing deep inside a query.
        try:
            if _has_nul(request):
                return error_response(request, 422, "invalid", "NUL characters are not accepted")
            where = _unstorable_json(request)
            if where:
                return error_response(request, 422, "invalid",
                                      f"the JSON body holds a {where}; such strings cannot be "
                                      "stored (send valid UTF-8 text)", {"reason": where})
        except RequestDataTooBig:
            return error_response(request, 413, "too_large", "the request body is too large")
        response = view(request, *args, **kwargs)
        if response.status_code == 405 and "json" not in response.get("Content-Type", ""):
            allow = response.get("Allow", "")
            response = error_response(request, 405, "method_not_allowed",
                                      f"use one of: {allow}", {"allow": allow.split(", ")})
            response["Allow"] = allow
        return response

    return guarded


def _no_route(request: HttpRequest) -> HttpResponse:
    return error_response(request, 404, "not_found", f"no API endpoint at {request.path}")


def error_response(
    request: HttpRequest, status: int, code: str, message: str, details: dict | None = None
) -> HttpResponse:
    """Return the shared error shape with ``status``."""
    body = {"error": {"code": code, "message": message, "details": details or {}}}
    return api.create_response(request, body, status=status)


def _agentops_error(request: HttpRequest, exc: AgentOpsError) -> HttpResponse:
    if exc.http_status >= 500:
        logger.error("server-side error %s: %s", exc.code, exc.message)
    return error_response(request, exc.http_status, exc.code, exc.message, exc.details)


def _validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    errors = [
        {"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", "")),
         "type": str(e.get("type", ""))}
        for e in exc.errors
    ]
    unknown = sorted(".".join(p for p in e["loc"] if p != "body")
                     for e in errors if e["type"] == "extra_forbidden")
    message = "the request does not fit the schema"
    if unknown:
        message = f"unknown field(s) {', '.join(unknown)}: {message}"
    return error_response(request, 422, "validation_error", message, {"errors": errors})


def _authentication_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    response = error_response(
        request, 401, "unauthenticated",
        "send Authorization: Bearer <api key>, or log in to the console",
    )
    response["WWW-Authenticate"] = "Bearer"
    return response


def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    status = exc.status_code
    return error_response(request, status, _HTTP_CODES.get(status, "error"), str(exc))


def _permission_denied(request: HttpRequest, exc: PermissionDenied) -> HttpResponse:
    message = str(exc) or "you may not do this"
    return error_response(request, 403, "forbidden", message)


def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return error_response(request, 404, "not_found", "no such resource")


def _data_error(request: HttpRequest, exc: DataError) -> HttpResponse:
    # A value the database refuses (out of range, unstorable) is bad input, not a crash.
    logger.warning("database refused a value in %s %s: %s", request.method, request.path, exc)
    return error_response(request, 422, "invalid", "a value cannot be stored as given")


def _unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    # The trace goes to the log, never to the caller.
    logger.exception("unhandled error in %s %s", request.method, request.path)
    return error_response(request, 500, "internal_error", "an internal error occurred")


def _build() -> AgentOpsAPI:
    new = AgentOpsAPI(
        title="AgentOps API",
        version="1",
        description="Start, inspect and resolve durable agent runs.",
        urls_namespace="api",
        auth=API_AUTH,
        throttle=[UserRateThrottle()],
        docs_decorator=docs_guard,
    )
    new.add_exception_handler(AgentOpsError, _agentops_error)
    new.add_exception_handler(ValidationError, _validation_error)
    new.add_exception_handler(AuthenticationError, _authentication_error)
    new.add_exception_handler(HttpError, _http_error)
    new.add_exception_handler(PermissionDenied, _permission_denied)
    new.add_exception_handler(Http404, _not_found)
    new.add_exception_handler(DataError, _data_error)
    new.add_exception_handler(Exception, _unexpected)
    return new


api = _build()


def _mount() -> None:
    api.add_router("/runs", runs_router)
    api.add_router("/tool-calls", ledger_router)
    api.add_router("/approvals", approvals_router)
    api.add_router("/keys", keys_router)
    api.add_router("/notify", notify_router)
    # Only /teams/{slug}/members here: the teams list and team reads belong to other routers.
    api.add_router("/teams", team_members_router)
    api.add_router("/audit", audit_router)
    api.add_router("/admin/budget-policies", runs_admin_router)
    api.add_router("/admin/tool-limits", ledger_admin_router)


_mount()
