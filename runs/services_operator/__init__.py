"""Run services for people resolving runs; the operator actions in approvals.actions call these.

Each service locks the run, checks the action applies to it, appends the events that say what
changed (runs.engine.core.reducer knows them), updates the ledger in the same transaction, and puts
the run back in the queue.
"""
from runs.services_operator.budget import run_raise_budget, run_resume
from runs.services_operator.common import actor_name, requeue, run_locked, state_projection
from runs.services_operator.finish import run_finish_partial
from runs.services_operator.fork import deployed_version_for, run_fork_deployed
from runs.services_operator.plan_edit import (
    declared_steps,
    edit_refusal,
    plan_edit_build,
    plan_remaining,
    run_edit_plan,
)
from runs.services_operator.resolve import run_confirm, run_retry, run_skip, run_terminate
from runs.services_operator.restart import restart_refusal, run_restart
from runs.services_operator.rollback import rollback_plan, run_rollback
from runs.services_operator.wake import run_wake

__all__ = ["actor_name", "declared_steps", "deployed_version_for", "edit_refusal",
           "plan_edit_build", "plan_remaining", "requeue", "restart_refusal", "rollback_plan",
           "run_confirm", "run_edit_plan", "run_finish_partial", "run_fork_deployed",
           "run_locked", "run_raise_budget", "run_restart", "run_resume", "run_retry",
           "run_rollback", "run_skip", "run_terminate", "run_wake", "state_projection"]
