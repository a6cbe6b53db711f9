"""The project's models in Django admin: visible to superusers, read-only for the log and ledger."""
from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from approvals.apikeys import apikey_create
from approvals.models import ApiKey
from runs.models import Event
from tests.factories import make_run

pytestmark = pytest.mark.django_db

PAGES = ["runs/run", "runs/step", "runs/event", "runs/snapshot", "runs/signal",
         "runs/budgetpolicy", "runs/workerheartbeat", "ledger/toolcall", "ledger/toolattempt",
         "ledger/artifact", "ledger/toollimit", "approvals/approval", "approvals/intervention",
         "approvals/apikey", "approvals/notifyrule", "approvals/delivery"]


@pytest.fixture
def root(client):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-root-123")
    client.force_login(user)
    return client


def test_every_project_model_is_listed(root):
    index = root.get("/admin/").content.decode()
    for page in PAGES:
        assert f"/admin/{page}/" in index, page
        assert root.get(f"/admin/{page}/").status_code == 200, page


def test_the_event_log_cannot_be_added_changed_or_deleted(root):
    run = make_run()
    event = Event.objects.get(run=run)
    page = root.get(f"/admin/runs/event/{event.pk}/change/")
    assert page.status_code == 200 and b'name="_save"' not in page.content
    before = event.data
    assert root.post(f"/admin/runs/event/{event.pk}/change/", {"type": "forged"}).status_code == 403
    assert root.post(f"/admin/runs/event/{event.pk}/delete/", {"post": "yes"}).status_code == 403
    assert root.get("/admin/ledger/toolcall/add/").status_code == 403
    event.refresh_from_db()
    assert event.type == "run.created" and event.data == before


def test_api_keys_show_no_hash_and_can_be_revoked(root):
    owner = get_user_model().objects.create_user("bot")
    owner.groups.add(Group.objects.get(name="viewers"))
    key, raw = apikey_create(user=owner, name="ci")
    page = root.get(f"/admin/approvals/apikey/{key.pk}/change/").content.decode()
    assert key.key_hash not in page and raw not in page
    done = root.post("/admin/approvals/apikey/", {"action": "revoke", "_selected_action": [key.pk]})
    assert done.status_code == 302
    assert ApiKey.objects.get(pk=key.pk).revoked_at is not None


def test_staff_without_superuser_sees_nothing(client):
    staff = get_user_model().objects.create_user("staff", password="pw-staff-123", is_staff=True)
    client.force_login(staff)
    assert client.get("/admin/runs/event/").status_code == 403
