"""Packaging: the hashed lock `make install` installs covers pyproject.toml, and every direct
dependency has a lower bound that `make test-min` can install."""
from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from min_requirements import min_pin, min_pins  # noqa: E402

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _lock() -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) for every package pinned in requirements.lock."""
    text = (ROOT / "requirements.lock").read_text()
    pins = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        match = re.match(r"([A-Za-z0-9_.\-]+)==([^\s\\]+)", block)
        if match:
            pins[canonicalize_name(match[1])] = (match[2], re.findall(r"--hash=sha256:(\w+)", block))
    return pins


def test_the_lock_pins_every_direct_dependency_in_range_with_hashes():
    lock = _lock()
    for raw in PROJECT["dependencies"] + PROJECT["optional-dependencies"]["dev"]:
        req = Requirement(raw)
        name = canonicalize_name(req.name)
        assert name in lock, f"{req.name} is not in requirements.lock: run `make lock`"
        version, hashes = lock[name]
        assert req.specifier.contains(version), f"lock has {name}=={version}, pyproject {req}"
    assert all(hashes for _, hashes in lock.values()), "every locked package needs its hashes"


def test_every_direct_dependency_has_a_tested_lower_bound():
    pins = min_pins(["dev"])
    assert len(pins) == len(PROJECT["dependencies"]) + len(PROJECT["optional-dependencies"]["dev"])
    assert "python-json-logger==3.1" in pins and "django-ninja==1.7" in pins
    assert min_pin("psycopg[binary]>=3.2.1,<4") == "psycopg[binary]==3.2.1"


def test_a_dependency_without_a_lower_bound_is_refused():
    import pytest

    with pytest.raises(ValueError, match="no >= lower bound"):
        min_pin("requests<3")


def test_the_distribution_name_is_not_the_taken_agentops():
    assert PROJECT["name"] == "agentops-durable"
