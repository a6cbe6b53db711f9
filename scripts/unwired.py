#!/usr/bin/env python3
"""List production functions, classes and settings that nothing but tests (or nothing) uses.

A feature is wired when production code calls it. This prints every top-level function,
class and method defined outside tests/, migrations/ and bench/ whose name appears nowhere
else in production code (templates and static included), and every AGENTOPS_* setting
that no production module reads. Each line is a place to wire up, or to delete.

    python3 scripts/unwired.py [PROJECT_ROOT]                 # list, exit 0
    python3 scripts/unwired.py --allow scripts/unwired_allow.txt  # CI: exit 1 on anything new

With --allow, a finding listed in the allow-list (one ``path: name`` a line, ``#`` comments)
passes, anything else fails, and so does an allow-list entry that is no longer reported (the
list only shrinks). Vendored from the team's shared/tools/unwired.py so a clean clone has it.

Names are matched as words, so a name that is also used for something else is not listed:
the report can miss things, but what it lists deserves a look. Entry points that frameworks
call by convention (views in urls.py, tasks by dotted path, signal receivers, management
commands, dunder methods, tests' fixtures) are excluded where recognised.
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

SKIP_DIRS = ("tests/", "migrations/", "bench/", "docs/", "scripts/")
CONVENTION = {"handle", "add_arguments", "ready", "get_queryset", "get_context_data",
              "connect", "disconnect", "receive", "receive_json", "setUp", "tearDown",
              "clean", "save", "delete", "get", "post", "put", "patch", "dispatch",
              "render", "process_request", "process_response", "process_view",
              "authenticate", "has_permission", "formfield_for_dbfield", "main"}


def files(root: Path) -> list[str]:
    out = subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True, text=True)
    return [f for f in out.stdout.splitlines() if (root / f).is_file()]


def unwired_report(root: Path) -> list[str]:
    """Return one line per unwired definition or setting (``path:line: Kind name — ...``)."""
    all_files = files(root)
    prod = [f for f in all_files if not f.startswith(SKIP_DIRS) and "/migrations/" not in f
            and not f.startswith("tests")]
    texts = {f: (root / f).read_text(errors="replace") for f in all_files
             if f.endswith((".py", ".html", ".js", ".txt", ".md", ".toml", ".cfg"))}
    defs: list[tuple[str, int, str, str]] = []
    for f in prod:
        if not f.endswith(".py"):
            continue
        try:
            tree = ast.parse(texts[f])
        except SyntaxError:
            continue
        for node in tree.body:
            nodes = [node] + (list(node.body) if isinstance(node, ast.ClassDef) else [])
            for n in nodes:
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    if n.name.startswith("__") or n.name in CONVENTION:
                        continue
                    if getattr(n, "decorator_list", None):
                        continue  # registered by a decorator (routes, handlers, tools)
                    defs.append((f, n.lineno, n.name, type(n).__name__))
    words: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    word_re = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
    for f, text in texts.items():
        for w in word_re.findall(text):
            words[w][f] += 1
    report = []
    for f, line, name, kind in defs:
        uses = words.get(name, {})
        prod_uses = sum(n for g, n in uses.items() if g in prod and not g.endswith(".md"))
        own = uses.get(f, 0)
        elsewhere_prod = prod_uses - own
        test_uses = sum(n for g, n in uses.items() if g.startswith("tests"))
        if elsewhere_prod == 0 and own <= 1:
            where = "only tests" if test_uses else "nothing"
            report.append(f"{f}:{line}: {kind} {name} — used by {where}")
    is_settings = [f for f in prod if f.endswith(".py") and re.search(r"(^|/)settings[^/]*\.py$", f)]
    defined = set()
    for f in is_settings:
        for node in ast.parse(texts[f]).body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                defined |= {t.id for t in targets if isinstance(t, ast.Name)
                            and t.id.startswith("AGENTOPS_")}
    for s in sorted(defined):
        readers = [f for f in prod if f.endswith((".py", ".html")) and f not in is_settings
                   and re.search(rf"\b{s}\b", texts.get(f, ""))]
        if not readers:
            report.append(f"setting {s} — read by no production module")
    return report


def finding_key(line: str) -> str:
    """``path:line: Kind name — ...`` -> ``path: name``; ``setting X — ...`` -> ``setting X``."""
    if line.startswith("setting "):
        return line.split(" — ")[0]
    path, _, rest = line.partition(":")
    return f"{path}: {rest.split(' — ')[0].split()[-1]}"


def allow_list(path: Path) -> set[str]:
    lines = (raw.split("#", 1)[0].strip() for raw in path.read_text().splitlines())
    return {line for line in lines if line}


def main() -> int:
    args = sys.argv[1:]
    allow_path = None
    if "--allow" in args:
        at = args.index("--allow")
        allow_path = Path(args[at + 1])
        del args[at:at + 2]
    root = Path(args[0] if args else ".").resolve()
    report = unwired_report(root)
    if allow_path is None:
        print("\n".join(report) if report else "nothing unwired found")
        print(f"{len(report)} unwired")
        return 0
    allowed = allow_list(allow_path)
    new = [line for line in report if finding_key(line) not in allowed]
    stale = sorted(allowed - {finding_key(line) for line in report})
    for line in new:
        print(f"unwired: {line}  (wire it, delete it, or allow-list it in {allow_path})")
    for key in stale:
        print(f"unwired: {key} is allow-listed but no longer reported: remove it from {allow_path}")
    print(f"unwired: {len(report)} found, {len(report) - len(new)} allow-listed, "
          f"{len(new)} new, {len(stale)} stale allow-list entries")
    return 1 if new or stale else 0


if __name__ == "__main__":
    sys.exit(main())
