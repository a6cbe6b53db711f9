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
    for username, password, role, team in logins:
        user = User.objects.get(username=username)
        assert user.check_password(password)
        if team:  # a role in that one team, none across the installation
            assert not user.groups.exists()
            assert list(user.memberships.values_list("team__slug", "role")) == [(team, role)]
        else:
            assert user.groups.filter(name=role).exists()
    assert {t for *_, t in logins} == {"", "payments", "support-desk"}
    assert {run.team.slug for run in runs.values()} == {"payments", "support-desk"}
    import io

    from agentops.demo.launch import _banner

    banner = io.StringIO()
    _banner(banner, 8000, logins, runs, "timing")
    assert "role: admins in team payments only" in banner.getvalue()
    assert "role: operators in team support-desk only" in banner.getvalue()
    assert "role: viewers in every team" in banner.getvalue()


def test_seeding_twice_starts_nothing_new_and_repeats_no_effect(demo):
    seed.demo_seed()
    runs, effects = Run.objects.count(), WorldEffect.objects.count()
    seed.demo_seed()
    assert (Run.objects.count(), WorldEffect.objects.count()) == (runs, effects)


def test_a_relaunch_starts_fresh_live_runs_once_the_earlier_ones_settled(demo):
    import io

    from agentops.demo.launch import _banner
    from approvals.actions.terminate import ACTION as terminate

    _, first = seed.demo_seed()
    live = [name for name, run in first.items() if seed.is_live(run)]
    assert sorted(live) == ["document-batch", "refund-approval-late", "refund-approval-later"]
    operator = User.objects.get(username="operator")
    for name in live:  # the earlier launch's live runs are over
        terminate.execute(operator, first[name], reason="earlier demo launch",
                          confirm="terminate")
        first[name].refresh_from_db()
    settled = io.StringIO()
    _banner(settled, 8000, [], first, "timing")
    assert "Nothing is running live right now." in settled.getvalue()
    assert "Live now" not in settled.getvalue()

    _, second = seed.demo_seed()
    for name in live:
        assert second[name].pk != first[name].pk and seed.is_live(second[name])
        assert second[name].idempotency_key.startswith(f"demo:{name}:")
    relaunch = io.StringIO()
    _banner(relaunch, 8000, [], second, "timing")
    assert "Live now on the worker" in relaunch.getvalue()
    assert "document-batch" in relaunch.getvalue().split("Live now")[1]


def test_a_live_batch_child_fits_one_tick_slice(settings, monkeypatch):
    """A child longer than a slice is requeued behind every other child: they would all end
    together minutes later instead of one at a time (the slowest child reads 1.25x the pace)."""
    from agentops.demo.tools import _staggered

    monkeypatch.delenv("AGENTOPS_DEMO_PACE_S", raising=False)
    per_read = float(seed.live_input(next(sc for sc in seed.SCENARIOS if sc.name == "document-batch"))["faults"]["read_documents"][5:])
    slowest = max(float(_staggered(f"slow:{per_read}", n)[5:]) for n in (1, 2))
    assert slowest * seed.EXTRACT_PARTS == seed.demo_pace_s() * 1.25
    assert seed.demo_pace_s() * 1.25 < settings.AGENTOPS_TICK_SLICE_S - 3
