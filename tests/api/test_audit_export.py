"""GET /api/audit/export: the audit trail oldest first, by cursor, as JSON lines or CSV."""
from __future__ import annotations

import csv
import io
import json
import random
import threading
import time

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection, transaction

from approvals.audit import audit_record
from approvals.users import membership_set
from runs.models import Team
from tests.api.conftest import ApiClient, assert_error
from tests.factories import make_run

URL = "/api/audit/export"


@pytest.fixture
def teams(db):
    """Two teams besides the default one."""
    return (Team.objects.create(slug="payments", name="Payments"),
            Team.objects.create(slug="desk", name="Desk"))


@pytest.fixture
def admin(make_user) -> ApiClient:
    """An installation admin signed in to the console (a key would hold one team only)."""
    return _session(make_user("admins", "admins"))


def _session(user) -> ApiClient:
    client = ApiClient(None, user)
    client.force_login(user)
    return client


def _jsonl(response) -> list[dict]:
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/x-ndjson"
    text = b"".join(response.streaming_content).decode()
    return [json.loads(line) for line in text.splitlines()]


def _walk(client: ApiClient, *, limit: int, query: str = "", after: int = 0) -> tuple[list, int]:
    """Read every page after ``after``; return the rows and the last cursor."""
    rows = []
    while True:
        response = client.get(f"{URL}?after={after}&limit={limit}{query}")
        page = _jsonl(response)
        rows += page
        after = int(response["X-Next-Cursor"])
        if response["X-More"] == "false":
            return rows, after


def test_rows_come_oldest_first_and_the_cursor_resumes_without_gaps_or_repeats(admin):
    for n in range(5):
        audit_record(actor=admin.user, action="settings.test", data={"n": n})
    rows, cursor = _walk(admin, limit=2)
    assert [r["data"]["n"] for r in rows] == [0, 1, 2, 3, 4]
    assert [r["cursor"] for r in rows] == sorted(r["cursor"] for r in rows)
    first = rows[0]
    assert set(first) == {"cursor", "id", "at", "actor", "actor_id", "action", "team",
                          "run_id", "reason", "data"}
    assert (first["actor"], first["actor_id"], first["team"]) == ("admins", admin.user.pk,
                                                                  None)
    audit_record(actor=admin.user, action="settings.test", data={"n": 5})
    more, _ = _walk(admin, limit=2, after=cursor)
    assert [r["data"]["n"] for r in more] == [5]
    # The last line's cursor resumes as well as the header does.
    again = _jsonl(admin.get(f"{URL}?after={rows[2]['cursor']}&limit=2"))
    assert [r["data"]["n"] for r in again] == [3, 4]


def test_filters_by_time_action_and_team(admin, teams):
    pay, desk = teams
    audit_record(actor=admin.user, action="settings.a", team=pay)
    make_run(goal="in desk", team=desk)
    audit_record(actor=admin.user, action="run.retry", run=make_run(team=desk))
    assert [r["action"] for r in _walk(admin, limit=10, query="&action=run.")[0]] == [
        "run.retry"]
    desk_rows = _walk(admin, limit=10, query="&team=desk")[0]
    assert [(r["action"], r["team"]) for r in desk_rows] == [("run.retry", "desk")]
    assert desk_rows[0]["run_id"] is not None
    assert _walk(admin, limit=10, query="&since=2999-01-01T00:00:00Z")[0] == []
    assert len(_walk(admin, limit=10, query="&until=2999-01-01T00:00:00Z")[0]) == 2
    assert_error(admin.get(f"{URL}?team=nope"), 422, "invalid_export_query")
    assert_error(admin.get(f"{URL}?since=2030-01-01T00:00:00Z&until=2020-01-01T00:00:00Z"),
                 422, "invalid_export_query")
    assert_error(admin.get(f"{URL}?format=xml"), 422)
    assert_error(admin.get(f"{URL}?limit=0"), 422)


def test_a_team_admin_reads_only_their_teams_rows_and_others_are_refused(make_user, teams,
                                                                        client_for):
    pay, desk = teams
    boss = make_user("boss")
    membership_set(user=boss, team=pay, role="admins")
    membership_set(user=boss, team=desk, role="operators")
    audit_record(actor=boss, action="run.retry", run=make_run(team=pay))
    audit_record(actor=boss, action="run.retry", run=make_run(team=desk))
    audit_record(actor=boss, action="settings.model_price")  # installation-wide
    client = _session(boss)
    rows = _walk(client, limit=50)[0]
    # Its own membership rows (they name team payments) and the run of payments; not desk's.
    assert {(r["action"], r["team"]) for r in rows} == {("team.membership", "payments"),
                                                        ("run.retry", "payments")}
    assert_error(client.get(f"{URL}?team=desk"), 403, "forbidden")
    for role in ("operators", "support", "viewers"):
        assert_error(client_for(role).get(URL), 403, "forbidden")
    everyone = _session(make_user("root", "admins"))
    every = {(r["action"], r["team"]) for r in _walk(everyone, limit=50)[0]}
    assert {("run.retry", "desk"), ("settings.model_price", None)} <= every


def test_a_key_exports_only_its_teams_rows_even_for_an_installation_admin(make_user, teams):
    pay, desk = teams
    root = make_user("root", "admins")
    audit_record(actor=root, action="run.retry", run=make_run(team=pay))
    audit_record(actor=root, action="run.retry", run=make_run(team=desk))
    created = _session(root).post_json("/api/keys", {"name": "siem", "team": "desk",
                                                     "role": "admins"}).json()
    rows = _walk(ApiClient(created["key"]), limit=50)[0]
    assert {r["team"] for r in rows} == {"desk"}
    assert {r["action"] for r in rows} == {"run.retry", "apikey.create"}
    viewer_key = _session(root).post_json("/api/keys", {"name": "v", "team": "desk",
                                                        "role": "viewers"}).json()
    assert_error(ApiClient(viewer_key["key"]).get(URL), 403)


def test_csv_has_a_header_escapes_and_defuses_formulas(admin):
    audit_record(actor=admin.user, action="settings.x",
                 reason='=HYPERLINK("http://evil","click"), then "more"\non a new line',
                 data={"note": "@SUM(A1)"})
    audit_record(actor=admin.user, action="settings.y", reason="+1 and -2, plain")
    response = admin.get(f"{URL}?format=csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    table = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert table[0] == ["cursor", "id", "at", "actor", "actor_id", "action", "team", "run_id",
                        "reason", "data"]
    assert table[1][8] == '\'=HYPERLINK("http://evil","click"), then "more"\non a new line'
    assert table[2][8] == "'+1 and -2, plain"
    assert json.loads(table[1][9]) == {"note": "@SUM(A1)"}  # JSON text starts with {, inert
    assert [int(r[0]) for r in table[1:]] == sorted(int(r[0]) for r in table[1:])
    assert response["X-Next-Cursor"] == table[-1][0]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_cursor_walk_while_rows_commit_out_of_order_misses_and_repeats_nothing():
    """Writers hold their transaction open a while, so ids commit out of order.

    One writer holds its row uncommitted until the reader has already read rows with higher
    ids: a cursor on the id would skip it; the export's cursor must not.
    """
    root = User.objects.create_user("root")
    # get_or_create: a transactional test before this one may have flushed the groups.
    root.groups.add(Group.objects.get_or_create(name="admins")[0])
    client = _session(root)
    written: list[int] = []
    stop, held, release = threading.Event(), [], threading.Event()

    def write(seed: int) -> None:
        rng = random.Random(seed)
        try:
            while not stop.is_set():
                with transaction.atomic():
                    row = audit_record(actor=None, action="settings.load", data={"w": seed})
                    time.sleep(rng.uniform(0, 0.03))
                written.append(row.pk)
        finally:
            connection.close()

    def write_late() -> None:
        try:
            with transaction.atomic():
                row = audit_record(actor=None, action="settings.late")
                held.append(row.pk)
                release.wait(20)
            written.append(row.pk)
        finally:
            connection.close()

    threads = [threading.Thread(target=write_late)]
    threads[0].start()
    while not held:
        time.sleep(0.01)
    threads += [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads[1:]:
        t.start()
    seen: list[int] = []
    cursor = late = 0
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline or not release.is_set():
        page, cursor = _walk(client, limit=7, after=cursor)
        late += sum(1 for r in page if seen and r["id"] < max(seen))
        seen += [r["id"] for r in page]
        if seen and max(seen) > held[0]:
            release.set()
    stop.set()
    for t in threads:
        t.join()
    page, cursor = _walk(client, limit=7, after=cursor)
    late += sum(1 for r in page if seen and r["id"] < max(seen))
    seen += [r["id"] for r in page]
    print(f"\n{len(written)} rows written by 5 writers; {late} arrived after a higher id")
    assert len(seen) == len(set(seen)), "a row came twice"
    assert sorted(seen) == sorted(written), "a row was missed"
    assert held[0] in seen and late >= 1
