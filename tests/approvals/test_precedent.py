"""Beside the recommendation: what operators chose the last times a run stopped like this.

Runs blocked alike are produced through the engine (a carrier whose real loopback HTTP API
refuses our key with 401); operators press different actions through the console's POST;
the runs go on to their end; a new run blocked the same way shows the counts on its page and
in the API. A run blocked another way (404) is not counted with them.
"""
from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from approvals.models import Intervention
from tests.approvals.test_failure_meaning import CARRIER, _answer, _run
from tests.conftest import drive
from tests.console_factories import client_for, make_role_users
from tests.llm.fakes import fake_provider

pytestmark = pytest.mark.django_db


def _press(run, user, verb: str) -> None:
    run.refresh_from_db()
    answer = client_for(user).post(reverse("console:run_action", args=[run.pk, verb]),
                                   {"reason": "carrier key rotated", "seen_seq": run.last_seq,
                                    "confirm": "TERMINATE"})
    assert answer.status_code in (200, 204, 302), answer.content.decode()[:300]
    drive(run)
    run.refresh_from_db()


def test_a_new_blocked_run_shows_what_operators_chose_before_and_how_it_ended(engine):
    operator = make_role_users()["operator"]
    with fake_provider() as fake:
        CARRIER.update({"url": fake.base_url, "raise": None})
        fake.push(*[_answer(401, {"error": "invalid api key"}) for _ in range(4)])
        earlier = [_run(n) for n in range(4)]
        assert [r.status for r in earlier] == ["blocked"] * 4
        fake.push(*[_answer(200, {"label_id": f"L-{n}"}) for n in range(3)])
        for run in earlier[:3]:  # key fixed: retried, the call now succeeds
            _press(run, operator, "retry")
        _press(earlier[3], operator, "terminate")
        assert [r.status for r in earlier] == ["succeeded"] * 3 + ["cancelled"]
        fake.push(_answer(401, {"error": "invalid api key"}), _answer(404, {"error": "no"}))
        new = _run(7)
        other = _run(8)  # same tool, another meaning: no precedent of its own
    assert set(Intervention.objects.filter(run__in=earlier).values_list("signature", flat=True)
               ) == {"credentials:create_label"}
    api = client_for(operator).get(f"/api/runs/{new.pk}").json()
    got = api["precedent"]
    assert (got["signature"], got["runs"]) == ("credentials:create_label", 4)
    assert [(c["verb"], c["runs"], c["finished"]) for c in got["choices"]] == [
        ("retry", 3, 3), ("terminate", 1, 0)]
    assert got["text"] == ("Of the last 4 runs stopped like this, retry was pressed on 3 "
                           "(3 then finished), terminate on 1 (0 then finished)")
    page = client_for(operator).get(reverse("console:run", args=[new.pk])).content.decode()
    assert 'data-precedent="4"' in page and "retry was pressed on 3 (3 then finished)" in page
    assert client_for(operator).get(f"/api/runs/{other.pk}").json()["precedent"] is None
    assert client_for(operator).get(f"/api/runs/{earlier[0].pk}").json()["precedent"] is None


def test_the_precedent_query_reads_the_signature_index(engine):
    """The selector is one bounded query on (signature, at), not a scan of the audit table."""
    from approvals.recommend.precedent import LAST

    rows = Intervention.objects.filter(signature="credentials:x").order_by("-at", "-id")[:LAST]
    with CaptureQueriesContext(connection) as seen:
        list(rows.values_list("run_id", "action", "run__status"))
    sql = seen.captured_queries[0]["sql"]
    assert f"LIMIT {LAST}" in sql
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("SET enable_seqscan = off")  # an empty table would otherwise scan
            cur.execute("EXPLAIN " + str(rows.values_list("run_id").query).replace(
                "= credentials:x", "= 'credentials:x'"))
            plan = "\n".join(r[0] for r in cur.fetchall())
        assert "intervention_signature" in plan, plan
