"""Lone UTF-16 surrogates are valid JSON but not UTF-8: every JSON endpoint refuses them (422).

Before the guard a surrogate in an object key reached PostgreSQL and answered 500 on several
paths. The walk below takes every operation with a JSON body from the OpenAPI document, so
an endpoint added later is probed too.
"""
from __future__ import annotations

import re
import uuid

import pytest

from runs.models import Run
from tests.api.conftest import assert_error

# Raw JSON text: the escapes stay escapes until the server parses them.
PROBES = {
    "key": '{"\\ud800": 1}',
    "nested_key": '{"input": {"ok": [{"\\udfff": "v"}]}, "agent": "api-test-agent"}',
    "value": '{"goal": "a \\ud83d b", "name": "\\ud800"}',
}


def _json_operations(schema: dict) -> list[tuple[str, str]]:
    ops = []
    for path, item in schema["paths"].items():
        for method, op in item.items():
            if "application/json" in op.get("requestBody", {}).get("content", {}):
                ops.append((method, path))
    return ops


def _concrete(path: str) -> str:
    def fill(match: re.Match) -> str:
        name = match.group(1)
        if name == "run_id":
            return str(uuid.uuid4())
        if name.endswith("_id") and "tool_call" in name:
            return "tc_x"
        return "1"

    return re.sub(r"\{(\w+)\}", fill, path)


def test_the_walk_covers_the_json_endpoints(admin):
    ops = _json_operations(admin.get("/api/openapi.json").json())
    paths = {p for _, p in ops}
    # The endpoints that answered 500 before, among them.
    assert {"/api/runs", "/api/runs/{run_id}/signals", "/api/approvals/{approval_id}/decide",
            "/api/runs/{run_id}/actions"} <= paths, paths
    assert len(ops) >= 8


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_every_json_endpoint_refuses_lone_surrogates_with_422(admin, agent, probe):
    ops = _json_operations(admin.get("/api/openapi.json").json())
    for method, path in ops:
        response = getattr(admin, method)(_concrete(path), PROBES[probe],
                                          content_type="application/json")
        error = assert_error(response, 422, "invalid")
        assert "surrogate" in error["message"], (method, path, error)
        assert error["details"]["reason"].startswith("string with an unpaired UTF-16 surrogate")


def test_a_surrogate_key_in_run_input_names_where_and_starts_nothing(admin, agent):
    body = '{"agent": "api-test-agent", "goal": "g", "input": {"order": {"\\udc00x": 1}}}'
    response = admin.post("/api/runs", body, content_type="application/json")
    error = assert_error(response, 422, "invalid")
    assert "body.input.order.<key" in error["message"]
    assert not Run.objects.exists()


def test_paired_surrogates_are_ordinary_text(admin, agent):
    body = '{"agent": "api-test-agent", "goal": "ship it \\ud83d\\ude80", "input": {"\\u00e9": 1}}'
    response = admin.post("/api/runs", body, content_type="application/json")
    assert response.status_code == 201, response.content
    assert Run.objects.get().goal == "ship it \U0001F680"
