"""The migration to scoped keys and numbered audit rows, run on data made before it."""
from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("approvals", "0007_team_owns_notify_rules"), ("runs", "0016_team")]
AFTER = [("approvals", "0010_apikey_team_required")]


@pytest.mark.django_db(transaction=True)
def test_existing_keys_land_in_the_default_team_with_the_owners_role_and_rows_get_numbers():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    try:
        _check_the_migration(executor)
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())  # later tests need the latest


def _check_the_migration(executor: MigrationExecutor) -> None:
    old = executor.loader.project_state(BEFORE).apps
    User, Group = old.get_model("auth", "User"), old.get_model("auth", "Group")
    ApiKey, Run = old.get_model("approvals", "ApiKey"), old.get_model("runs", "Run")
    Intervention = old.get_model("approvals", "Intervention")
    ops = User.objects.create(username="olga")
    ops.groups.add(Group.objects.get_or_create(name="operators")[0])
    nobody = User.objects.create(username="nobody")
    ApiKey.objects.create(user=ops, name="ci", prefix="ao_1", key_hash="a" * 64)
    ApiKey.objects.create(user=nobody, name="old", prefix="ao_2", key_hash="b" * 64)
    run = Run.objects.create(agent_name="a", agent_version="1", goal="g")
    first = Intervention.objects.create(run=run, actor_name="olga", action="run.retry")
    second = Intervention.objects.create(actor_name="root", action="team.membership",
                                         data={"team": "default"})
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps
    keys = {k.name: k for k in new.get_model("approvals", "ApiKey").objects.select_related("team")}
    assert (keys["ci"].team.slug, keys["ci"].role) == ("default", "operators")
    assert (keys["old"].team.slug, keys["old"].role) == ("default", "viewers")
    rows = new.get_model("approvals", "Intervention").objects.order_by("id")
    assert [(r.seq, r.team.slug) for r in rows] == [(first.pk, "default"),
                                                    (second.pk, "default")]
    assert new.get_model("approvals", "AuditSequence").objects.get().last_seq == second.pk
