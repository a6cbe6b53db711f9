"""Notification rules over the API (admins; refused with what exists) and the delivery log."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from approvals.models import Intervention, NotifyRule
from tests.api.conftest import assert_error


@pytest.fixture(autouse=True)
def _channels(settings):
    settings.AGENTOPS_NOTIFY_CHANNELS = {
        "mail": {"kind": "email", "url": "", "secret": ""},
        "chat": {"kind": "slack", "url": "http://127.0.0.1:9/hook", "secret": ""}}


def test_admin_creates_replaces_lists_and_deletes_a_rule_each_audited(admin):
    Group.objects.create(name="payments")
    Group.objects.create(name="managers")
    body = {"name": "payments", "subject": "approval", "tool": "pay", "group": "payments",
            "channel": "mail", "sla_s": 300, "escalate_to": "managers"}
    created = admin.post_json("/api/notify/rules", body)
    assert created.status_code == 201, created.content
    rule = created.json()
    assert rule["group"] == "payments" and rule["escalate_to"] == "managers"
    replaced = admin.put_json(f"/api/notify/rules/{rule['id']}",
                              {**body, "channel": "chat", "group": None})
    assert replaced.status_code == 200, replaced.content
    assert replaced.json()["channel"] == "chat" and replaced.json()["group"] is None
    assert [r["name"] for r in admin.get("/api/notify/rules").json()] == ["payments"]
    assert admin.delete(f"/api/notify/rules/{rule['id']}").status_code == 204
    assert not NotifyRule.objects.exists()
    assert Intervention.objects.filter(action="settings.notify_rule").count() == 3


def test_an_undeclared_channel_or_unknown_group_is_refused_naming_what_exists(admin):
    bad = admin.post_json("/api/notify/rules", {"name": "x", "channel": "pager"})
    assert_error(bad, 422)
    assert "Channel 'pager' is not declared; declared: chat, mail." in bad.content.decode()
    no_group = admin.post_json("/api/notify/rules", {"name": "x", "channel": "mail"})
    assert_error(no_group, 422)
    assert "pick a group" in no_group.content.decode()
    unknown = admin.post_json("/api/notify/rules", {"name": "x", "channel": "mail",
                                                    "group": "nobody-here"})
    assert_error(unknown, 422)
    assert "No group 'nobody-here'" in unknown.content.decode()
    assert not NotifyRule.objects.exists()


def test_only_admins_change_rules(operator, support):
    for client in (operator, support):
        r = client.post_json("/api/notify/rules", {"name": "x", "channel": "chat"})
        assert r.status_code == 403
    assert not NotifyRule.objects.exists()


def test_the_console_settings_page_saves_a_rule_and_lists_it(make_user):
    from django.test import Client

    client = Client()
    client.force_login(make_user("boss", "admins"))
    g = Group.objects.create(name="payments")
    bad = client.post("/settings/notify-rule/new/", {"name": "r", "order": 1, "channel": "pager",
                                                     "sla_s": 0})
    assert bad.status_code == 422 and "is not declared" in bad.content.decode()
    ok = client.post("/settings/notify-rule/new/", {"name": "r", "order": 1, "channel": "mail",
                                                    "group": g.pk, "sla_s": 60,
                                                    "enabled": "on"})
    assert ok.status_code == 302, ok.content.decode()[:2000]
    page = client.get("/settings/").content.decode()
    assert 'id="notify-rules"' in page and "payments" in page and "60 s" in page
    assert NotifyRule.objects.get().group == g
