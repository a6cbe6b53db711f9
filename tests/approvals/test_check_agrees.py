"""check() refuses exactly what the service refuses: for every action, in every run status.

The console hides a button when check() fails; if check() passed where the service refuses
(Resume on any blocked run, once) people press buttons that cannot work, and if it refused
where the service accepts (rollback on an unknown run, once) they cannot do what the API can.
"""
from __future__ import annotations

import pytest

from agentops.errors import AgentOpsError
from approvals.actions import RUN_ACTIONS
from approvals.errors import NotAllowed
from approvals.models import Intervention
from runs.engine.runtime.events import NewEvent, event_append
from runs.statuses import RunStatus
from tests.console_factories import make_attention_run

_PARAMS = {"rollback": {"to_seq": 1}, "rollback_terminate": {"to_seq": 1}, "raise_budget": {"tokens": 20_000},
           "edit_plan": {"steps": [{"key": "main"}]}}
_CASES = [(s, "retry_exhausted", {}) for s in RunStatus] + [
    (RunStatus.BLOCKED, "budget_exhausted", {}),  # resumable: the budget allows it again
    (RunStatus.BLOCKED, "budget_exhausted", {"tokens_used": 10_000}),  # still spent
]


def _outcome(action, user, run) -> str:
    try:
        action.execute(user, run, "agreement test", confirm=action.confirm_word,
                       **_PARAMS.get(action.verb, {}))
    except (AgentOpsError, NotAllowed) as exc:
        return getattr(exc, "message", str(exc))
    return ""


@pytest.mark.parametrize("verb", list(RUN_ACTIONS))
@pytest.mark.parametrize(("status", "reason", "fields"), _CASES,
                         ids=[f"{s}-{r}-{bool(f)}" for s, r, f in _CASES])
def test_check_refuses_exactly_what_the_service_refuses(users, verb, status, reason, fields,
                                                        settings):
    settings.AGENTOPS_ENQUEUE_TICKS = False
    action = RUN_ACTIONS[verb]
    run = make_attention_run(status, reason=reason, **fields)
    event_append(run=run, events=[NewEvent("run.note", {"text": "checkpoint"})])
    run.refresh_from_db()
    refusal = action.refusal(users["admin"], run)
    outcome = _outcome(action, users["admin"], run)
    assert outcome == refusal, f"check() said {refusal!r}, the service said {outcome!r}"
    assert Intervention.objects.filter(run=run, action=action.name).exists() is (not refusal)
