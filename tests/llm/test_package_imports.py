"""agentops.llm imports downward only: no cycle, no private name borrowed across modules."""

from __future__ import annotations

import ast
from pathlib import Path

import grimp
import pytest

import agentops.llm

PACKAGE = "agentops.llm"
CLIENTS = ("agentops.llm.openai_compat", "agentops.llm.anthropic_client")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    """The import graph of agentops, as the source stands (function-level imports included)."""
    return grimp.build_graph("agentops", cache_dir=None)


def _inside(graph: grimp.ImportGraph) -> list[tuple[str, str]]:
    """Return every (importer, imported) pair within agentops.llm."""
    return [(importer, imported)
            for importer in sorted(graph.find_descendants(PACKAGE))
            for imported in sorted(graph.find_modules_directly_imported_by(importer))
            if imported.startswith(f"{PACKAGE}.")]


def test_the_package_has_no_import_cycle(graph: grimp.ImportGraph) -> None:
    pairs = _inside(graph)
    assert pairs, "the graph saw no imports inside agentops.llm"
    cycles = [(a, b) for a, b in pairs if graph.chain_exists(importer=b, imported=a)]
    assert cycles == []


def test_only_configured_knows_the_clients(graph: grimp.ImportGraph) -> None:
    for client in CLIENTS:
        importers = {m for m in graph.find_modules_that_directly_import(client)
                     if m.startswith(PACKAGE)}
        assert importers == {"agentops.llm.configured"}, client
        assert not graph.chain_exists(importer=client, imported="agentops.llm.configured")


def test_no_module_imports_another_ones_private_names() -> None:
    borrowed = []
    for path in Path(agentops.llm.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
                borrowed += [f"{path.name}: {a.name}" for a in node.names if a.name.startswith("_")]
    assert borrowed == []
