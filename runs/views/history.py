"""A run's full history: every event, a page at a time by seq, searchable, each one
expandable to its raw JSON (as stored: secrets were redacted before they were written), and
why any one of them happened (``why=<seq>``: its chain of causes back to the root)."""
from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from runs.causation import CauseChain, event_cause_chain
from runs.errors import EventNotFound, RunNotFound
from runs.event_types import EventType
from runs.scope import visible_teams
from runs.selectors_lists import event_history, run_get
from runs.views._common import int_or_none, page, role_required

MAX_TEXT = 200


def _params(request: HttpRequest) -> tuple[dict[str, str], list[str]]:
    """Return the history filters in the URL and a sentence for each bad one (then ignored)."""
    get, errors = request.GET, []
    params = {"type": get.get("type", "").strip(), "q": get.get("q", "").strip()[:MAX_TEXT],
              "order": "newest" if get.get("order") == "newest" else ""}
    if params["type"] and params["type"] not in EventType.values:
        errors.append(f"“{params['type'][:40]}” is not an event type; showing every type")
        params["type"] = ""
    return params, errors


def _why(request: HttpRequest, run: Any, errors: list[str]) -> CauseChain | None:
    """Return the cause chain the URL asks for (``why=<seq>``), or None."""
    asked = request.GET.get("why", "")
    if not asked:
        return None
    seq = int_or_none(asked)
    if seq is None or seq < 1:
        errors.append(f"“{asked[:20]}” is not an event number; no cause chain shown")
        return None
    try:
        return event_cause_chain(run=run, seq=seq)
    except EventNotFound:
        errors.append(f"the run has no event #{seq}; no cause chain shown")
        return None


@require_GET
@role_required()
def run_history(request: HttpRequest, run_id: Any) -> HttpResponse:
    """Show one page of a run's events, oldest first (or newest first), filtered."""
    try:
        run = run_get(run_id=run_id, teams=visible_teams(request.user))
    except RunNotFound as exc:
        raise Http404(exc.message) from exc
    params, errors = _params(request)
    after = request.GET.get("after", "")
    after_seq = int_or_none(after)
    if after and after_seq is None:
        errors.append("the page cursor is not a sequence number; showing the first page")
    events = event_history(run=run, type=params["type"], text=params["q"],
                           after_seq=after_seq, newest_first=params["order"] == "newest")
    context = {"run": run, "events": events, "params": params, "errors": errors,
               "why": _why(request, run, errors),
               "event_types": EventType.values,
               "filter_params": {k: v for k, v in params.items() if v}}
    return page(request, "runs/history.html", context, team=run.team_id)
