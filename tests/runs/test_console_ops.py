"""Console round 2, operator work (issue 21): rollback checkpoints named by step, bulk
confirm and per-run results, typed confirmation of irreversible actions, next-retry times,
and the evidence behind a loop or stall. Real engine runs, real requests."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse

from approvals.models import Intervention
from ledger.models import ToolCall
from runs.models import Event, Run, Snapshot
from tests.approvals.conftest import blocked_run, unknown_run
from tests.console_factories import client_for, make_attention_run
from tests.engine_agents import world
from tests.ops_runs import (backing_off, looping, model_backing_off, out_of_turns,
                            refund_then_blocked, stalled)

pytestmark = pytest.mark.django_db
UTC = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"


def _before(run: Run, step: str) -> int:
    return Event.objects.filter(run=run, type="step.started", data__step=step).get().seq - 1


def test_rollback_offers_every_step_boundary_by_name_and_time(engine, users):
    run = refund_then_blocked()
    client = client_for(users["operator"])
    html = client.get(reverse("console:run_action", args=[run.pk, "rollback"])).content.decode()
    options = re.findall(r'<option value="(\d+)" (selected)?>([^<]*)</option>', html)
    assert [(int(v), text.split(" — ")[0]) for v, _, text in options] == [
        (_before(run, "notify"), "before step 3 · notify (Tell the customer)"),
        (_before(run, "refund_customer"), "before step 2 · refund_customer (Refund the customer)"),
        (_before(run, "check"), "before step 1 · check (Check the policy)")]
    assert all(re.search(rf"— started {UTC}, \d+s ago$", text) for _, _, text in options)
    assert options[0][1] == "selected"  # before the current step, until another is picked


def test_rollback_without_a_step_boundary_says_so_in_the_dialog(users):
    run = make_attention_run()  # made by hand: no event log to roll back along
    response = client_for(users["operator"]).get(
        reverse("console:run_action", args=[run.pk, "rollback"]))
    html = response.content.decode()
    assert response.status_code == 200
    assert "choose the checkpoint (event number) to roll back to" in html
    assert '<option value="">no step boundary to roll back to</option>' in html


def test_rollback_to_before_the_refund_previews_and_undoes_it(engine, users):
    run = refund_then_blocked()
    to_seq = _before(run, "refund_customer")
    url = reverse("console:run_action", args=[run.pk, "rollback"])
    client = client_for(users["operator"])
    html = client.get(url, {"to_seq": to_seq}).content.decode()
    refund = ToolCall.objects.get(run=run, tool="refund")
    row = re.search(rf'<tr data-call="{refund.tool_call_id}">(.*?)</tr>', html, re.S).group(1)
    assert "refund" in row and "idempotent" in row and "undone by its compensation" in row
    email = ToolCall.objects.get(run=run, tool="email")
    row = re.search(rf'<tr data-call="{email.tool_call_id}">(.*?)</tr>', html, re.S).group(1)
    assert "irreversible" in row and "I handled it by hand" in row
    assert "Type 250 (the amount) or “rollback” to roll back" in html
    bare = client.post(url, {"to_seq": to_seq, "reason": "wrong order", "seen_seq": run.last_seq})
    assert bare.status_code == 422
    assert "Roll back cannot be undone: type the amount (250) or “rollback”" in \
        bare.content.decode()
    assert world.count("unrefund") == 0 and not Intervention.objects.filter(run=run).exists()
    done = client.post(url, {"to_seq": to_seq, "reason": "wrong order", "confirm": "250",
                             "ticked": email.tool_call_id, "seen_seq": run.last_seq})
    assert done.status_code == 302
    refund.refresh_from_db()
    assert refund.status == "compensated" and world.count("unrefund") == 1
    assert Intervention.objects.get(run=run).data["to_seq"] == to_seq


def test_terminate_from_the_console_needs_the_word(engine, users):
    run = blocked_run()
    url = reverse("console:run_action", args=[run.pk, "terminate"])
    client = client_for(users["operator"])
    form = client.get(url).content.decode()
    assert "Type “terminate” to terminate — it cannot be undone" in form
    assert re.search(r'<input name="confirm" required', form)
    for typed, said in (("", "Terminate cannot be undone: type “terminate” to confirm."),
                        ("stop", "“stop” does not confirm Terminate")):
        refused = client.post(url, {"reason": "customer left", "confirm": typed,
                                    "seen_seq": run.last_seq})
        assert refused.status_code == 422 and said in refused.content.decode()
    run.refresh_from_db()
    assert run.status == "blocked" and not Intervention.objects.exists()
    client.post(url, {"reason": "customer left", "confirm": "terminate", "seen_seq": run.last_seq})
    run.refresh_from_db()
    assert run.status == "cancelled"


def test_bulk_confirm_lists_each_run_and_what_it_does_to_its_calls(engine, users):
    a, b, odd = blocked_run("bk"), blocked_run("bk"), unknown_run("bk-odd")
    client = client_for(users["operator"])
    ids = [str(a.pk), str(b.pk), str(odd.pk)]
    bare = client.get(reverse("console:bulk"), {"run": ids}).content.decode()
    assert bare.count('<tr data-run="') == 3 and "Choose an action to see what it does" in bare
    html = client.get(reverse("console:bulk"), {"run": ids, "verb": "retry"}).content.decode()
    for run in (a, b):
        row = re.search(rf'<tr data-run="{run.pk}">(.*?)</tr>', html, re.S).group(1)
        assert str(run.pk)[:8] in row and "pill-blocked" in row
        failed = ToolCall.objects.get(run=run, tool_call_id=run.current_tool_call)
        assert re.search(rf'data-call="{failed.tool_call_id}"><span class="mono">lookup</span> '
                         r'<span class="effect effect-read">read</span> runs again', row)
    odd_row = re.search(rf'<tr data-run="{odd.pk}" data-refused>(.*?)</tr>', html, re.S).group(1)
    assert "Refused: retry applies to" in odd_row and "pill-unknown" in odd_row
    assert "Retry step: apply to 3 runs" in html


def test_bulk_results_say_per_run_what_happened(engine, users):
    a, odd, newer = blocked_run("bk2"), unknown_run("bk2-odd"), blocked_run("bk2-newer")
    # A run whose state a newer AgentOps wrote: retry applies, then fails loading it.
    Snapshot.objects.filter(run=newer).update(schema_version=99)
    response = client_for(users["operator"]).post(reverse("console:bulk"), {
        "run": [str(a.pk), str(odd.pk), str(newer.pk)], "verb": "retry",
        "bulk_reason": "access granted"})
    html = response.content.decode()
    assert response.status_code == 200 and "1 done · 1 refused · 1 error" in html
    error = re.search(rf'<tr data-result="error" data-run="{newer.pk}">(.*?)</tr>', html,
                      re.S).group(1)
    assert "state schema 99 is newer than this code" in error and "pill-blocked" in error
    done = re.search(rf'<tr data-result="done" data-run="{a.pk}">(.*?)</tr>', html, re.S).group(1)
    assert "lookup (read): runs again" in done and "pill-queued" in done
    refused = re.search(rf'<tr data-result="refused" data-run="{odd.pk}">(.*?)</tr>', html,
                        re.S).group(1)
    assert "retry applies to" in refused and "pill-unknown" in refused


def test_bulk_terminate_needs_the_word_and_changes_nothing_without_it(engine, users):
    run = blocked_run("bk3")
    client = client_for(users["operator"])
    form = client.get(reverse("console:bulk"), {"run": [str(run.pk)], "verb": "terminate"})
    assert "Type “terminate” to terminate (it cannot be undone)" in form.content.decode()
    data = {"run": [str(run.pk)], "verb": "terminate", "bulk_reason": "cleanup"}
    refused = client.post(reverse("console:bulk"), data)
    assert refused.status_code == 422
    assert "Terminate cannot be undone: type “terminate”" in refused.content.decode()
    run.refresh_from_db()
    assert run.status == "blocked" and not Intervention.objects.exists()
    done = client.post(reverse("console:bulk"), {**data, "confirm": "terminate"})
    assert "1 done · 0 refused · 0 errors" in done.content.decode()
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert Intervention.objects.get(run=run).data["bulk"].startswith("bulk")


def test_the_next_attempt_of_a_backing_off_call_shows_on_the_run_and_in_the_queue(engine, users):
    run = backing_off(delay_s=300)
    call = ToolCall.objects.get(run=run, tool="lookup")
    client = client_for(users["viewer"])
    html = client.get(reverse("console:run", args=[run.pk])).content.decode()
    dd = re.search(r"<dd data-next-retry>(.*?)</dd>", html, re.S).group(1)
    stamp = call.not_before.strftime("%Y-%m-%d %H:%M:%S UTC")
    assert re.search(r'<span class="mono">lookup</span> attempt 2 <time datetime="[^"]+" '
                     rf'title="{stamp}">in 4m 5\ds</time>', dd)
    assert f"at {stamp} · after transient" in dd
    queue = client.get(reverse("console:queue"), {"tab": "waiting"}).content.decode()
    assert re.search(rf'data-next-try>next try <time datetime="[^"]+" title="{stamp}">'
                     r"in 4m 5\ds</time>", queue)


def test_a_step_backing_off_as_a_whole_shows_when_it_tries_again(engine, users):
    run = model_backing_off(delay_s=120)
    html = client_for(users["viewer"]).get(reverse("console:run", args=[run.pk])).content.decode()
    dd = re.search(r"<dd data-next-retry>(.*?)</dd>", html, re.S).group(1)
    stamp = run.wait_until.strftime("%Y-%m-%d %H:%M:%S UTC")
    assert re.search(r'step <span class="mono">quote</span> again <time datetime="[^"]+" '
                     rf'title="{stamp}">in 1m 5\ds</time>', dd)
    assert f"at {stamp} · backoff after rate limited" in dd


def test_a_loop_shows_the_repeated_calls_side_by_side(engine, users):
    run = looping()
    html = client_for(users["viewer"]).get(reverse("console:run", args=[run.pk])).content.decode()
    block = re.search(r'<details class="evidence" open data-evidence="loop">(.*?)</details>',
                      html, re.S).group(1)
    assert "lookup was asked for 3 times with the same arguments" in block
    assert re.findall(r"<th scope=\"col\">turn (\d+) · <time", block) == ["1", "2", "3"]
    assert block.count("&quot;item&quot;: &quot;A-7&quot;") == 3
    results = re.findall(r"<td data-result>([^<]*)</td>", block)
    assert results == ["succeeded: A-7 costs 42"] * 2 + ["not run: the loop guard stopped it"]
    digests = re.findall(r"<td class=\"mono\" data-digest>([^<]*)</td>", block)
    assert digests[0] == digests[1] != "—" and digests[2] == "—"


def test_a_stall_shows_the_rounds_that_brought_nothing_new(engine, users):
    run = stalled()
    html = client_for(users["viewer"]).get(reverse("console:run", args=[run.pk])).content.decode()
    block = re.search(r'<details class="evidence" open data-evidence="stall">(.*?)</details>',
                      html, re.S).group(1)
    rounds = re.findall(r'<tr data-round="(\d+)">.*?<td>([^<]*)</td></tr>', block, re.S)
    assert [int(t) for t, _ in rounds] == [3, 4, 5, 6, 7]
    assert rounds[-1][1] == "same facts as turn 1" and len(rounds) == 5
    assert all(v.startswith("same facts as turn 1") for _, v in rounds if v != "new facts")
    assert "poll" in block and "export-7" in block
    assert "5 of the last 5 rounds of export brought no new facts" in block


def test_a_turn_limit_shows_its_rounds_even_when_each_found_something(engine, users):
    run = out_of_turns()
    html = client_for(users["viewer"]).get(reverse("console:run", args=[run.pk])).content.decode()
    block = re.search(r'<details class="evidence" open data-evidence="turn_limit">(.*?)'
                      r"</details>", html, re.S).group(1)
    assert "survey used all its model turns; 0 of the last 3 rounds of survey brought no " \
        "new facts" in block
    assert re.findall(r'<tr data-round="(\d+)">', block) == ["1", "2", "3"]


def test_no_evidence_panel_for_other_stops(engine, users):
    run = blocked_run("plain")
    html = client_for(users["viewer"]).get(reverse("console:run", args=[run.pk])).content.decode()
    assert "data-evidence" not in html and "data-next-retry" not in html
