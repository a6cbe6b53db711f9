"""run_transition: legal moves change status with an event; illegal ones change nothing."""
import pytest

from runs.engine.runtime.transition import run_claim, run_transition
from runs.errors import IllegalTransition
from runs.models import Event, Run
from runs.statuses import RUN_TRANSITIONS, RunStatus


def test_legal_transition_appends_event_and_updates_projection(run):
    run_transition(run, RunStatus.CANCELLED, reason="operator", actor="alice")
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.status == RunStatus.CANCELLED
    assert fresh.finished_at is not None
    last = Event.objects.get(run=run, seq=fresh.last_seq)
    assert (last.type, last.data["from"], last.data["to"]) == ("run.status", "queued", "cancelled")
    assert last.actor == "alice"


@pytest.mark.parametrize(
    "src,dst",
    [(s, d) for s in RunStatus for d in RunStatus if d not in RUN_TRANSITIONS[s] and s != d],
)
def test_illegal_transition_raises_and_changes_nothing(db, src, dst):
    from tests.factories import make_run

    run = make_run()
    Run.objects.filter(pk=run.pk).update(status=src, wait_kind="timer")
    run.refresh_from_db()
    before = (run.version, run.last_seq, Event.objects.filter(run=run).count())
    with pytest.raises(IllegalTransition):
        run_transition(run, dst, reason="x")
    run.refresh_from_db()
    assert run.status == src
    assert (run.version, run.last_seq, Event.objects.filter(run=run).count()) == before


def test_transition_checks_status_under_the_lock_not_a_stale_copy(run):
    stale = Run.objects.get(pk=run.pk)
    run_transition(run, RunStatus.CANCELLED, reason="first")
    with pytest.raises(IllegalTransition):
        run_transition(stale, RunStatus.RUNNING)


def test_claim_takes_a_queued_run_once(run):
    first = run_claim(run_id=run.pk, owner="w1", ttl_s=5)
    second = run_claim(run_id=run.pk, owner="w2", ttl_s=5)
    assert first is not None and first.lease_owner == "w1"
    assert second is None
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING


def test_waiting_requires_a_wait_kind_in_the_database(run):
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.filter(pk=run.pk).update(status=RunStatus.WAITING, wait_kind="")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_claim_and_a_lease_holders_transition_cost_few_round_trips(run):
    """On PostgreSQL in autocommit (a worker): the claim returns the row from its UPDATE, and
    a lease holder's transition is its one version-checked statement, no transaction around."""
    from django.db import connection

    from agentops.redaction import EMPTY
    from bench._common import RoundTrips

    connection.ensure_connection()
    trips = RoundTrips().start()
    try:
        claimed = run_claim(run_id=run.pk, owner="w1", ttl_s=30)
        claim_trips, _ = trips.take()
        run_transition(claimed, RunStatus.SUCCEEDED, expected_version=claimed.version,
                       secrets=EMPTY)
        move_trips, _ = trips.take()
    finally:
        trips.stop()
    # BEGIN + UPDATE ... RETURNING, the secrets read, SAVEPOINT, the unit, RELEASE, COMMIT
    # (with a SELECT after a plain UPDATE, and a transaction around the move, it was 7 and 5).
    assert claim_trips == 6
    assert move_trips == 1
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.status == RunStatus.SUCCEEDED and fresh.lease_owner == ""
    assert Event.objects.filter(run=run, type="run.status").count() == 2
