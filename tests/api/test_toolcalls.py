"""Tool calls by id, and their full result for callers who may see it."""
from __future__ import annotations

import json

from agentops.redaction import marker
from ledger.artifacts import artifact_put
from ledger.keys import redact
from ledger.sealed import seal
from tests.api.builders import make_tool_call
from tests.api.conftest import assert_error
from tests.factories import make_run


def test_get_by_id_shows_the_ledger_row(viewer):
    call = make_tool_call(make_run(), facts={"sent": True}, summary="sent")
    body = viewer.get(f"/api/tool-calls/{call.tool_call_id}").json()
    assert body["tool_call_id"] == call.tool_call_id and body["facts"] == {"sent": True}
    assert body["result"] is None and body["has_artifact"] is False


def test_a_missing_tool_call_is_404(viewer):
    assert_error(viewer.get("/api/tool-calls/tc_missing"), 404, "tool_call_not_found")


def test_a_viewer_may_not_expand_the_full_result(viewer):
    call = make_tool_call(make_run())
    assert_error(viewer.get(f"/api/tool-calls/{call.tool_call_id}?expand=true"), 403)


def test_expand_returns_the_artifact_json(operator):
    sha = artifact_put(json.dumps({"rows": list(range(100))}).encode(),
                       content_type="application/json")
    call = make_tool_call(make_run(), facts={"rows": "[in artifact]"}, artifact_sha256=sha)
    body = operator.get(f"/api/tool-calls/{call.tool_call_id}?expand=true").json()
    assert body["result"] == {"rows": list(range(100))}
    assert body["result_content_type"] == "application/json"


def test_expand_keeps_sensitive_values_redacted(support):
    secret = {"api_token": "sk-live-12345678"}
    output = {"echo": "called with sk-live-12345678", "api_token": "sk-live-12345678", "n": 1}
    sha = artifact_put(json.dumps(output).encode(), content_type="application/json")
    call = make_tool_call(make_run(), args=redact({"api_token": "sk-live-12345678", "q": "x"},
                                                  ("api_token",)),
                          sealed_args=seal(secret), artifact_sha256=sha)
    response = support.get(f"/api/tool-calls/{call.tool_call_id}?expand=true")
    text = response.content.decode()
    assert "sk-live-12345678" not in text
    body = response.json()
    mark = marker("sk-live-12345678")
    assert body["result"] == {"echo": f"called with {mark}", "api_token": mark, "n": 1}
    assert body["args"]["api_token"] == mark


def test_expand_of_a_text_log_scrubs_secrets(admin):
    sha = artifact_put(b"POST /charge token=sk-live-12345678 -> 200", content_type="text/plain")
    call = make_tool_call(make_run(), sealed_args=seal({"token": "sk-live-12345678"}),
                          artifact_sha256=sha)
    body = admin.get(f"/api/tool-calls/{call.tool_call_id}?expand=true").json()
    assert body["result"] == f"POST /charge token={marker('sk-live-12345678')} -> 200"


def test_expand_scrubs_facts_summary_and_error_too(support):
    """The same answer carries facts and summary: those were raw next to a scrubbed result."""
    secret = "sk-live-87654321"
    call = make_tool_call(make_run(), sealed_args=seal({"api_token": secret}),
                          facts={"echo": f"token {secret}"}, summary=f"used {secret}",
                          error=f"refused {secret}")
    for url in (f"/api/tool-calls/{call.tool_call_id}?expand=true",
                f"/api/tool-calls/{call.tool_call_id}"):
        response = support.get(url)
        assert response.status_code == 200
        assert secret not in response.content.decode()
        assert response.json()["summary"] == f"used {marker(secret)}"


def test_a_secret_of_another_call_of_the_run_is_scrubbed_as_well(support):
    run = make_run()
    make_tool_call(run, sealed_args=seal({"pin": "246810"}))
    echo = make_tool_call(run, facts={"said": "the pin is 246810"})
    text = support.get(f"/api/tool-calls/{echo.tool_call_id}?expand=true").content.decode()
    assert "246810" not in text and marker("246810") in text


def test_expand_without_an_artifact_returns_the_inline_facts(operator):
    call = make_tool_call(make_run(), facts={"id": 7})
    body = operator.get(f"/api/tool-calls/{call.tool_call_id}?expand=1").json()
    assert body["result"] == {"id": 7}


def test_a_missing_artifact_is_404_not_500(operator):
    call = make_tool_call(make_run(), artifact_sha256="f" * 64)
    assert_error(operator.get(f"/api/tool-calls/{call.tool_call_id}?expand=true"), 404,
                 "artifact_missing")


def test_run_tool_calls_are_listed_in_call_order(viewer):
    run = make_run()
    second = make_tool_call(run, turn=2)
    first = make_tool_call(run, turn=1)
    body = viewer.get(f"/api/runs/{run.pk}/tool-calls").json()
    assert [c["tool_call_id"] for c in body] == [first.tool_call_id, second.tool_call_id]
