"""Fuzz the whole API from its OpenAPI document, in-process, as an admin and as a viewer.

Every operation gets a bounded number of generated requests; none may answer 500, and every
answer must match the documented status codes, content types and schemas. Each failure this
found is fixed and kept as a regular test next to the endpoint's other tests.
"""
from __future__ import annotations

import itertools
import os
from dataclasses import dataclass

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import override_settings
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from agentops.wsgi import application
from approvals.apikeys import apikey_create
from approvals.models import ApiKey
from tests.api.builders import make_approval, make_tool_call
from tests.factories import make_run

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]
# AGENTOPS_FUZZ_EXAMPLES=200 digs deeper by hand; the suite stays bounded (< 1 CPU-minute).
FUZZ = settings(max_examples=int(os.environ.get("AGENTOPS_FUZZ_EXAMPLES", "10")), deadline=None,
                derandomize=not os.environ.get("AGENTOPS_FUZZ_EXAMPLES"),
                suppress_health_check=list(HealthCheck))
# Loaded at import through the WSGI app (serving the document touches no database).
# schemathesis.pytest.from_fixture would be lazier, but it breaks on pytest 9 (node._nodeid).
# The document is served to signed-in callers only; the setting opens it for this load.
with override_settings(AGENTOPS_API_DOCS_PUBLIC=True):
    schema = schemathesis.openapi.from_wsgi("/api/openapi.json", application)
_toggle = itertools.cycle([True, False])


@dataclass
class Caller:
    """Who calls, and a run that exists, for steering generated cases."""

    headers: dict[str, str]
    run_id: str

    def steer(self, case) -> None:
        """Point every other case at the existing run and the registered agent."""
        if case.path_parameters and "run_id" in case.path_parameters and next(_toggle):
            case.path_parameters["run_id"] = self.run_id
        body = case.body
        if case.method == "POST" and case.path == "/api/runs" and isinstance(body, dict) \
                and isinstance(body.get("agent"), str):
            body["agent"] = "api-test-agent"


@pytest.fixture(autouse=True)
def _no_rate_limit(settings, agent) -> None:
    """Let the fuzzer call as fast as it likes (the test agent starts no workers)."""
    settings.AGENTOPS_API_RATE = None


@pytest.fixture(autouse=True)
def _keep_the_test_connection():
    """Keep the test's transaction open across requests, as Django's own test client does.

    The WSGI app fires request_finished, whose close_old_connections would close a
    PostgreSQL connection that sits inside the test's transaction.
    """
    signals = (request_started, request_finished)
    for signal in signals:
        signal.disconnect(close_old_connections)
    yield
    for signal in signals:
        signal.connect(close_old_connections)


def _caller(make_user, role: str) -> Caller:
    run = make_run()
    make_approval(run)
    make_tool_call(run, facts={"ok": True})
    key, raw = apikey_create(user=make_user(f"fuzz-{role}", role), name="fuzz")
    # Move the caller's own key out of the small ids the fuzzer tries on DELETE /keys/{id},
    # or one lucky revocation would turn every later case into a 401.
    ApiKey.objects.filter(pk=key.pk).update(id=987_654_321)
    return Caller({"Authorization": f"Bearer {raw}"}, str(run.pk))


@pytest.fixture
def as_admin(make_user) -> Caller:
    """An admin with some data to read."""
    return _caller(make_user, "admins")


@pytest.fixture
def as_viewer(make_user) -> Caller:
    """A viewer with some data to read."""
    return _caller(make_user, "viewers")


@schema.parametrize()
@FUZZ
def test_api_as_admin(case, as_admin):
    as_admin.steer(case)
    case.call_and_validate(headers=as_admin.headers, checks=CHECKS)


@schema.parametrize()
@FUZZ
def test_api_as_viewer(case, as_viewer):
    as_viewer.steer(case)
    case.call_and_validate(headers=as_viewer.headers, checks=CHECKS)
