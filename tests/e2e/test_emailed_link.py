"""Issue 33 item 6 in a real browser: the approval email read from a real SMTP server carries
a link; Chromium opens it, the person presses Approve, and the decision lands on the run.
"""
from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group

from approvals.models import Approval, Intervention, NotifyRule
from approvals.notify.sender import deliveries_send
from approvals.roles import SUPPORT
from tests.approvals.conftest import approval_run
from tests.console_factories import make_user
from tests.e2e.conftest import shot
from tests.notify_servers import smtp_running

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True, serialized_rollback=True)]


def test_the_emailed_approve_link_decides_the_approval_in_the_browser(browser, live_server,
                                                                     engine, settings):
    with smtp_running() as (box, port):
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
        settings.AGENTOPS_NOTIFY_CHANNELS = {"mail": {"kind": "email", "url": "", "secret": ""}}
        settings.AGENTOPS_SITE_URL = live_server.url
        payments = Group.objects.create(name="payments")
        ann = make_user("ann", SUPPORT)
        ann.email = "ann@example.com"
        ann.save(update_fields=["email"])
        ann.groups.add(payments)
        NotifyRule.objects.create(name="pay", subject="approval", group=payments, channel="mail")
        run = approval_run()
        deliveries_send()
        (mail,) = box.messages
    assert mail["To"] == "ann@example.com"
    text = mail.get_body(preferencelist=("plain",)).get_content()
    found = re.search(r"^Approve: (\S+)\s*$", text, re.M)
    assert found, text
    approve_url = found.group(1)
    assert approve_url.startswith(f"{live_server.url}/decide/")
    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    try:
        page.goto(approve_url)
        args = page.locator("[data-args]").inner_text()
        assert '"amount": 5' in args and '"to": "bob"' in args
        assert Approval.objects.get(run=run).status == "pending"  # opening decides nothing
        page.fill("input[name=confirm]", "5")  # an irreversible payment: type the amount
        page.get_by_role("button", name="Approve pay").click()
        page.locator("[data-done]").wait_for()
        assert "pay: approved by ann" in page.locator("[data-done]").inner_text()
        shot(page, "emailed_link_approved")
    finally:
        page.context.close()
    a = Approval.objects.get(run=run)
    assert a.status == "approved" and a.decided_by == ann
    run.refresh_from_db()
    assert run.status == "queued"
    assert Intervention.objects.get(action="approval.approve").data["channel"] == "email_link"
