"""What ``agentops doctor`` says about the read replica: reachable, replaying, how far
behind, and whether a failover to it could lose the primary's last commits."""
from __future__ import annotations

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from agentops.db_budget import web_replica_sessions_max
from agentops.replica.probe import replica_status
from agentops.replica.router import REPLICA, replica_configured

NAME = "replica"
SESSIONS = "replica_sessions"
# Sessions of clients on the standby (its startup and WAL receiver processes are not).
_SESSIONS_SQL = ("SELECT current_setting('max_connections')::int, count(*) "
                 "FROM pg_stat_activity WHERE backend_type = 'client backend'")


def replica_report() -> tuple[str, bool, str]:
    """Return (check name, ok, a sentence for a person) about AGENTOPS_REPLICA_URL."""
    if not replica_configured():
        return NAME, True, "AGENTOPS_REPLICA_URL is not set: every page reads the primary."
    status = replica_status(fresh=True)
    if status is None:
        return NAME, False, ("AGENTOPS_REPLICA_URL is set but the replica does not answer or "
                             "is not a standby replaying WAL: pages read the primary meanwhile.")
    try:
        with connections[DEFAULT_DB_ALIAS].cursor() as cur:
            cur.execute("SELECT current_setting('synchronous_standby_names'), "
                        "current_setting('synchronous_commit')")
            names, commit = cur.fetchone()
    except DatabaseError as exc:
        return NAME, False, f"Cannot read the primary's replication settings: {exc}"
    behind = f"The replica answers, {status.lag_s:.1f}s behind."
    if not names or commit in ("off", "local"):
        return NAME, True, (f"{behind} Replication is asynchronous: a failover may lose the "
                            "last commits (set synchronous_standby_names, docs/deploy.md).")
    return NAME, True, f"{behind} Commits wait for {names} (synchronous_commit={commit})."


def replica_sessions_report() -> tuple[str, bool, str]:
    """Return (check name, ok, a sentence) about the standby's sessions: the web processes'
    maximum and those open now, against the standby's own max_connections."""
    if not replica_configured():
        return SESSIONS, True, "No replica: no process holds a session on a standby."
    try:
        with connections[REPLICA].cursor() as cur:
            cur.execute(_SESSIONS_SQL)
            limit, now = cur.fetchone()
    except DatabaseError as exc:
        return SESSIONS, False, f"Cannot read the replica's max_connections: {exc}"
    need = int(settings.AGENTOPS_WEB_PROCESSES) * web_replica_sessions_max()
    reserve = int(settings.AGENTOPS_DB_RESERVE)
    sums = (f"on the replica: {settings.AGENTOPS_WEB_PROCESSES} web process(es) x "
            f"{web_replica_sessions_max()} = {need} sessions at most, {now} open now; its "
            f"max_connections {limit} minus the reserve of {reserve} leaves {limit - reserve}")
    if need > limit - reserve:
        return SESSIONS, False, (f"{sums}: raise the replica's max_connections, or lower "
                                 "AGENTOPS_WEB_DB_POOL_MAX (docs/deploy.md, \"Read replica\").")
    return SESSIONS, True, f"{sums}."
