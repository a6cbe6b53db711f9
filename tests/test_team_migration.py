"""Upgrading: budget policies, tool limits, rules and saved views made before teams land in
the team ``default`` (the real migrations, run backwards and forwards on the test database)."""
from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE = [("runs", "0016_team"), ("ledger", "0007_step_cost"),
          ("approvals", "0006_membership")]
AFTER = [("runs", "0017_team_owns_budgets_and_saved_views"),
         ("ledger", "0008_team_owns_tool_limits"),
         ("approvals", "0007_team_owns_notify_rules")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


def test_rows_made_before_teams_land_in_the_default_team():
    old = _migrate(BEFORE)
    old.get_model("runs", "BudgetPolicy").objects.create(agent_name="", max_tokens=10)
    old.get_model("ledger", "ToolLimit").objects.create(tool="lookup", concurrency=2,
                                                        breaker_failures=4)
    old.get_model("approvals", "NotifyRule").objects.create(name="r", channel="hook")
    user = old.get_model("auth", "User").objects.create(username="u")
    old.get_model("runs", "SavedView").objects.create(user_id=user.pk, name="v", query="tab=all")
    try:
        new = _migrate(AFTER)
        for app, model in (("runs", "BudgetPolicy"), ("ledger", "ToolLimit"),
                           ("approvals", "NotifyRule"), ("runs", "SavedView")):
            rows = new.get_model(app, model).objects.values_list("team__slug", flat=True)
            assert list(rows) == ["default"], model
        limit = new.get_model("ledger", "ToolLimit").objects.get()
        assert (limit.concurrency, limit.breaker_failures) == (2, 4)  # the breaker state stays
    finally:
        _migrate(_leaves())


def _leaves():
    executor = MigrationExecutor(connection)
    return executor.loader.graph.leaf_nodes()
