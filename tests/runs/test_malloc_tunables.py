"""A worker host started from the command line runs with glibc's per-thread caches off.

Every slot thread of a q2 process (one per run in flight) would keep its own cache of freed
blocks full while it waits on its model (runs/cli/malloc_tunables.py).
"""
from __future__ import annotations

import os
import sys

import pytest

from runs.cli.malloc_tunables import TCACHE_OFF, tcache_off_env
from runs.management.commands.agentops import Command


class _Execed(Exception):
    """Stands for the program replaced by execve."""


def _execs(monkeypatch) -> list[tuple[str, list[str], dict[str, str]]]:
    calls: list[tuple[str, list[str], dict[str, str]]] = []

    def execve(path: str, argv: list[str], env: dict[str, str]) -> None:
        calls.append((path, argv, env))
        raise _Execed

    monkeypatch.setattr(os, "execve", execve)
    return calls


@pytest.mark.skipif(not os.confstr("CS_GNU_LIBC_VERSION"), reason="glibc only")
def test_agentops_worker_starts_itself_again_with_the_thread_caches_off(monkeypatch):
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    calls = _execs(monkeypatch)
    with pytest.raises(_Execed):
        Command().run_from_argv(["manage.py", "agentops", "worker", "--workers", "1"])
    [(path, argv, env)] = calls
    assert path == sys.executable and argv == list(sys.orig_argv)  # same program, same pid
    assert env["GLIBC_TUNABLES"] == TCACHE_OFF
    assert env["PATH"] == os.environ["PATH"]


def test_other_subcommands_start_as_they_are(monkeypatch):
    calls = _execs(monkeypatch)
    with pytest.raises(SystemExit):  # ``agentops sweep --help``: parsed, printed, exits
        Command().run_from_argv(["manage.py", "agentops", "sweep", "--help"])
    assert calls == []


def test_the_operators_tunables_are_kept_and_the_cache_setting_added():
    env = tcache_off_env({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2", "X": "1"})
    assert env == {"GLIBC_TUNABLES": f"glibc.malloc.arena_max=2:{TCACHE_OFF}", "X": "1"}


def test_a_tcache_tunable_already_set_starts_nothing_again():
    """The operator's own tcache setting wins; the second start (set by the first) ends there."""
    assert tcache_off_env({"GLIBC_TUNABLES": "glibc.malloc.tcache_count=3"}) is None
    assert tcache_off_env({"GLIBC_TUNABLES": TCACHE_OFF}) is None
