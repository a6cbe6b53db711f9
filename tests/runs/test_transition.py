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
    # One WITH statement: the lease, its event, the row back (runs.engine.runtime.claim_sql);
    # it was BEGIN + UPDATE ... RETURNING, the secrets read, SAVEPOINT, the unit, RELEASE,
    # COMMIT (6), and 7 with a SELECT after a plain UPDATE.
    assert claim_trips == 1
    assert move_trips == 1
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.status == RunStatus.SUCCEEDED and fresh.lease_owner == ""
    assert Event.objects.filter(run=run, type="run.status").count() == 2


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_claim_in_one_statement_writes_the_event_the_general_path_writes(run):
    """The one-statement claim leaves the run and its ``run.status`` event as the general
    path does: next seq and version, its cause the event before it, the run's month."""
    from runs.models.event import event_month

    before = Run.objects.get(pk=run.pk)
    claimed = run_claim(run_id=run.pk, owner="w1", ttl_s=30)
    fresh = Run.objects.get(pk=run.pk)
    assert (claimed.version, claimed.last_seq) == (fresh.version, fresh.last_seq) == (
        before.version + 1, before.last_seq + 1)
    assert fresh.status == RunStatus.RUNNING and fresh.lease_owner == "w1"
    assert fresh.started_at is not None and fresh.lease_expires_at > fresh.updated_at
    event = Event.objects.get(run=run, seq=fresh.last_seq)
    assert (event.type, event.data) == ("run.status", {"from": "queued", "to": "running",
                                                       "owner": "w1"})
    assert event.caused_by == f"seq:{before.last_seq}"
    assert event.run_month == event_month(fresh)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_run_with_sealed_arguments_is_claimed_with_its_secrets_read_first(run):
    """A run whose calls sealed a secret takes the general claim: the claim event is
    scrubbed with the run's own secrets (a worker named after one shows it redacted)."""
    from ledger.models import ToolCall
    from ledger.sealed import seal

    ToolCall.objects.create(tool_call_id="tc_sealed", run=run, step_key="s", turn=1,
                            tool="login", args_hash="h", idempotency_key="k",
                            sealed_args=seal({"token": "hunter22"}))
    claimed = run_claim(run_id=run.pk, owner="w-hunter22", ttl_s=30)
    assert "hunter22" in claimed._claim_secrets.values
    event = Event.objects.get(run=run, seq=claimed.last_seq)
    assert "hunter22" not in event.data["owner"]
    assert Run.objects.get(pk=run.pk).lease_owner == "w-hunter22"
