"""Goal-drift guard: a side model scores how well the next action serves the pinned goal.

An agent opts in with ``Agent.drift_threshold`` (DEFAULT_THRESHOLD, 0.5, is the suggested
value; None, the default, turns the guard off). The guard then scores a reply's tool calls
before any write tool runs, and also every ``drift_every``-th model turn of the run when
``drift_every`` > 0 (0, the default, means "before writes only"). The scorer is
``Agent.drift_model`` or, without one, the agent's own model.

The scorer sees the goal (in the same "## Goal ... ## Input" block as the main context) and a
"## Drift check" message naming the step and the action, and answers with text that is JSON:
``{"score": 0.2, "reason": "one line"}``. A ScriptedModel answers it with
``say(json.dumps(...))`` (see ``drift_reply``).

The score and reason go to a ``guard.drift_scored`` event and to metrics, never into the main
context. Its tokens and cost count in the run's usage (and so against its budget); it is not
counted as a model call of the agent. A scorer that fails or answers in another form does not
stop the run: the event records the error and the action goes ahead (a flaky side model must
not halt every run). Below the threshold the reply is not recorded; the run blocks as
``drift`` with the score, goal and action in the attention detail.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from agentops.llm.protocol import ModelClient, ModelError, ModelReply, Usage
from runs.engine.runtime.events import NewEvent
from runs.engine.runtime.outcomes import block
from runs.engine.runtime.session import RunSession
from runs.event_types import EventType

DEFAULT_THRESHOLD = 0.5
DRIFT_MARK = "## Drift check"
SYSTEM = (
    "You check whether an agent's next action serves the goal it was given. Answer with JSON "
    'only: {"score": <number from 0 to 1>, "reason": "<one line>"}. 1 means the action '
    "clearly serves the goal; 0 means it is unrelated to the goal or works against it."
)
_OBJECT = re.compile(r"\{.*\}", re.S)


@dataclass
class DriftScore:
    """One scoring: the score (None when the scorer failed), its reason and what it cost."""

    score: float | None
    reason: str
    tokens: int = 0
    cost_micros: int = 0
    error: str = ""


def drift_reply(score: float, reason: str) -> ModelReply:
    """Return the reply a scripted scorer gives (for tests and the demo)."""
    text = json.dumps({"score": score, "reason": reason})
    return ModelReply(text=text, usage=Usage(40, 10), finish_reason="stop")


def drift_due(agent: Any, turn: int, planned: list[Any]) -> bool:
    """Return True when the guard scores this reply's calls."""
    if agent.drift_threshold is None or not planned:
        return False
    if any(p.spec is not None and p.spec.is_write and not p.error for p in planned):
        return True
    return bool(agent.drift_every) and turn % agent.drift_every == 0


def action_text(planned: list[Any]) -> str:
    """Return the calls as one line (sensitive arguments redacted)."""
    parts = []
    for p in planned:
        args = p.event_json()["args"]
        parts.append(f"{p.name}({', '.join(f'{k}={v!r}' for k, v in sorted(args.items()))})")
    return "; ".join(parts)[:1000]


def drift_messages(state: dict[str, Any], step: str, action: str) -> list[dict[str, Any]]:
    """Return the scorer's prompt: the pinned goal and the action (nothing else)."""
    run = state["run"]
    pinned = f"## Goal\n{run.get('goal', '')}\n"
    if run.get("constraints"):
        pinned += "## Constraints\n" + "\n".join(f"- {c}" for c in run["constraints"]) + "\n"
    pinned += "## Input\n" + json.dumps(run.get("input", {}), sort_keys=True)
    title = next((s["title"] for s in state["plan"] if s["key"] == step), step)
    check = f"{DRIFT_MARK}\nStep: {step} ({title})\nAction: {action}"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": pinned},
            {"role": "user", "content": check}]


def drift_parse(text: str) -> tuple[float, str]:
    """Return (score, reason) from a scorer's text; raise ValueError saying what is wrong."""
    match = _OBJECT.search(text or "")
    if match is None:
        raise ValueError("the scorer's reply holds no JSON object")
    body = json.loads(match.group(0))
    score = body.get("score") if isinstance(body, dict) else None
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= score <= 1:
        raise ValueError(f"the scorer's score must be a number from 0 to 1, got {score!r}")
    return float(score), " ".join(str(body.get("reason", "")).split())[:200]


def drift_score(client: ModelClient, messages: list[dict[str, Any]]) -> DriftScore:
    """Ask ``client`` for a score; a failure gives a DriftScore with ``error`` set."""
    try:
        reply = client.complete(messages=messages, tools=[], max_tokens=100)
    except ModelError as err:
        return DriftScore(None, "", error=f"scorer failed: {err.category}")
    tokens, cost = reply.usage.total_tokens, reply.usage.cost_micros
    try:
        score, reason = drift_parse(reply.text or "")
    except (ValueError, json.JSONDecodeError) as exc:
        return DriftScore(None, "", tokens, cost, error=str(exc)[:200])
    return DriftScore(score, reason, tokens, cost)


def drift_guard(session: RunSession, step: str, turn: int, planned: list[Any],
                usage: dict[str, Any]) -> bool:
    """Score the reply's calls when due; block the run and return True when it drifts."""
    agent = session.agent
    if not drift_due(agent, turn, planned):
        return False
    action = action_text(planned)
    result = drift_score(_scorer(session), drift_messages(session.state, step, action))
    threshold = agent.drift_threshold
    scored = NewEvent(EventType.GUARD_DRIFT_SCORED, {
        "step": step, "turn": turn, "score": result.score, "reason": result.reason,
        "threshold": threshold, "action": action, "error": result.error,
        "usage": {"tokens": result.tokens, "cost_micros": result.cost_micros}})
    _observe(agent.name, result)
    if result.score is None or result.score >= threshold:
        session.commit([scored])
        return False
    goal = session.state["run"].get("goal", "")
    detail = (f"drift score {result.score:.2f} is below the threshold {threshold:.2f}: "
              f"{result.reason}\nGoal: {goal}\nAction: {action}")
    unused = NewEvent(EventType.MODEL_FAILED, {"step": step, "turn": turn, "category": "drift",
                                       "message": "reply not used: it drifts from the goal",
                                       "usage": usage})
    block(session, "drift", detail, events=[scored, unused])
    return True


def _scorer(session: RunSession) -> ModelClient:
    model = session.agent.drift_model
    if model is None:
        return session.model()
    return model if hasattr(model, "complete") else model()


def _observe(agent: str, result: DriftScore) -> None:
    if _SCORES is None:
        return
    _metrics.observe_model_usage(agent, result.tokens, result.cost_micros)
    if result.score is not None:
        _SCORES.labels(agent=agent).observe(result.score)


try:  # metrics are optional: the engine runs without the observability package
    from prometheus_client import Histogram

    from agentops.observability import metrics as _metrics

    _SCORES: Any = Histogram(
        "agentops_drift_score", "Goal-drift scores of agents' next actions (0..1).", ["agent"],
        buckets=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0), registry=_metrics.REGISTRY)
except ImportError:
    _SCORES = None
