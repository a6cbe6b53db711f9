"""A run whose tool returns ever larger results blocks at its memory share; nothing dies.

Driven through the engine in-process (SQLite) with the process limit named by setting; the
real-worker version (PostgreSQL, the limit from RLIMIT_AS) is tests/e2e/test_memory_budget.py.
"""
from __future__ import annotations

import pytest
from django.urls import reverse

import tests.memory_agents as agents
from ledger.models import ToolCall
from runs.services import run_start
from tests.conftest import drive
from tests.console_factories import client_for, make_role_users

pytestmark = pytest.mark.django_db
LIMIT = 10 << 20  # 10 MiB: 30% is 3 MiB


def test_a_growing_result_blocks_the_run_at_its_share_saying_the_sizes(engine, settings):
    settings.AGENTOPS_MEMORY_LIMIT_BYTES = LIMIT
    run = run_start(agent="mem_grower", goal="read the reports")
    assert drive(run) == "blocked"
    assert run.attention_reason == "memory_budget"
    detail = run.attention_detail
    assert "AGENTOPS_MEMORY_SHARE 30% of this process's 10,485,760 bytes" in detail, detail
    assert "(AGENTOPS_MEMORY_LIMIT_BYTES) is 3,145,728" in detail
    assert "the result was dropped, not kept" in detail
    calls = list(ToolCall.objects.filter(run=run).order_by("created_at"))
    kept = [c.facts["kib"] for c in calls if c.status == "succeeded"]
    assert kept == agents.SIZES_KIB[:len(kept)] and kept[-1] * 1024 < 3 << 20
    refused = calls[-1]
    assert refused.status == "failed" and refused.error_class == "memory_budget"
    assert refused.args["kib"] == 2 * kept[-1]  # the first result too big for what was left
    assert not refused.artifact_sha256  # dropped, never stored
    assert run.recommended_action == "skip"

    html = client_for(make_role_users()["operator"]).get(
        reverse("console:run", args=[run.pk])).content.decode()
    assert "Memory budget reached" in html and "AGENTOPS_MEMORY_SHARE" in html


def test_the_share_is_a_setting(engine, settings):
    settings.AGENTOPS_MEMORY_LIMIT_BYTES = LIMIT
    settings.AGENTOPS_MEMORY_SHARE = 0.9
    run = run_start(agent="mem_grower", goal="read the reports")
    assert drive(run) == "blocked"
    kept = ToolCall.objects.filter(run=run, status="succeeded").order_by("-created_at").first()
    assert 3 << 20 < kept.facts["kib"] * 1024 < 9 << 20  # past 30%, within 90%


def test_a_share_outside_0_to_1_is_a_configuration_error(engine, settings):
    settings.AGENTOPS_MEMORY_SHARE = 1.5
    run = run_start(agent="mem_small", goal="read one report")
    assert drive(run) == "blocked"
    assert run.attention_reason == "config_error"
    assert "AGENTOPS_MEMORY_SHARE must be a fraction in (0, 1], not 1.5" in run.attention_detail
