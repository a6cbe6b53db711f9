"""Every production module sits in one of the layers pyproject.toml declares.

import-linter only checks the modules a contract names: a new module nobody listed would
escape the layer order silently. This test walks the packages and fails naming the module.
"""
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]


def _layered() -> set[str]:
    contract = next(c for c in _config()["contracts"] if c["id"] == "layers")
    return {name.strip() for layer in contract["layers"] for name in layer.split(":")}


def _modules() -> list[str]:
    found = []
    for package in _config()["root_packages"]:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if "migrations" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if len(parts) > 1:
                found.append(".".join(parts))
    return sorted(found)


def _covered(module: str, layered: set[str]) -> bool:
    parts = module.split(".")
    return any(".".join(parts[:i]) in layered for i in range(1, len(parts) + 1))


def _is_package(module: str, layered: set[str]) -> bool:
    return any(name.startswith(module + ".") for name in layered)


def test_every_module_is_in_a_layer():
    layered = _layered()
    loose = [m for m in _modules() if not _covered(m, layered) and not _is_package(m, layered)]
    assert not loose, (
        f"{loose}: not in any layer of [tool.importlinter] 'layers' in pyproject.toml, so "
        "lint-imports does not check them; add each to the lowest layer whose imports it needs "
        "(docs/architecture.md, Layers)")


def test_every_layered_name_exists():
    modules = set(_modules())
    missing = [n for n in _layered() if not any(m == n or m.startswith(n + ".") for m in modules)]
    assert not missing, f"{missing}: listed in the layers contract but no such module"
