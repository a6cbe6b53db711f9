"""Fuzz the whole API from its OpenAPI document, in-process, as an admin and as a viewer.

Every operation gets a bounded number of generated requests; none may answer 500, and every
answer must match the documented status codes, content types and schemas. Each failure this
found is fixed and kept as a regular test next to the endpoint's other tests.
"""
from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from agentops.wsgi import application
from approvals.apikeys import apikey_create
from tests.api.builders import make_approval, make_tool_call
from tests.factories import make_run

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]


@pytest.fixture
def api_schema(db, settings):
    """The API's OpenAPI document, served by the WSGI app in this process."""
    settings.AGENTOPS_API_RATE = None
    settings.AGENTOPS_ENQUEUE_TICKS = False
    return schemathesis.openapi.from_wsgi("/api/openapi.json", application)


def _bearer(make_user, role: str) -> dict[str, str]:
    run = make_run()
    make_approval(run)
    make_tool_call(run, facts={"ok": True})
    _, raw = apikey_create(user=make_user(f"fuzz-{role}", role), name="fuzz")
    return {"Authorization": f"Bearer {raw}"}


@pytest.fixture
def as_admin(make_user) -> dict[str, str]:
    """An admin's Authorization header, with some data to read."""
    return _bearer(make_user, "admins")


@pytest.fixture
def as_viewer(make_user) -> dict[str, str]:
    """A viewer's Authorization header, with some data to read."""
    return _bearer(make_user, "viewers")


schema = schemathesis.pytest.from_fixture("api_schema")
FUZZ = settings(max_examples=12, deadline=None, derandomize=True,
                suppress_health_check=list(HealthCheck))


@schema.parametrize()
@FUZZ
def test_api_as_admin(case, as_admin):
    case.call_and_validate(headers=as_admin, checks=CHECKS)


@schema.parametrize()
@FUZZ
def test_api_as_viewer(case, as_viewer):
    case.call_and_validate(headers=as_viewer, checks=CHECKS)
