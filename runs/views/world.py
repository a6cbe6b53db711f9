"""The demo world page: every side effect the sandbox world recorded, newest first."""
from __future__ import annotations

from typing import Any

from django.apps import apps
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from runs.scope import visible_teams
from runs.selectors import Page, run_id_strings
from runs.views._common import int_or_none, page, role_required
from agentops.demo.selectors import effect_list
from agentops.demo.world import effects_duplicated

RUN_CARD_LIMIT = 20


def demo_installed() -> bool:
    """Return whether the demo app (and its WorldEffect table) is installed."""
    return apps.is_installed("agentops.demo")


def effects_for_run_card(run_id: Any) -> Page | None:
    """Return one run's newest side effects for its page (one query); None without the demo."""
    if not demo_installed():
        return None

    return effect_list(run_id=str(run_id), exact=True, limit=RUN_CARD_LIMIT)


@require_GET
@role_required()
def world_page(request: HttpRequest) -> HttpResponse:
    """List the demo world's side effects, newest first, optionally for one run."""
    if not demo_installed():
        raise Http404("The demo world is not installed.")
    run = request.GET.get("run", "").strip()[:64]
    # Only effects of runs of the user's teams, filtered before paging so a page is full.
    mine = run_id_strings(teams=visible_teams(request.user))
    rows = effect_list(run_id=run, before_id=int_or_none(request.GET.get("before")),
                       run_ids=mine)
    # The sandbox's own check that no side effect happened twice (docs/demo.md), over the
    # same runs: another team's effects are not named here, duplicated or not.
    return page(request, "demo/world.html", {"page": rows, "f": {"run": run} if run else {},
                                              "duplicated": effects_duplicated(run_ids=mine)},
                partial="rows")
