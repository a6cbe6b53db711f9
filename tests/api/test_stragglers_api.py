"""Stragglers through the API (issue 39 item 4): terminating a run whose worker died inside a
write (POST /api/runs/{id}/cancel) closes the call and its attempt; nothing stays running."""
from __future__ import annotations

import pytest

from ledger.models import ToolAttempt, ToolCall
from runs.engine.runtime.selfcheck import attempts_running_unleased
from tests.runs.test_stragglers import _dies_inside

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("tool", ["ship", "email"])
def test_straggler_write_of_a_terminated_run_is_closed_unknown(engine, monkeypatch, operator,
                                                              tool):
    run = _dies_inside(engine, monkeypatch, tool)
    response = operator.post_json(f"/api/runs/{run.pk}/cancel",
                                  {"reason": "worker gone", "confirm": "terminate"})
    assert response.status_code == 200, response.content
    call = ToolCall.objects.get(run=run, tool=tool)
    assert call.status == "unknown" and call.error_class == "cancelled_in_flight"
    attempt = ToolAttempt.objects.get(tool_call=call)
    assert attempt.status == "unknown" and attempt.finished_at is not None
    assert attempts_running_unleased() == {}
