"""Print ``name==lower_bound`` for every direct dependency in pyproject.toml (and an extra).

    python scripts/min_requirements.py [EXTRA ...]     # e.g. `dev`

Used by scripts/test_min.sh to install the oldest versions pyproject.toml claims to support.
A dependency without a ``>=`` lower bound is an error: every bound must be tested.
"""
from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = re.compile(r"^\s*([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*(.*)$")


def min_pin(requirement: str) -> str:
    """``'psycopg[binary]>=3.2,<4'`` -> ``'psycopg[binary]==3.2'``."""
    match = SPEC.match(requirement.split(";")[0])
    if not match:
        raise ValueError(f"cannot read requirement {requirement!r}")
    name, extras, spec = match.groups()
    lower = [part.strip()[2:] for part in spec.split(",") if part.strip().startswith(">=")]
    if not lower:
        raise ValueError(f"{name} has no >= lower bound in pyproject.toml: {requirement!r}")
    return f"{name}{extras or ''}=={lower[0]}"


def min_pins(extras: list[str]) -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in extras:
        reqs += project["optional-dependencies"][extra]
    return [min_pin(r) for r in reqs]


if __name__ == "__main__":
    print("\n".join(min_pins(sys.argv[1:])))
