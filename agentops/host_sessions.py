"""The PostgreSQL sessions a worker host holds besides its slots' pools: plain numbers.

Kept apart from agentops.db_budget (which reads the settings) so that the capacity model
(bench/capacity_model.py), pure arithmetic run without Django, counts with the same figures
``agentops doctor`` and docs/deploy.md use.
"""
from __future__ import annotations

# A worker host's own sessions besides its q2 worker processes' pools: the cluster's
# sentinel, pusher (ORM broker) and monitor, the sweeper thread, the recoverer thread
# (runs.recoverer), the notification sender thread (approvals.notify.sender) and the
# `agentops worker` main thread.
WORKER_HOST_FIXED = 7
KEEPER = 1  # the host's lease keeper process, shared by its q2 worker processes (one direct connection)
