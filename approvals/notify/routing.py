"""Routing: which enabled rules of the run's team match an approval or a stuck run."""
from __future__ import annotations

from approvals.models import NotifyRule
from approvals.statuses import NotifySubject


def rules_matching(*, subject: str, team_id: int, agent: str, tool: str = "", risk: str = "",
                   failure_class: str = "") -> list[NotifyRule]:
    """Return the team's enabled rules for this subject whose non-blank fields all match.

    Only rules of ``team_id`` (the run's team) match: another team's rules never route it.
    ``risk`` is an approval's; ``failure_class`` a stuck run's reason. A rule that names a
    risk never matches a stuck run, and one that names a failure class never an approval.
    """
    found = []
    for rule in NotifyRule.objects.filter(team_id=team_id, enabled=True).order_by("order", "id"):
        if rule.subject and rule.subject != subject:
            continue
        wanted = {"agent": agent, "tool": tool,
                  "risk": risk if subject == NotifySubject.APPROVAL else None,
                  "failure_class": failure_class if subject == NotifySubject.STUCK else None}
        if all(not getattr(rule, f) or getattr(rule, f) == v for f, v in wanted.items()):
            found.append(rule)
    return found
