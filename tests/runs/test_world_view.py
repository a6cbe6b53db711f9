"""The demo world page and the run page's side-effects card: lists, pages, filters, escaping."""
from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agentops.demo.models import WorldEffect
from agentops.demo.world import effect_record
from approvals.roles import OPERATOR
from approvals.users import membership_set
from runs.models import Team
from tests.console_factories import client_for, make_user
from tests.factories import make_run

pytestmark = pytest.mark.django_db
XSS = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"




def ids_on(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'<td class="num mono small">(\d+)</td>', html)]


def test_world_page_lists_effects_newest_first_with_run_links(users):
    run = make_run(goal="Refund order A-1001")
    refund, _ = effect_record(kind="refund", key="k" * 64, run_id=str(run.pk),
                              data={"order": "A-1001", "amount": 45}, idempotent=True)
    email, _ = effect_record(kind="email", key="mail-1", run_id=str(run.pk),
                             data={"to": "a1001@example.com"}, idempotent=False)
    outage, _ = effect_record(kind="model.outage", key="demo#1", run_id="", data={},
                              idempotent=True)
    response = client_for(users["viewer"]).get(reverse("console:world"))
    html = response.content.decode()
    assert response.status_code == 200
    assert ids_on(html) == [outage.pk, email.pk, refund.pk]
    assert html.count(f'<a href="{reverse("console:run", args=[run.pk])}"') == 2
    assert "k" * 64 not in html.replace(f'title="{"k" * 64}"', "")  # shortened, full in title
    assert "a1001@example.com" in html
    assert re.search(r'href="/world/"\s+aria-current="page"', html)


def test_world_page_pages_by_id_and_filters_by_run(users):
    one, two = make_run(), make_run()
    WorldEffect.objects.bulk_create(
        [WorldEffect(kind="email", key=f"m{i}", run_id=str(one.pk)) for i in range(103)]
        + [WorldEffect(kind="refund", key="r", run_id=str(two.pk), idempotent=True)])
    client = client_for(users["viewer"])
    first = ids_on(client.get(reverse("console:world")).content.decode())
    assert len(first) == 100 and first == sorted(first, reverse=True)
    older = client.get(reverse("console:world"), {"before": first[-1]}).content.decode()
    assert ids_on(older) == [first[-1] - i for i in (1, 2, 3, 4)] and "Older →" not in older
    only_two = client.get(reverse("console:world"), {"run": str(two.pk)}).content.decode()
    assert len(ids_on(only_two)) == 1 and "refund" in only_two
    by_prefix = client.get(reverse("console:world"), {"run": str(two.pk)[:8]}).content.decode()
    assert ids_on(by_prefix) == ids_on(only_two)
    none = client.get(reverse("console:world"), {"run": "no-such-run"}).content.decode()
    assert ids_on(none) == [] and "No side effects for this run." in none


def test_world_page_refuses_a_user_without_a_role(users):
    assert client_for(users["nobody"]).get(reverse("console:world")).status_code == 403
    anonymous = Client().get(reverse("console:world"))
    assert anonymous.status_code == 302 and anonymous.url.startswith(reverse("console:login"))


def test_untrusted_effect_text_is_escaped_and_pages_carry_no_inline_code(users):
    run = make_run()
    effect_record(kind=f"kind {XSS}", key=f"key {XSS}", run_id=str(run.pk),
                  data={"body": XSS}, idempotent=False)
    effect_record(kind="note", key="n", run_id=XSS, data={}, idempotent=False)
    client = client_for(users["viewer"])
    for url in (reverse("console:world"), reverse("console:run", args=[run.pk])):
        html = client.get(url).content.decode()
        assert XSS not in html, url
        assert ESCAPED in html, url
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), url
        assert not re.search(r"\s(on[a-z]+|style)\s*=", html), url


def test_run_page_card_lists_only_this_runs_effects(users):
    run, other = make_run(), make_run()
    effect_record(kind="refund", key="rk-1", run_id=str(run.pk), data={"amount": 45},
                  idempotent=True)
    effect_record(kind="email", key="other-1", run_id=str(other.pk), data={}, idempotent=False)
    client = client_for(users["viewer"])
    with CaptureQueriesContext(connection) as queries:
        html = client.get(reverse("console:run", args=[run.pk])).content.decode()
    assert sum("demo_worldeffect" in q["sql"] for q in queries.captured_queries) == 1
    card = html.split('id="world-effects"', 1)[1].split("</section>", 1)[0]
    assert "Side effects in the demo world" in html
    assert "refund" in card and "rk-1" in card and "email" not in card
    quiet = client.get(reverse("console:run", args=[other.pk])).content.decode()
    assert "This run caused no side effects" not in quiet
    empty = client.get(reverse("console:run", args=[make_run().pk])).content.decode()
    assert "This run caused no side effects in the demo world." in empty


def test_world_page_says_whether_a_side_effect_happened_twice(users):
    viewer = client_for(users["viewer"])
    effect_record(kind="email", key="mail-1", run_id="", data={}, idempotent=False)
    assert "Nothing happened twice." in viewer.get(reverse("console:world")).content.decode()
    effect_record(kind="email", key="mail-1", run_id="", data={}, idempotent=False)
    html = viewer.get(reverse("console:world")).content.decode()
    assert "Nothing happened twice." not in html
    assert re.search(r"Happened twice:.*email mail-1</span> ×2", html, re.S)


def test_a_team_member_sees_their_teams_effects_behind_a_full_page_of_other_teams(users):
    ours, theirs = Team.objects.create(slug="ours"), Team.objects.create(slug="theirs")
    mine, other = make_run(team=ours), make_run(team=theirs)
    WorldEffect.objects.create(kind="refund", key="ours-1", run_id=str(mine.pk), idempotent=True)
    WorldEffect.objects.bulk_create(  # a full page of newer effects of another team's run
        [WorldEffect(kind="email", key=f"t{i}", run_id=str(other.pk)) for i in range(101)])
    member = make_user("member")
    membership_set(user=member, team=ours, role=OPERATOR)
    html = client_for(member).get(reverse("console:world")).content.decode()
    assert "ours-1" in html and "t100" not in html and len(ids_on(html)) == 1
    assert "Older →" not in html


def test_another_teams_effect_that_happened_twice_is_not_named_to_a_team_member(users):
    ours, theirs = Team.objects.create(slug="ours"), Team.objects.create(slug="theirs")
    other = make_run(team=theirs)
    for _ in range(2):  # the other team's email went out twice
        WorldEffect.objects.create(kind="email", key="theirs-secret-mail", run_id=str(other.pk))
    member = make_user("member")
    membership_set(user=member, team=ours, role=OPERATOR)
    html = client_for(member).get(reverse("console:world")).content.decode()
    assert "theirs-secret-mail" not in html and "Nothing happened twice." in html
    everyone = client_for(users["admin"]).get(reverse("console:world")).content.decode()
    assert "Happened twice:" in everyone and "theirs-secret-mail" in everyone
