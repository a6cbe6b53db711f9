"""Issue 33 item 3 in a real browser on daphne: a decision link from a message, opened signed
out, shows the exact call, decides only on its button, refuses a second use, and the support
inbox someone else has open drops the approval by push (Redis), without a reload.
"""
from __future__ import annotations

import pytest

from approvals.links import approval_links
from approvals.models import Approval, Intervention
from approvals.roles import SUPPORT
from tests.console_factories import make_approval, make_attention_run, make_user
from tests.e2e.conftest import shot
from tests.e2e.test_a11y import axe_violations
from tests.e2e.test_live_push import _live, _signed_in, daphne  # noqa: F401 - the fixture

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True, serialized_rollback=True)]


def test_a_link_opened_signed_out_decides_once_and_the_inbox_updates_live(
        browser, daphne, settings):  # noqa: F811
    settings.AGENTOPS_SITE_URL = daphne
    ann = make_user("ann", SUPPORT)
    make_user("sam", SUPPORT)
    approval = make_approval(make_attention_run("waiting"), tool="send_email",
                             args={"to": "ceo@example.com", "subject": "Refund 7"})
    links = approval_links(approval=approval, recipient=ann)
    sam = _signed_in(browser, daphne, "sam")
    reader = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    try:
        sam.goto(f"{daphne}/approvals/")
        _live(sam)
        sam.locator(f"#approval-{approval.pk}").wait_for()
        sam.evaluate("window.__sameDocument = true")

        reader.goto(links.approve_url)  # what a mail scanner's prefetch does, too
        assert "ceo@example.com" in reader.locator("[data-args]").inner_text()
        assert "For ann" in reader.locator("p.small").first.inner_text()
        assert Approval.objects.get(pk=approval.pk).status == "pending"
        assert axe_violations(reader) == []
        shot(reader, "decision_link_page")

        reader.get_by_role("button", name="Approve send_email").click()
        reader.locator("[data-done]").wait_for()
        assert "send_email: approved by ann" in reader.locator("[data-done]").inner_text()
        sam.locator(f"#approval-{approval.pk}").wait_for(state="detached", timeout=3000)
        assert sam.evaluate("window.__sameDocument") is True  # pushed, not reloaded

        reader.goto(links.approve_url)
        assert "This link was already used on" in reader.locator("[data-refusal]").inner_text()
        row = Intervention.objects.get(action="approval.approve")
        assert row.actor_name == "ann" and row.data["channel"] == "email_link"
    finally:
        reader.context.close()
        sam.context.close()  # an open websocket would hold daphne up at its shutdown
