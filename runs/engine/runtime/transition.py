"""run_transition and step status changes: the only code that writes a status.

A status change checks the transition table, appends a ``run.status`` event with the other
events of the unit, and updates the projection, all in one transaction.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from typing import Any

from django.db import connection, transaction

from agentops import clock
from agentops.redaction import Secrets
from approvals.notify.outbox import stuck_writer
from ledger.secrets import run_secrets
from runs.engine.runtime.claim_sql import claim_one_statement
from runs.engine.runtime.events import NewEvent, _append
from runs.engine.runtime import unit_sql
from runs.errors import IllegalTransition, RunNotFound
from runs.live import live_run_changed
from runs.models import Run
from runs.pooler import owner_session_hold
from runs.statuses import ATTENTION, TERMINAL, RunStatus, run_can_move

# Moves that reach people routed to them (approvals.notify).
_NOTIFY = frozenset({RunStatus.BLOCKED, RunStatus.UNKNOWN})

_CLEAR_ATTENTION = {
    "attention_reason": "",
    "attention_detail": "",
    "attention_signature": "",
    "recommended_action": "",
    "recommendation_why": "",
    "recommended_alternatives": [],
}
_CLEAR_WAIT = {"wait_kind": "", "wait_until": None, "wait_data": {}}


def run_transition(
    run: Run,
    to: str,
    *,
    reason: str = "",
    detail: str = "",
    actor: str = "",
    events: Sequence[NewEvent] = (),
    fields: dict[str, Any] | None = None,
    expected_version: int | None = None,
    also: Iterable[Any] = (),
    secrets: Secrets | None = None,
) -> list[Any]:
    """Move ``run`` to status ``to`` with its events; raise IllegalTransition if not allowed.

    A lease holder passes ``expected_version``; anyone else gets the row locked and the
    transition checked against the status under the lock. Returns the events written (the
    ``run.status`` event last).

    A lease holder's transition is one write (events.event_append: one statement, or one
    transaction of its own) whose version check is the lock, so it opens no transaction here:
    around the one statement that would cost BEGIN, SAVEPOINT, RELEASE and COMMIT round trips.
    """
    with transaction.atomic() if expected_version is None else nullcontext():
        if expected_version is None:
            _lock(run)
            expected_version = run.version
        src = run.status
        if not run_can_move(src, to):
            raise IllegalTransition("run", src, to)
        status_event = NewEvent("run.status", {"from": src, "to": to, "reason": reason,
                                               "detail": detail}, actor=actor)
        values = {**_status_fields(run, to, reason, detail), **(fields or {})}
        values["status"] = to
        # A move into blocked/unknown owes its notices in this same commit (the outbox).
        notify = [stuck_writer(run, reason=reason, version=expected_version + 1)] * (
            to in _NOTIFY)
        return _append(run, [*events, status_event], expected_version, values,
                       [*also, *notify], secrets)


def run_claim(*, run_id: Any, owner: str, ttl_s: float) -> Run | None:
    """Take the lease of a queued run for ``owner``; return None when someone else has it."""
    # Behind a pooler the owner's own session exists before its name is on a lease (release
    # on death, runs.pooler). The clock is read once a connection is in hand: a long wait in
    # the pool's queue must not hand out a lease already that much shorter.
    owner_session_hold()
    connection.ensure_connection()
    now = clock.now()
    expires = now + dt.timedelta(seconds=ttl_s)
    if unit_sql.enabled():  # PostgreSQL, AGENTOPS_UNIT_SQL on
        one = claim_one_statement(run_id=run_id, owner=owner, now=now, expires=expires)
        if one is not None:
            run, run._claim_secrets = one  # type: ignore[attr-defined]  # see claim_secrets
            live_run_changed(run.pk, status=RunStatus.RUNNING, lease_holder=True,
                             team_id=run.team_id, before_send=unit_sql.unit_settled)
            return run
    with transaction.atomic():
        run = _claimed(run_id, owner, expires)
        if run is None:
            return None
        event = NewEvent(
            "run.status", {"from": RunStatus.QUEUED, "to": RunStatus.RUNNING, "owner": owner}
        )
        fields = {"updated_at": now} if run.started_at else {"updated_at": now, "started_at": now}
        secrets = run_secrets(run.pk)
        _append(run, [event], run.version, fields, [], secrets)
    run._claim_secrets = secrets  # type: ignore[attr-defined]  # read by claim_secrets
    return run


def claim_secrets(run: Run) -> Secrets:
    """Return the run's secrets as ``run_claim`` read them (else read them now).

    A tick scrubs its writes with the secrets read once at its claim: from then on only the
    lease holder writes the run's tool calls, so a second read would find the same ones.
    """
    secrets = getattr(run, "_claim_secrets", None)
    return run_secrets(run.pk) if secrets is None else secrets


def _claimed(run_id: Any, owner: str, expires: dt.datetime) -> Run | None:
    """Claim a queued run (conditional UPDATE) and return its row, or None when not queued.

    The conditional UPDATE is the claim: of two workers only one matches status=queued. On
    PostgreSQL it returns the row it changed (one round trip, no SELECT after it).
    """
    if connection.vendor == "postgresql":
        claimed = list(Run.objects.raw(_CLAIM_SQL, [RunStatus.RUNNING, owner, expires, run_id,
                                                    RunStatus.QUEUED]))
        return claimed[0] if claimed else None
    if not Run.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(
            status=RunStatus.RUNNING, lease_owner=owner, lease_expires_at=expires, urgent=False):
        return None
    return Run.objects.get(pk=run_id)


_CLAIM_SQL = ("UPDATE runs_run SET status = %s, lease_owner = %s, lease_expires_at = %s, "
              "urgent = false WHERE id = %s AND status = %s RETURNING *")


def run_urgent_waiting(*, other_than: Any, grace_s: float) -> Any:
    """Return the id of a recovered run queued for over ``grace_s`` (not ``other_than``), or None.

    The grace lets an idle worker take it through the queue first; after it, a busy worker
    yields its own run and takes this one (runs.tasks.tick).
    """
    cutoff = clock.now() - dt.timedelta(seconds=grace_s)
    return (Run.objects.filter(status=RunStatus.QUEUED, urgent=True, updated_at__lt=cutoff)
            .exclude(pk=other_than).order_by("updated_at").values_list("pk", flat=True).first())


def _lock(run: Run) -> None:
    locked = (
        Run.objects.select_for_update()
        .filter(pk=run.pk)
        .values("status", "version", "last_seq", "lease_owner", "cancel_requested")
        .first()
    )
    if locked is None:
        raise RunNotFound(f"run {run.pk} does not exist")
    for name, value in locked.items():
        setattr(run, name, value)


def _status_fields(run: Run, to: str, reason: str, detail: str) -> dict[str, Any]:
    now = clock.now()
    values: dict[str, Any] = {"updated_at": now}
    if to not in ATTENTION:
        values.update(_CLEAR_ATTENTION)
    if to != RunStatus.WAITING:
        values.update(_CLEAR_WAIT)
    if to in ATTENTION and to != RunStatus.WAITING:
        values["attention_reason"] = reason
        values["attention_detail"] = detail
    if to != RunStatus.RUNNING:
        values.update(lease_owner="", lease_expires_at=None)
    if to in TERMINAL:
        values["finished_at"] = now
    return values
