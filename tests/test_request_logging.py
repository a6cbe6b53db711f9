"""A request error is one log line, printed once; only a 5xx carries its traceback.

Logging is configured the way ``django.setup()`` does it (``configure_logging`` with the
project's LOGGING) into a captured stderr, then real requests go through the test client.
"""
from __future__ import annotations

import io
import sys

import pytest
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.urls import path
from django.utils.log import configure_logging

from agentops.urls import urlpatterns as project_urls


def _boom(request):
    raise RuntimeError("kaboom in a view")


urlpatterns = [*project_urls, path("boom-for-logging-test", _boom)]


@pytest.fixture
def stderr_log(monkeypatch):
    """Configure logging as django.setup() does, into a buffer; restore the real one after."""
    buffer = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buffer)
    configure_logging(settings.LOGGING_CONFIG, settings.LOGGING)
    yield buffer
    monkeypatch.undo()
    configure_logging(settings.LOGGING_CONFIG, settings.LOGGING)


@pytest.fixture
def viewer_client(client, db):
    user = User.objects.create_user("logviewer", password="pw-logviewer-1")
    user.groups.add(Group.objects.get_or_create(name="viewer")[0])
    client.force_login(user)
    return client


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.urls("tests.test_request_logging")
def test_403_and_404_are_one_line_each_and_500_keeps_its_traceback(
        viewer_client, stderr_log, settings, debug):
    settings.DEBUG = debug  # Django's own DEBUG-only console handler doubled every line
    viewer_client.raise_request_exception = False

    assert viewer_client.get("/settings/").status_code == 403
    forbidden = stderr_log.getvalue().splitlines()
    assert len(forbidden) == 1, forbidden
    assert "Forbidden" in forbidden[0] and "/settings/" in forbidden[0]

    assert viewer_client.get("/no-such-page/").status_code == 404
    lines = stderr_log.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert "Not Found: /no-such-page/" in lines[1]

    assert viewer_client.get("/boom-for-logging-test").status_code == 500
    rest = stderr_log.getvalue().splitlines()[2:]
    assert "Internal Server Error: /boom-for-logging-test" in rest[0]
    assert any("Traceback" in line for line in rest)
    assert sum("Internal Server Error" in line for line in rest) == 1
