"""STYLE rule 2: no function or method in the apps is longer than 40 lines.

Counted from its ``def`` line to its last line (docstring and comments included, decorators
not), with the standard library's ast; migrations are generated and not counted.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPS = ("agentops", "runs", "ledger", "approvals")
BUDGET = 40


def functions_over_budget(root: Path = ROOT) -> list[str]:
    """Return "path:line name (N lines)" for every function over the budget in the apps."""
    over = []
    for app in APPS:
        for path in sorted((root / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    length = node.end_lineno - node.lineno + 1
                    if length > BUDGET:
                        rel = path.relative_to(root)
                        over.append(f"{rel}:{node.lineno} {node.name} ({length} lines)")
    return over


def test_no_function_in_the_apps_is_over_40_lines():
    assert functions_over_budget() == [], "split these (STYLE.md rule 2)"


def test_the_check_sees_a_long_function(tmp_path):
    app = tmp_path / "runs"
    app.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(BUDGET - 1))
    (app / "long.py").write_text(f"def fits():\n{body}\n\n\nasync def over():\n{body}\n    x = 0\n")
    (app / "migrations").mkdir()
    (app / "migrations" / "0001.py").write_text(f"def generated():\n{body}\n    x = 0\n")
    for other in APPS[:1] + APPS[2:]:
        (tmp_path / other).mkdir()
    assert functions_over_budget(tmp_path) == [f"runs/long.py:{BUDGET + 3} over (41 lines)"]
