"""The queue's agent filter: the agent names with runs in the user's teams, read on PostgreSQL
by index probes (one a name and team) rather than a scan of every run."""
from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals.roles import VIEWER
from runs.models import Run, Team
from runs.models.team import default_team_id
from runs.selectors_lists import run_agent_names
from tests.console_factories import client_for, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet() -> dict[str, int]:
    """4,000 runs of three agents in the default team, and a small team with one agent."""
    small = Team.objects.create(slug="small", name="Small")
    Run.objects.bulk_create(
        [Run(agent_name=f"agent-{i % 3}", agent_version="1", goal="g") for i in range(4000)]
        + [Run(agent_name="only-small", agent_version="1", goal="g", team=small)
           for _ in range(5)], batch_size=1000)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE runs_run")
    return {"default": default_team_id(), "small": small.pk}


def test_the_names_are_those_with_runs_in_the_teams(fleet):
    assert run_agent_names(teams=None) == ["agent-0", "agent-1", "agent-2", "only-small"]
    assert run_agent_names(teams=frozenset({fleet["small"]})) == ["only-small"]
    assert run_agent_names(teams=frozenset({fleet["default"]})) == ["agent-0", "agent-1",
                                                                   "agent-2"]
    assert run_agent_names(teams=frozenset(fleet.values())) == run_agent_names(teams=None)
    assert run_agent_names(teams=frozenset()) == []


def test_the_queue_page_offers_them_in_its_agent_filter(fleet):
    page = client_for(make_user("reader", VIEWER)).get("/")
    assert page.status_code == 200
    assert b'<option value="agent-2"' in page.content


def _plan(sql: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN ANALYZE " + sql)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_postgres_reads_a_few_index_entries_a_name_not_every_run(fleet):
    if connection.vendor != "postgresql":
        pytest.skip("the loose index scan is PostgreSQL's")
    for teams, index in ((None, "run_agent_updated"), (frozenset({fleet["default"]}),
                                                       "run_team_agent")):
        with CaptureQueriesContext(connection) as seen:
            run_agent_names(teams=teams)
        (query,) = seen.captured_queries
        plan = _plan(query["sql"])
        assert "Seq Scan on runs_run" not in plan and f"using {index} on runs_run" in plan, plan
        # Each step of the plan reads a row or so (per loop), never the team's 4,000 runs.
        assert max(int(n) for n in re.findall(r"actual time=\S+ rows=(\d+)", plan)) <= 5, plan
