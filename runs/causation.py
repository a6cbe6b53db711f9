"""Why did this happen: an event's chain of causes back to its root (agentops.causes).

Each event names the event it followed from (``seq:N``) or a root: the run's start, an
operator's action (its Intervention row carries the same token), a recovery from a lost
worker, a signal from outside. The chain is read on demand (one query for the run's causes up
to the event, one for the events shown, one for the root's audit row), never on the hot path.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentops.causes import ACTION, RECOVERY, SIGNAL, START, cause_parse, cause_seq
from approvals.models import Intervention
from runs.errors import EventNotFound
from runs.models import Event, Run
from runs.models.event import run_events

# Shown in full up to this many links; a longer chain shows its nearest links and its root.
SHOWN = 25


@dataclass
class CauseChain:
    """An event, the events that led to it (nearest first) and the root that started them."""

    seq: int
    links: list[Event]  # the event itself first, then each cause, nearest first
    hidden: int  # links left out between the shown ones and the root's event
    root_kind: str  # start | action | recovery | signal | "" (not recorded)
    root_text: str  # the root in words: who started it, which action, which worker was lost
    root: dict[str, Any] = field(default_factory=dict)  # its details (the Intervention row)

    def as_json(self) -> dict[str, Any]:
        """Return the chain as the API shows it."""
        return {"seq": self.seq, "hidden": self.hidden, "root_kind": self.root_kind,
                "root_text": self.root_text, "root": self.root,
                "links": [{"seq": e.seq, "type": e.type, "caused_by": e.caused_by,
                           "actor": e.actor, "at": e.at} for e in self.links]}


def event_cause_chain(*, run: Run, seq: int) -> CauseChain:
    """Return why event ``seq`` of the run happened; EventNotFound (404) if there is none."""
    causes = dict(run_events(run).filter(seq__lte=seq)
                  .values_list("seq", "caused_by"))
    if seq not in causes:
        raise EventNotFound(f"run {run.pk} has no event #{seq}", seq=seq)
    path, at = [seq], seq
    while (prev := cause_seq(causes[at])) is not None and prev in causes and prev < at:
        path.append(prev)
        at = prev
    shown = path if len(path) <= SHOWN else path[:SHOWN - 1] + [path[-1]]
    rows = {e.seq: e for e in run_events(run).filter(seq__in=shown)}
    kind, text, root = _root(run.pk, causes[path[-1]])
    return CauseChain(seq=seq, links=[rows[s] for s in shown], hidden=len(path) - len(shown),
                      root_kind=kind, root_text=text, root=root)


def _root(run_id: Any, cause: str) -> tuple[str, str, dict[str, Any]]:
    kind, value = cause_parse(cause)
    if kind == START:
        return kind, f"the run was started{f' by {value}' if value else ''}", {}
    if kind == RECOVERY:
        return kind, (f"the sweeper took the run back from worker {value or '(unnamed)'}, "
                      "which stopped holding it"), {}
    if kind == SIGNAL:
        return kind, f"the signal “{value}” arrived from outside", {}
    if kind == ACTION:
        row = (Intervention.objects.filter(run_id=run_id, data__cause=value)
               .values("pk", "actor_name", "action", "reason", "at").first())
        if row is None:
            return kind, "an operator action (its audit row is gone)", {}
        why = f": “{row['reason']}”" if row["reason"] else ""
        return kind, f"{row['actor_name']} pressed {row['action']}{why}", row
    if kind:
        return kind, f"{kind} {value}".strip(), {}
    return "", "not recorded (the event was written before causes were kept)", {}
