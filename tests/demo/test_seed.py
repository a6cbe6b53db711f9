"""The demo seed: a user per role and runs that end in every attention state, idempotently."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from agentops.demo import seed, world
from agentops.demo.models import WorldEffect
from runs.models import Run

pytestmark = pytest.mark.django_db
EVERY_STATE = {"succeeded", "cancelled", "unknown", "waiting:approval", "waiting:timer",
               "blocked:permanent_error", "blocked:budget_exhausted", "blocked:loop_detected"}


def test_seed_ends_each_scenario_in_its_state(demo):
    logins, runs = seed.demo_seed()
    states = {name: seed.run_state(run) for name, run in runs.items()}
    assert states == {sc.name: "queued" if sc.live else sc.expect for sc in seed.SCENARIOS}
    assert EVERY_STATE <= set(states.values())
    assert world.effects_duplicated() == []
    for username, password, role in logins:
        user = User.objects.get(username=username)
        assert user.check_password(password) and user.groups.filter(name=role).exists()


def test_seeding_twice_starts_nothing_new_and_repeats_no_effect(demo):
    seed.demo_seed()
    runs, effects = Run.objects.count(), WorldEffect.objects.count()
    seed.demo_seed()
    assert (Run.objects.count(), WorldEffect.objects.count()) == (runs, effects)
