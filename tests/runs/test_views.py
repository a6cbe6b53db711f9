"""Console pages for runs: role gates, the queue, the run page, actions, escaping, CSRF."""
from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from approvals.models import Intervention
from ledger.artifacts import artifact_put
from runs import selectors as sel
from runs.models import Event, Run
from runs.statuses import RunStatus
from tests.console_factories import (PASSWORD, client_for, make_attention_run,
                                     make_tool_call)
from tests.factories import make_run

pytestmark = pytest.mark.django_db
XSS = "<script>alert(1)</script>"




def test_anonymous_is_sent_to_login():
    response = Client().get(reverse("console:queue"))
    assert response.status_code == 302
    assert response.url.startswith(reverse("console:login") + "?next=/")


def test_login_page_signs_in(users):
    client = Client()
    assert client.get(reverse("console:login")).status_code == 200
    response = client.post(reverse("console:login"),
                           {"username": "viewer", "password": PASSWORD})
    assert response.status_code == 302
    assert client.get(reverse("console:queue")).status_code == 200


def test_user_without_role_is_refused(users):
    response = client_for(users["nobody"]).get(reverse("console:queue"))
    assert response.status_code == 403


def test_queue_tabs_count_and_list_runs(users):
    blocked = make_attention_run(RunStatus.BLOCKED, goal="Blocked refund")
    make_attention_run(RunStatus.UNKNOWN, goal="Unknown email")
    make_attention_run(RunStatus.WAITING, goal="Waits for approval")
    html = client_for(users["viewer"]).get(reverse("console:queue") + "?tab=blocked").content.decode()
    assert "Blocked refund" in html and "Unknown email" not in html
    assert str(blocked.pk)[:8] in html and "charge · charge_card" in html
    assert re.search(r'data-tab="unknown">Unknown <span class="count">1<', html)
    assert re.search(r'data-tab="approvals">Approvals <span class="count">1<', html)


def test_queue_filters_live_in_the_url(users):
    make_attention_run(goal="Refund A", agent="billing", tool="charge_card")
    make_attention_run(goal="Refund B", agent="support", tool="send_email")
    client = client_for(users["viewer"])
    by_agent = client.get(reverse("console:queue"), {"tab": "blocked", "agent": "billing"})
    assert "Refund A" in by_agent.content.decode() and "Refund B" not in by_agent.content.decode()
    by_tool = client.get(reverse("console:queue"), {"tab": "blocked", "tool": "send_email"})
    assert "Refund B" in by_tool.content.decode() and "Refund A" not in by_tool.content.decode()
    by_text = client.get(reverse("console:queue"), {"tab": "blocked", "q": "refund b"})
    assert "Refund B" in by_text.content.decode() and "Refund A" not in by_text.content.decode()
    # Tab links keep the filter, so a filtered view can be shared.
    assert "agent=billing" in by_agent.content.decode()


def test_queue_pages_with_a_keyset_cursor():
    runs = [make_attention_run(goal=f"run {i}") for i in range(5)]
    first = sel.run_list_attention(tab="blocked", filters=sel.QueueFilters(), teams=None, limit=2)
    second = sel.run_list_attention(tab="blocked", filters=sel.QueueFilters(), teams=None,
                                    cursor=first.next_cursor, limit=2)
    third = sel.run_list_attention(tab="blocked", filters=sel.QueueFilters(), teams=None,
                                   cursor=second.next_cursor, limit=2)
    seen = [r.pk for r in first.rows + second.rows + third.rows]
    assert sorted(seen) == sorted(r.pk for r in runs) and len(set(seen)) == 5
    assert third.next_cursor is None


def test_grouped_view_counts_runs_per_signature(users):
    for _ in range(3):
        make_attention_run(tool="charge_card")
    make_attention_run(tool="send_email")
    html = client_for(users["viewer"]).get(reverse("console:queue"), {"view": "groups"}).content.decode()
    assert "<strong>3</strong>" in html and "<strong>1</strong>" in html
    assert html.index("<strong>3</strong>") < html.index("<strong>1</strong>")


def test_htmx_refresh_returns_only_the_results_partial(users):
    make_attention_run()
    response = client_for(users["viewer"]).get(reverse("console:queue"), HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="results"') and "<html" not in html


def test_viewer_sees_no_bulk_or_action_buttons(users):
    run = make_attention_run()
    client = client_for(users["viewer"])
    assert "Bulk action" not in client.get(reverse("console:queue")).content.decode()
    html = client.get(reverse("console:run", args=[run.pk])).content.decode()
    assert "data-verb=" not in html and ">Terminate</a>" not in html
    # The recommendation still names the button, and who can press it.
    assert "Ask an operator to press Retry step" in html
    assert "operators role can act" in html


def test_operator_sees_buttons_with_the_recommended_one_first(users):
    run = make_attention_run(recommended="skip")
    html = client_for(users["operator"]).get(reverse("console:run", args=[run.pk])).content.decode()
    verbs = re.findall(r'data-verb="(\w+)"', html)
    # Restart from input is not offered: the run's agent (support-bot) is not deployed.
    assert verbs[0] == "skip" and set(verbs) == {"retry", "skip", "edit_plan", "rollback",
                                                   "finish_partial", "terminate"}
    assert "Bulk action" in client_for(users["operator"]).get(reverse("console:queue")).content.decode()


def test_unknown_run_offers_confirm_buttons_and_budget_raise_is_admin_only(users):
    unknown = make_attention_run(RunStatus.UNKNOWN, recommended="confirm_not_executed")
    html = client_for(users["operator"]).get(reverse("console:run", args=[unknown.pk])).content.decode()
    # The server accepts a rollback of an unknown run, so the console offers it too.
    assert {"confirm_executed", "confirm_not_executed", "rollback", "finish_partial",
            "terminate"} == set(
        re.findall(r'data-verb="(\w+)"', html))
    broke = make_attention_run(reason="budget_exhausted", recommended="raise_budget")
    op = re.findall(r'data-verb="(\w+)"', client_for(users["operator"]).get(
        reverse("console:run", args=[broke.pk])).content.decode())
    admin = re.findall(r'data-verb="(\w+)"', client_for(users["admin"]).get(
        reverse("console:run", args=[broke.pk])).content.decode())
    assert "raise_budget" not in op and "resume" in op
    assert admin[0] == "raise_budget"


def test_run_page_shows_panel_progress_budgets_and_timeline(users):
    run = make_attention_run()
    html = client_for(users["viewer"]).get(reverse("console:run", args=[run.pk])).content.decode()
    assert "Refund order 42" in html and "charge_card failed 3 times: 503" in html
    assert "transient provider error" in html
    assert '<progress max="3" value="1">' in html
    assert "1,200 / 10,000" in html and "$0.0150 / $1.0000" in html
    assert html.count('class="tl-bar') == 2 and "↻3" in html


def test_untrusted_text_is_escaped_everywhere_on_the_run_page(users):
    run = make_attention_run(goal=f"goal {XSS}", detail=f"detail {XSS}")
    make_tool_call(run, summary=f"summary {XSS}", args={"body": XSS}, facts={"x": XSS})
    Event.objects.filter(run=run).update(data={"note": XSS})
    html = client_for(users["viewer"]).get(reverse("console:run", args=[run.pk])).content.decode()
    assert XSS not in html
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 5


def test_pages_have_no_inline_script_style_or_handlers(users):
    run = make_attention_run()
    client = client_for(users["admin"])
    for url in (reverse("console:queue"), reverse("console:run", args=[run.pk]),
                reverse("console:inbox"), reverse("console:settings"), reverse("console:audit"),
                reverse("console:run_action", args=[run.pk, "retry"])):
        html = client.get(url).content.decode()
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), url
        assert not re.search(r"\s(on[a-z]+|style)\s*=", html), url


def test_events_page_by_seq_and_filters(users):
    run = make_run()
    from runs.engine.runtime.events import NewEvent, event_append

    event_append(run=run, events=[NewEvent("run.note", {"i": i}, tool_call_id="tc_x" if i % 2
                                           else "") for i in range(70)])
    client = client_for(users["viewer"])
    first = client.get(reverse("console:run_events", args=[run.pk]))
    seqs = [int(s) for s in re.findall(r'<td class="num mono">(\d+)</td>', first.content.decode())]
    assert seqs[0] == 71 and len(seqs) == 50
    older = client.get(reverse("console:run_events", args=[run.pk]), {"before": seqs[-1]})
    older_seqs = re.findall(r'<td class="num mono">(\d+)</td>', older.content.decode())
    assert older_seqs[0] == str(seqs[-1] - 1) and len(older_seqs) == 21
    only_tc = client.get(reverse("console:run_events", args=[run.pk]), {"tool_call_id": "tc_x"})
    assert len(re.findall(r'<td class="num mono">', only_tc.content.decode())) == 35


def test_action_confirm_step_lists_calls_that_run_again(users):
    run = make_attention_run()
    response = client_for(users["operator"]).get(
        reverse("console:run_action", args=[run.pk, "retry"]), HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html
    assert "charge_card" in html and "effect-reversible" in html
    assert f'name="seen_seq" value="{run.last_seq}"' in html


@pytest.mark.parametrize("role", ["viewer", "support"])
def test_non_operators_are_refused_actions(users, role):
    run = make_attention_run()
    client = client_for(users[role])
    url = reverse("console:run_action", args=[run.pk, "terminate"])
    assert client.get(url).status_code == 403
    assert client.post(url, {"reason": "x", "seen_seq": run.last_seq}).status_code == 403
    assert Run.objects.get(pk=run.pk).status == RunStatus.BLOCKED
    assert not Intervention.objects.exists()


def test_action_that_does_not_apply_is_refused(users):
    run = make_attention_run(RunStatus.UNKNOWN)
    url = reverse("console:run_action", args=[run.pk, "skip"])
    assert client_for(users["operator"]).post(url, {"reason": "x"}).status_code == 403


def test_action_needs_a_reason(users):
    run = make_attention_run()
    response = client_for(users["operator"]).post(
        reverse("console:run_action", args=[run.pk, "retry"]), {"reason": " "})
    assert response.status_code == 422 and "A reason is required" in response.content.decode()


def test_a_reason_over_the_limit_says_the_limit_and_keeps_the_text(users):
    """Issue 31 item 7: 2,001 characters is not "no reason"; what was typed comes back."""
    run = make_attention_run()
    response = client_for(users["operator"]).post(
        reverse("console:run_action", args=[run.pk, "retry"]), {"reason": "y" * 2001})
    html = response.content.decode()
    assert response.status_code == 422 and "A reason is required" not in html
    assert "The reason is 2,001 characters; the limit is 2,000." in html
    assert "y" * 2001 in html
    assert Run.objects.get(pk=run.pk).status == RunStatus.BLOCKED


def test_action_on_a_run_that_changed_meanwhile_asks_again(users):
    run = make_attention_run()
    response = client_for(users["operator"]).post(
        reverse("console:run_action", args=[run.pk, "retry"]),
        {"reason": "fixed", "seen_seq": run.last_seq - 1})
    assert response.status_code == 409 and "changed while you were reading" in response.content.decode()
    assert Run.objects.get(pk=run.pk).status == RunStatus.BLOCKED


def test_post_without_csrf_token_is_refused(users):
    run = make_attention_run()
    client = Client(enforce_csrf_checks=True)
    client.force_login(users["operator"])
    for url, data in ((reverse("console:run_action", args=[run.pk, "retry"]), {"reason": "x"}),
                      (reverse("console:bulk"), {"verb": "retry", "reason": "x"}),
                      (reverse("console:run_fork", args=[run.pk]), {"seq": 1})):
        assert client.post(url, data).status_code == 403, url


def test_bulk_confirm_shows_the_count_first(users):
    runs = [make_attention_run(agent="billing") for _ in range(3)]
    make_attention_run(agent="other")
    client = client_for(users["operator"])
    picked = client.get(reverse("console:bulk"), {"run": [str(runs[0].pk), str(runs[1].pk)]})
    assert "<strong>2</strong> selected runs" in picked.content.decode()
    matching = client.get(reverse("console:bulk"), {"all": "1", "tab": "blocked",
                                                    "agent": "billing"})
    html = matching.content.decode()
    assert "<strong>3</strong> runs matching" in html and "agent=billing" in html
    no_reason = client.post(reverse("console:bulk"), {"all": "1", "tab": "blocked",
                                                      "verb": "retry", "bulk_reason": ""})
    assert no_reason.status_code == 422 and "A reason is required" in no_reason.content.decode()
    assert client_for(users["viewer"]).get(reverse("console:bulk")).status_code == 403


def test_artifacts_are_served_as_plain_text_only_for_their_run(users):
    run = make_attention_run()
    other = make_attention_run()
    sha = artifact_put(XSS.encode())
    make_tool_call(run, artifact_sha256=sha, status="succeeded")
    client = client_for(users["operator"])
    response = client.get(reverse("console:run_artifact", args=[run.pk, sha]))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert response["X-Content-Type-Options"] == "nosniff"
    assert client.get(reverse("console:run_artifact", args=[other.pk, sha])).status_code == 404


def test_viewers_may_not_read_raw_tool_output_the_api_keeps_from_them(users):
    """The API refuses ?expand=true to viewers; the console page and its links follow suit."""
    run = make_attention_run()
    sha = artifact_put(b"raw tool log: token=sk-live-viewer-must-not-see")
    make_tool_call(run, artifact_sha256=sha, status="succeeded")
    viewer = client_for(users["viewer"])
    assert viewer.get(reverse("console:run_artifact", args=[run.pk, sha])).status_code == 403
    url = reverse("console:run_artifact", args=[run.pk, sha])
    assert url not in viewer.get(reverse("console:run", args=[run.pk])).content.decode()
    operator = client_for(users["operator"])
    assert url in operator.get(reverse("console:run", args=[run.pk])).content.decode()
    assert operator.get(url).status_code == 200


def test_unknown_run_is_404(users):
    import uuid

    response = client_for(users["viewer"]).get(reverse("console:run", args=[uuid.uuid4()]))
    assert response.status_code == 404


def test_operator_retries_a_blocked_run_and_it_is_audited(users):
    run = make_attention_run()
    response = client_for(users["operator"]).post(
        reverse("console:run_action", args=[run.pk, "retry"]),
        {"reason": "provider is back", "seen_seq": run.last_seq})
    assert response.status_code == 302 and response.url == reverse("console:run", args=[run.pk])
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED
    row = Intervention.objects.get(run=run)
    assert (row.action, row.actor_name, row.reason) == ("run.retry", "operator",
                                                        "provider is back")


def test_operator_settles_an_unknown_call_as_not_executed(users):
    run = make_attention_run(RunStatus.UNKNOWN)
    response = client_for(users["operator"]).post(
        reverse("console:run_action", args=[run.pk, "confirm_not_executed"]),
        {"reason": "provider shows no such email", "seen_seq": run.last_seq,
         "confirm": "again"},  # the call has no key: it may happen twice
        HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and response["HX-Redirect"] == reverse(
        "console:run", args=[run.pk])
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED
    assert Intervention.objects.get(run=run).action == "run.confirm_not_executed"


def test_bulk_terminate_all_matching_reports_each_run(users):
    targets = [make_attention_run(agent="billing") for _ in range(2)]
    bystander = make_attention_run(agent="other")
    response = client_for(users["operator"]).post(reverse("console:bulk"), {
        "all": "1", "tab": "blocked", "agent": "billing", "verb": "terminate",
        "bulk_reason": "incident 42 cleanup", "confirm": "terminate"})
    assert response.status_code == 200
    results = response.context["results"]
    assert sorted(r["run_id"] for r in results) == sorted(r.pk for r in targets)
    assert all(r["outcome"] == "done" for r in results)
    assert set(Run.objects.filter(pk__in=[r.pk for r in targets])
               .values_list("status", flat=True)) == {RunStatus.CANCELLED}
    assert Run.objects.get(pk=bystander.pk).status == RunStatus.BLOCKED
    assert "pill-done" in response.content.decode()
