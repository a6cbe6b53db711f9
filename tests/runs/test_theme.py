"""The colour theme (issue 21): "auto" follows the browser; the toggle's choice is kept in a
cookie and set on <html data-theme> of every page, without JavaScript."""
from __future__ import annotations

import pytest
from django.urls import reverse

from agentops.theme import COOKIE
from tests.console_factories import client_for, make_attention_run

pytestmark = pytest.mark.django_db


def _toggle(html: str) -> str:
    start = html.index('action="/theme/"')
    return html[start:html.index("</form>", start)]


def test_the_toggle_steps_auto_dark_light_and_every_page_follows(users):
    run = make_attention_run()
    client = client_for(users["viewer"])
    run_url = reverse("console:run", args=[run.pk])
    html = client.get(run_url).content.decode()
    assert html.startswith('<!doctype html>\n<html lang="en">')  # auto: the browser decides
    toggle = _toggle(html)
    assert 'name="theme" value="dark"' in toggle and f'name="next" value="{run_url}"' in toggle
    assert ">Theme: auto</button>" in toggle
    response = client.post(reverse("console:theme"), {"theme": "dark", "next": run_url})
    assert response.status_code == 303 and response["Location"] == run_url
    cookie = response.cookies[COOKIE]
    assert cookie.value == "dark" and cookie["max-age"] == 365 * 24 * 3600
    assert cookie["samesite"] == "Lax" and cookie["httponly"]
    for url in (run_url, reverse("console:queue"), reverse("console:inbox"),
                reverse("console:run_history", args=[run.pk])):
        page = client.get(url).content.decode()
        assert '<html lang="en" data-theme="dark">' in page, url
    assert 'name="theme" value="light"' in _toggle(client.get(run_url).content.decode())
    client.post(reverse("console:theme"), {"theme": "light", "next": run_url})
    assert '<html lang="en" data-theme="light">' in client.get(run_url).content.decode()
    back = client.post(reverse("console:theme"), {"theme": "auto", "next": run_url})
    assert back.cookies[COOKIE].value == "" and back.cookies[COOKIE]["max-age"] == 0
    assert '<html lang="en">' in client.get(run_url).content.decode()


def test_the_toggle_refuses_other_sites_and_unknown_themes(users):
    client = client_for(users["viewer"])
    away = client.post(reverse("console:theme"), {"theme": "dark",
                                                  "next": "https://evil.example/"})
    assert away["Location"] == reverse("console:queue")
    odd = client.post(reverse("console:theme"), {"theme": "neon", "next": "/audit/"})
    assert odd["Location"] == "/audit/" and COOKIE not in odd.cookies
    client.cookies[COOKIE] = "neon"
    assert '<html lang="en">' in client.get(reverse("console:queue")).content.decode()
    assert client.get(reverse("console:theme")).status_code == 405
