"""The README's commands exist, and its table is the one place command times are kept.

A new user copies what the README says: every ``make X`` must be a Makefile target, every
``manage.py agentops X`` a subcommand, every repository path it names a file or folder. The
Makefile, scripts and docs point at the README's table for how long a command takes instead
of keeping their own figure, so the figures cannot disagree again.
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
# Backticked tokens that name something in the repository (not var/, ~, absolute, or URLs).
PATH = re.compile(r"`((?:\.?[\w-]+/)+[\w.-]*|[\w-]+\.(?:md|py|sh|toml|lock|txt))(?: [^`]*)?`")
DURATION = re.compile(r"\b\d+(?:\.\d+)?(?: ?[-–] ?\d+)? ?(?:min|mins|minutes)\b|"
                      r"\b(?:a|one|two|three|few) minutes?\b", re.I)
# Figures that are settings, not how long a command takes.
NOT_A_COMMAND_TIME = {("docs/security.md", "15 minutes"), ("docs/deploy.md", "5 minutes")}


def make_targets(makefile: str) -> set[str]:
    """Return the targets the Makefile defines (rules and .PHONY entries)."""
    return set(re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", makefile, re.M))


def readme_make_targets(text: str) -> set[str]:
    """Return every X of ``make X`` in the text."""
    return set(re.findall(r"\bmake ([a-z][\w-]*)", text))


def readme_paths(text: str) -> set[str]:
    """Return the repository paths the text names in backticks."""
    return {m for m in PATH.findall(text)
            if not m.startswith(("var/", "~", "/", ".venv", "http")) and "$" not in m}


def test_every_make_target_the_readme_names_exists():
    targets = make_targets((ROOT / "Makefile").read_text())
    named = readme_make_targets(README)
    assert {"demo", "test", "test-fast", "screens", "test-min"} <= named
    assert named - targets == set()


def test_every_path_the_readme_names_exists():
    named = readme_paths(README)
    assert {"scripts/llama_server.sh", "docs/sdk.md", "requirements.lock", ".ci/run"} <= named
    assert sorted(p for p in named if not (ROOT / p).exists()) == []


def test_every_manage_py_agentops_subcommand_the_readme_names_exists():
    command = (ROOT / "runs/management/commands/agentops.py").read_text()
    subcommands = set(re.findall(r"add_parser\(\"([\w-]+)\"", command))
    named = set(re.findall(r"(?:manage\.py |`)agentops ([a-z][\w-]*)", README))
    assert {"worker", "run", "doctor", "createuser", "export", "import"} <= named
    assert named - subcommands == set()
    commands = {p.stem for p in ROOT.glob("*/management/commands/*.py")}
    assert set(re.findall(r"`(agentops_\w+)", README)) - commands == set()


def test_only_the_readme_says_how_long_a_command_takes():
    places = [ROOT / "Makefile", *sorted((ROOT / "scripts").glob("*.sh")),
              *sorted((ROOT / "docs").glob("*.md"))]
    found = []
    for path in places:
        rel = str(path.relative_to(ROOT))
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            for figure in DURATION.findall(line):
                if (rel, figure) not in NOT_A_COMMAND_TIME:
                    found.append(f"{rel}:{n}: {figure!r}")
    assert found == [], "keep command times in the README's table and point to it"


def test_the_checks_see_a_missing_target_path_and_a_stray_figure():
    assert readme_make_targets("run `make demo` or make nosuch") == {"demo", "nosuch"}
    assert "nosuch" not in make_targets("demo: install\n\tfoo\nPORT := 1\n")
    assert readme_paths("see `docs/nosuch.md` and `var/x.log` and `scripts/a.sh build`") == {
        "docs/nosuch.md", "scripts/a.sh"}
    assert DURATION.findall("takes about two minutes, or 3-5 min") == ["two minutes", "3-5 min"]
