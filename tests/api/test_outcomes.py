"""The API tells a clean success from a run that completed with exceptions, and lists them."""
from __future__ import annotations

import pytest

from approvals.actions import ACTIONS
from tests.approvals.conftest import blocked_run
from tests.conftest import drive
from tests.console_factories import make_user

pytestmark = pytest.mark.django_db


def test_api_returns_the_outcome_and_its_exceptions(engine, viewer):
    run = blocked_run("api-skip")
    ACTIONS["skip"].execute(make_user("op", "operators"), run, "region eu is out of scope")
    assert drive(run) == "completed_with_exceptions"
    body = viewer.get(f"/api/runs/{run.pk}").json()
    assert body["status"] == "completed_with_exceptions" and body["exceptions_count"] == 1
    [exc] = body["exceptions"]
    assert exc["kind"] == "step_skipped" and exc["who"] == "op" and exc["step"] == "check"
    assert exc["why"] == "region eu is out of scope" and exc["when"]
    listed = viewer.get("/api/runs", {"status": "completed_with_exceptions"}).json()
    assert [r["id"] for r in listed["items"]] == [str(run.pk)]
    assert viewer.get("/api/runs", {"status": "succeeded"}).json()["items"] == []
    calls = viewer.get(f"/api/runs/{run.pk}/tool-calls").json()
    assert calls and all(c["generation"] == 1 and c["supersedes"] == "" for c in calls)
