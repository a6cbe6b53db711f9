"""What ``agentops doctor`` says about the read replica: reachable, replaying, how far
behind, and whether a failover to it could lose the primary's last commits."""
from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from agentops.replica.probe import replica_status
from agentops.replica.router import replica_configured

NAME = "replica"


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
