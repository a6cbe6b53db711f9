"""Reading approvals: list with filters and pages, detail."""
from __future__ import annotations

from tests.api.builders import make_approval
from tests.api.conftest import assert_error
from tests.factories import make_run


def test_list_filters_by_status_run_and_tool(viewer):
    run, other = make_run(), make_run()
    pending = make_approval(run)
    decided = make_approval(other, status="rejected")
    ids = lambda r: [a["id"] for a in r.json()["items"]]  # noqa: E731
    assert ids(viewer.get("/api/approvals")) == [decided.pk, pending.pk]
    assert ids(viewer.get("/api/approvals?status=pending")) == [pending.pk]
    assert ids(viewer.get(f"/api/approvals?run_id={other.pk}")) == [decided.pk]
    assert ids(viewer.get("/api/approvals?tool=nope")) == []


def test_list_pages_with_a_cursor(viewer):
    run = make_run()
    made = [make_approval(run, status="approved") for _ in range(3)]
    first = viewer.get("/api/approvals?limit=2").json()
    second = viewer.get(f"/api/approvals?limit=2&cursor={first['next_cursor']}").json()
    got = [a["id"] for a in first["items"] + second["items"]]
    assert got == [a.pk for a in reversed(made)] and second["next_cursor"] is None
    assert_error(viewer.get("/api/approvals?cursor=abc"), 400, "bad_cursor")


def test_detail_names_the_tool_call_and_404_when_missing(viewer):
    approval = make_approval(make_run())
    body = viewer.get(f"/api/approvals/{approval.pk}").json()
    assert body["tool_call_id"] == approval.tool_call.tool_call_id
    assert body["status"] == "pending"
    assert_error(viewer.get("/api/approvals/999999"), 404, "approval_not_found")


def test_approvals_need_a_role(client_for):
    assert_error(client_for().get("/api/approvals"), 403)
