"""Read pages from the replica, writes and everything else from the primary.

A GET or HEAD of one of ``READ_VIEWS`` reads the replica (agentops.replica.router) when it
answers and has replayed this person's last write; any other request reads the primary.
After a person's unsafe request (a POST that may have committed) the primary's WAL position
is kept in their session: their next list reads the primary until the replica has replayed
that far, so they see their own action at once (read-your-writes). API callers with a key
keep no session: their reads stay on the primary. A page whose replica query fails is
served again from the primary (logged), never as an error page.
"""
from __future__ import annotations

from collections.abc import Callable

from django.db import DatabaseError, connections
from django.http import HttpRequest, HttpResponse
from django.urls import Resolver404, resolve

from agentops.replica.probe import primary_position, replica_down, replica_status
from agentops.replica.router import REPLICA, replica_configured, replica_reads, \
    replica_reads_active

SESSION_KEY = "agentops_replica_after"
SAFE = frozenset({"GET", "HEAD"})
# Lists, counts, search and history. Not the run page itself nor any form: a person
# deciding on an action sees the primary's state (the action re-checks it there anyway).
READ_VIEWS = frozenset({
    "console:queue", "console:inbox", "console:audit", "console:run_events",
    "console:run_history", "console:run_trace", "console:run_ledger",
    "api:list_runs", "api:list_events", "api:list_steps", "api:list_tool_calls",
    "api:list_approvals", "api:list_snapshots",
})


class ReplicaReadsMiddleware:
    """Route a read page's queries to the replica; remember a person's writes."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        """Serve ``request`` reading the replica or the primary (see the module)."""
        if not replica_configured():
            return self.get_response(request)
        if request.method not in SAFE:
            response = self.get_response(request)
            _remember_write(request)
            return response
        with replica_reads(_is_read_page(request) and _replica_has_caught_up(request)):
            return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        """Serve the page again from the primary when the replica failed under it."""
        if not (replica_reads_active() and isinstance(exception, DatabaseError)
                and connections[REPLICA].errors_occurred):
            return None
        replica_down(f"a query of {request.path} failed: {exception}")
        match = request.resolver_match
        with replica_reads(False):
            return match.func(request, *match.args, **match.kwargs)


def _is_read_page(request: HttpRequest) -> bool:
    try:
        view = resolve(request.path_info).view_name
    except Resolver404:
        return False
    return view in READ_VIEWS and (not view.startswith("api:") or _session_user(request))


def _session_user(request: HttpRequest) -> bool:
    """Return whether the request is a signed-in person's (a session), not an API key's."""
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_authenticated)


def _replica_has_caught_up(request: HttpRequest) -> bool:
    """Return whether the replica answers and has replayed this person's last write."""
    status = replica_status()
    after = int(request.session.get(SESSION_KEY, 0)) if hasattr(request, "session") else 0
    if status is not None and status.replayed < after:
        status = replica_status(fresh=True)  # the cached answer may predate the write
    return status is not None and status.replayed >= after


def _remember_write(request: HttpRequest) -> None:
    """Keep the primary's WAL position in a signed-in person's session after their write."""
    if _session_user(request) and hasattr(request, "session"):
        request.session[SESSION_KEY] = str(primary_position())
