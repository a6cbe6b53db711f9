"""The Grafana dashboard (agentops/observability/grafana_dashboard.json) reads only real series.

Every metric name in every panel's PromQL must be a series this deployment's ``/metrics``
really exposes (a counter's ``_total``, a histogram's ``_bucket``/``_sum``/``_count``), and
every one is documented in docs/observability.md; the dashboard imports into Grafana (a
Prometheus data source input, unique panel ids, each panel with a query).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "agentops" / "observability" / "grafana_dashboard.json"
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"),
             "gauge": ("",), "summary": ("", "_sum", "_count")}

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.health_urls")]


def _exposed(client) -> set[str]:
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 200
    names = set()
    for family in text_string_to_metric_families(response.content.decode()):
        names.update(family.name + s for s in _SUFFIXES.get(family.type, ("",)))
    return names


def _queries() -> list[tuple[str, str]]:
    board = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["expr"]) for p in board["panels"] for t in p["targets"]]


def _referenced(expr: str) -> set[str]:
    return set(re.findall(r"\bagentops_[a-z_]+\b", expr))


def test_every_metric_the_dashboard_reads_is_exposed_and_documented(client):
    exposed = _exposed(client)
    doc = (ROOT / "docs" / "observability.md").read_text()
    missing, undocumented = [], []
    for title, expr in _queries():
        assert _referenced(expr), f"panel {title!r} reads no AgentOps metric: {expr}"
        missing += [(title, m) for m in _referenced(expr) if m not in exposed]
        undocumented += [(title, m) for m in _referenced(expr)
                         if re.sub(r"_(total|bucket|sum|count)$", "", m) not in doc]
    assert not missing, f"the dashboard reads series /metrics does not expose: {missing}"
    assert not undocumented, f"docs/observability.md does not list: {undocumented}"


def test_the_dashboard_imports_into_grafana():
    board = json.loads(DASHBOARD.read_text())
    assert [i["name"] for i in board["__inputs"]] == ["DS_PROMETHEUS"]
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids)) and board["uid"] and board["title"]
    for p in board["panels"]:
        assert p["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
        assert p["targets"] and {"x", "y", "w", "h"} <= set(p["gridPos"])


def test_a_misspelt_metric_would_be_caught(client):
    assert "agentops_tool_call_total" not in _exposed(client)  # the real one is ..._calls_total
    assert "agentops_tool_calls_total" in _exposed(client)
