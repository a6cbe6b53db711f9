"""Notification tests: real SMTP and HTTP receivers on localhost, channels declared for them."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from tests.notify_servers import receiver_running, smtp_running

SECRET = "s3cret-for-the-hmac-key"


@pytest.fixture
def smtp_server():
    """A real SMTP server on localhost: (its mailbox, its port)."""
    with smtp_running() as running:
        yield running


@pytest.fixture
def receiver():
    """A real HTTP receiver on localhost."""
    with receiver_running() as running:
        yield running


@pytest.fixture
def channels(settings, smtp_server, receiver):
    """Declare an email, a chat and a webhook channel pointing at the real local servers."""
    box, port = smtp_server
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
    settings.AGENTOPS_NOTIFY_CHANNELS = {
        "mail": {"kind": "email", "url": "", "secret": ""},
        "chat": {"kind": "slack", "url": receiver.url, "secret": ""},
        "hook": {"kind": "webhook", "url": receiver.url, "secret": SECRET}}
    settings.AGENTOPS_SITE_URL = "http://console.test"
    return box, receiver


def group_with(name: str, *emails: str) -> Group:
    """A group whose members have these addresses."""
    g = Group.objects.create(name=name)
    for e in emails:
        User.objects.create(username=e.split("@")[0], email=e).groups.add(g)
    return g


