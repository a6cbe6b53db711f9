"""The error contract: one JSON shape, the right status, never a trace."""
from __future__ import annotations

import logging

import pytest

from runs import api_selectors
from tests.api.conftest import assert_error
from tests.factories import make_run


def test_an_unexpected_error_is_500_with_the_shape_and_no_trace(viewer, monkeypatch, caplog):
    def explode(**kwargs):
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(api_selectors, "run_list_page", explode)
    with caplog.at_level(logging.ERROR, logger="agentops.api"):
        response = viewer.get("/api/runs")
    error = assert_error(response, 500, "internal_error")
    assert "secret internal detail" not in response.content.decode()
    assert error["details"] == {}
    assert "secret internal detail" in caplog.text  # the trace is in the log instead


@pytest.mark.parametrize("body", ["{", "[]", '"text"', "null"])
def test_malformed_json_bodies_are_4xx_not_500(admin, body):
    response = admin.post("/api/keys", body, content_type="application/json")
    assert response.status_code in (400, 422), response.content
    assert_error(response, response.status_code)


def test_an_unknown_path_under_the_api_is_a_json_404(viewer):
    assert_error(viewer.get("/api/nothing-here"), 404, "not_found")


def test_a_wrong_method_is_405_with_the_shape_and_allow(viewer):
    run = make_run()
    response = viewer.delete(f"/api/runs/{run.pk}")
    error = assert_error(response, 405, "method_not_allowed")
    assert response["Allow"] == "GET" and error["details"]["allow"] == ["GET"]


# PostgreSQL text and jsonb cannot hold NUL: each of these was a 500 there before the guard.
@pytest.mark.parametrize("method,path,body", [
    ("post", "/api/keys", {"name": "a\x00b"}),
    ("post", "/api/runs", {"agent": "api-test-agent", "goal": "g", "input": {"k": "\x00"}}),
    ("post", "/api/admin/budget-policies", {"agent_name": "a\x00"}),
    ("get", "/api/runs?text=a%00b", None),
    ("get", "/api/runs?agent=a%00b", None),
    ("get", "/api/approvals?tool=a%00b", None),
    ("get", "/api/tool-calls/tc_%00", None),
])
def test_nul_characters_are_422_on_every_database(admin, agent, method, path, body):
    if body is None:
        response = admin.get(path)
    else:
        response = admin.post(path, body, content_type="application/json")
    assert_error(response, 422, "invalid")


def test_huge_integers_in_the_path_are_422_not_500(admin):
    assert_error(admin.get("/api/admin/budget-policies/99999999999999999999999"), 422)
    assert_error(admin.get("/api/approvals/99999999999999999999999"), 422)


def test_the_openapi_document_and_docs_are_served(viewer):
    schema = viewer.get("/api/openapi.json").json()
    assert "/api/runs" in schema["paths"]
    op = schema["paths"]["/api/runs"]["get"]
    assert op["responses"]["401"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ErrorOut"}
    assert viewer.get("/api/docs").status_code == 200


def test_an_oversized_body_is_413_with_the_shape(admin, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = admin.post("/api/keys", {"name": "x" * 2000}, content_type="application/json")
    assert_error(response, 413, "too_large")
