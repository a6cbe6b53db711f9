"""A lease renewal updates the run row in place (HOT) on PostgreSQL: no index holds
``lease_expires_at``, and the run table leaves room on its pages (fillfactor)."""
from __future__ import annotations

import pytest
from django.db import connection, transaction

from runs.engine.runtime.leases import lease_renew
from runs.engine.runtime.transition import run_claim
from runs.services import run_start

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

_UPDATES = ("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables "
            "WHERE relname = 'runs_run'")


def test_a_renewal_is_a_hot_update_of_the_run_row(engine):
    engine.make_agent("hot", {"s": [engine.say("ok")]}, plan=["s"])
    run = run_claim(run_id=run_start(agent="hot", goal="g").pk, owner="w:1", ttl_s=2)
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(_UPDATES)
        before = cur.fetchone() or (0, 0)
        for _ in range(3):
            assert lease_renew(run, "w:1", ttl_s=2)
        cur.execute(_UPDATES)
        updates, hot = (a - b for a, b in zip(cur.fetchone(), before, strict=True))
    assert (updates, hot) == (3, 3)


def test_the_run_table_leaves_room_for_in_place_updates():
    with connection.cursor() as cur:
        cur.execute("SELECT reloptions FROM pg_class WHERE relname = 'runs_run'")
        assert "fillfactor=80" in (cur.fetchone()[0] or [])
        cur.execute("SELECT count(*) FROM pg_indexes WHERE tablename = 'runs_run' "
                    "AND indexdef LIKE '%%lease_expires_at%%'")
        assert cur.fetchone()[0] == 0
