"""Checkpoint files: export a run's state at an event to a directory, import it as a new run.

A checkpoint directory holds the four parts of the seed design, as JSON:

- ``meta.json``: schema_version, the run (id, agent, version, goal, seq, status, budgets), the
  sha256 of each other file and a signature of meta.json itself (HMAC-SHA256 with a
  checkpoint key over its canonical JSON without the ``signature`` key; see
  ``runs.checkpoint_trust``);
- ``context.json``: the messages the model would see next (``context_build``);
- ``state.json``: the run's state after event ``seq``;
- ``env.json``: the agent, its tools with their effect classes, the engine settings that shape
  a run, and the Python, Django and AgentOps versions.

Export is atomic: the files are written and fsynced in a hidden temporary directory beside
the target, meta.json last, and the directory is renamed into place; a failure removes it.
A directory without a valid meta.json (an export that died) is refused by import.

Everything exported is scrubbed of the run's secrets first.

Import validates everything before it writes: the directory and each file (no symbolic
links, regular files under the size cap), the signature, checksums, schema versions, that
the agent version is registered here with the same tools and effect classes, and that
context.json is what this installation builds from state.json, and that every value can be
stored here (no NUL byte, integers within their columns, each field of its type:
``runs.checkpoint_values``; the refusal names the field). It then creates a queued
run whose log is a ``run.created`` and a ``run.imported`` event carrying the state (so
replay needs no file), closes calls that were open (their ledger rows stay with the source
installation) and writes a snapshot. Its first tick runs the post-restore self-check.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import django
from django.conf import settings
from django.db import transaction

from agentops import clock
from agentops.agents import Agent, registry
from agentops.jsonstate import canonical_json, check_json
from ledger.secrets import run_secrets
from runs import checkpoint_trust as trust
from runs.checkpoint_trust import CheckpointRejected
from runs.checkpoint_values import checkpoint_values_check
from runs.engine.core.context import context_build
from runs.engine.runtime.events import NewEvent, event_append
from runs.engine.runtime.queue import run_enqueue
from runs.engine.runtime.session import state_projection
from runs.engine.runtime.snapshots import load_state, migrate_state, snapshot_build
from runs.errors import UnknownAgent, UnknownSchemaVersion
from runs.event_types import EventType
from runs.models import Run, Step
from runs.models.snapshot import CURRENT_STATE_SCHEMA
from runs.statuses import RunStatus, StepStatus

SCHEMA_VERSION = 1
FILES = ("context.json", "state.json", "env.json")
SETTINGS = ("AGENTOPS_INLINE_RESULT_BYTES", "AGENTOPS_STEP_RETRY_LIMIT",
            "AGENTOPS_RECOVERY_LIMIT", "AGENTOPS_LEASE_TTL_S", "AGENTOPS_TICK_SLICE_S",
            "AGENTOPS_BACKOFF_BASE_S", "AGENTOPS_BACKOFF_CAP_S")
BUDGET_FIELDS = ("budget_tokens", "budget_model_calls", "budget_tool_calls",
                 "budget_cost_micros", "recovery_limit")


def checkpoint_export(*, run: Run, directory: str | os.PathLike, seq: int | None = None) -> Path:
    """Write ``run``'s checkpoint after event ``seq`` (default: the latest) to ``directory``."""
    target = Path(directory)
    if target.exists():
        raise CheckpointRejected(f"{target} already exists; export into a new directory")
    seq = run.last_seq if seq is None else seq
    if not 1 <= seq <= run.last_seq:
        raise CheckpointRejected(f"seq must be between 1 and {run.last_seq}", seq=seq)
    agent = _agent(run.agent_name, run.agent_version)
    state = run_secrets(run.pk).scrub(load_state(run, upto_seq=seq), engine=True)
    files = {"context.json": _dump(context_build(state, agent)), "state.json": _dump(state),
             "env.json": _dump(_env(agent))}
    meta = _meta(run, state, files)
    _write_atomically(target, {**files, "meta.json": _dump(meta)})
    return target


def checkpoint_import(*, directory: str | os.PathLike, actor: Any = None) -> Run:
    """Validate the checkpoint in ``directory`` and start a new queued run from it."""
    meta, parts = checkpoint_read(Path(directory))
    try:
        state = parts["state.json"]
        checkpoint_values_check(meta, state, BUDGET_FIELDS)
        agent = _agent(meta["agent"], meta["agent_version"])
        _check_env(agent, parts["env.json"])
        context = context_build(state, agent)
    except (KeyError, TypeError, AttributeError, ValueError, IndexError) as exc:
        # Signed, so exported by a holder of the key, yet not shaped as this code writes it.
        raise CheckpointRejected(f"the checkpoint's files are malformed "
                                 f"({type(exc).__name__}: {str(exc)[:120]})") from None
    if canonical_json(parts["context.json"]) != canonical_json(context):
        raise CheckpointRejected("context.json is not the context this installation builds "
                                 "from state.json: the files or the agent definition differ")
    return _create_run(meta, state, actor)


def checkpoint_read(directory: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return (meta, {file: parsed JSON}) once the directory, signature and files check out."""
    meta = _read_meta(directory)
    parts = {}
    for name in FILES:
        data = trust.file_read(directory, name)
        if hashlib.sha256(data).hexdigest() != meta["files"].get(name):
            raise CheckpointRejected(f"{name} does not match its checksum in meta.json: "
                                     "the file was changed or cut short")
        parts[name] = trust.json_parse(name, data)
    state = parts["state.json"]
    if not isinstance(state, dict) or not isinstance(state.get("run"), dict):
        raise CheckpointRejected("state.json is not a run state")
    try:
        parts["state.json"] = state = migrate_state(state, meta["state_schema"])
    except UnknownSchemaVersion as exc:
        raise CheckpointRejected(f"state.json: {exc.message}") from None
    if state["run"].get("goal") != meta["goal"] or state.get("seq") != meta["seq"]:
        raise CheckpointRejected("state.json and meta.json disagree on the goal or the seq")
    return meta, parts


def _read_meta(directory: Path) -> dict[str, Any]:
    trust.directory_check(directory)
    try:
        data = trust.file_read(directory, "meta.json")
    except CheckpointRejected as exc:
        if "missing" not in exc.message:
            raise
        raise CheckpointRejected(f"{directory} has no meta.json: it is not a checkpoint, or "
                                 "its export did not finish") from None
    meta = trust.json_parse("meta.json", data)
    if not isinstance(meta, dict) or meta.get("schema_version") != SCHEMA_VERSION:
        found = meta.get("schema_version") if isinstance(meta, dict) else None
        raise CheckpointRejected(f"checkpoint schema_version {repr(found)[:20]} is not "
                                 f"supported (this code reads {SCHEMA_VERSION})")
    trust.meta_verify(meta)
    trust.meta_shape_check(meta)
    return meta


def _agent(name: str, version: str) -> Agent:
    try:
        return registry.get(name, version)
    except UnknownAgent as exc:
        raise CheckpointRejected(f"the checkpoint's agent is not here: {exc.message}") from None


def _env(agent: Agent) -> dict[str, Any]:
    try:
        agentops_version = version("agentops-durable")  # the distribution name
    except PackageNotFoundError:
        agentops_version = "unknown"
    return {"agent": {"name": agent.name, "version": agent.version},
            "tools": _tools(agent),
            "settings": {k: getattr(settings, k, None) for k in SETTINGS},
            "python": platform.python_version(), "django": django.get_version(),
            "agentops": agentops_version}


def _tools(agent: Agent) -> list[dict[str, Any]]:
    return [{"name": t.name, "effect": t.effect, "effect_class": t.effect_class,
             "idempotent": t.idempotent, "probe": t.probe is not None}
            for t in sorted(agent.tools, key=lambda t: t.name)]


def _check_env(agent: Agent, env: dict[str, Any]) -> None:
    theirs = {t["name"]: t.get("effect_class") for t in env.get("tools", [])}
    ours = {t["name"]: t["effect_class"] for t in _tools(agent)}
    diffs = [f"{n}: {theirs.get(n, 'absent')} there, {ours.get(n, 'absent')} here"
             for n in sorted(set(theirs) | set(ours)) if theirs.get(n) != ours.get(n)]
    if diffs:
        raise CheckpointRejected(f"agent {agent.name}@{agent.version} has different tools "
                                 f"here ({'; '.join(diffs)}): the run would act differently")


def _meta(run: Run, state: dict[str, Any], files: dict[str, bytes]) -> dict[str, Any]:
    meta = {
        "schema_version": SCHEMA_VERSION, "state_schema": CURRENT_STATE_SCHEMA,
        "run_id": str(run.pk), "agent": run.agent_name, "agent_version": run.agent_version,
        "goal": state["run"].get("goal", run.goal), "seq": state["seq"], "turn": state["turn"],
        "status": state["status"], "created_at": run.created_at.isoformat(),
        "exported_at": clock.now().isoformat(),
        "budget": {f: getattr(run, f) for f in BUDGET_FIELDS},
        "files": {name: hashlib.sha256(data).hexdigest() for name, data in files.items()},
    }
    return trust.meta_sign(meta)


def _dump(value: Any) -> bytes:
    # Key order is kept, not sorted: the order of facts is the order the model sees them in.
    check_json(value, "$checkpoint")
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode()


def _write_atomically(target: Path, files: dict[str, bytes]) -> None:
    """Write ``files`` into a new directory ``target``: all of them, or nothing at ``target``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent))
    try:
        for name, data in files.items():  # meta.json comes last: without it nothing is valid
            _write_file(tmp / name, data)
        _fsync_dir(tmp)
        os.rename(tmp, target)
        _fsync_dir(target.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write_file(path: Path, data: bytes) -> None:
    with open(path, "xb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _create_run(meta: dict[str, Any], state: dict[str, Any], actor: Any) -> Run:
    who = getattr(actor, "get_username", lambda: str(actor or ""))()
    info = state["run"]
    with transaction.atomic():
        run = Run.objects.create(
            agent_name=meta["agent"], agent_version=meta["agent_version"], goal=info["goal"],
            input=info.get("input", {}), created_by=actor if getattr(actor, "pk", None) else None,
            **{f: v for f, v in (meta.get("budget") or {}).items() if f in BUDGET_FIELDS})
        Step.objects.bulk_create([
            Step(run=run, key=s["key"], position=i, title=s["title"], depends_on=s["depends_on"],
                 input=s["input"], status=_step_status(state, s["key"]))
            for i, s in enumerate(state["plan"])])
        event_append(run=run, events=_import_events(meta, state, who), fields=_projection(state))
        snapshot_build(run_id=run.pk, state=load_state(run), phase="imported",
                       agent_version=run.agent_version).save()

        run_enqueue(run.pk)
    run.refresh_from_db()
    return run


def _import_events(meta: dict[str, Any], state: dict[str, Any], who: str) -> list[NewEvent]:
    info = state["run"]
    events = [
        NewEvent(EventType.RUN_CREATED, {"agent": meta["agent"], "version": meta["agent_version"],
                                 "goal": info["goal"], "input": info.get("input", {}),
                                 "constraints": info.get("constraints", []), "plan": [],
                                 "parent": None}, actor=who),
        NewEvent(EventType.RUN_IMPORTED, {"from_run": meta["run_id"], "from_seq": meta["seq"],
                                           "exported_at": meta["exported_at"],
                                           "signature": meta["signature"],
                                  "state": state}, actor=who),
    ]
    for call_id, call in state["open_calls"].items():
        events.append(NewEvent(EventType.TOOL_RESULT, {"id": call_id, "status": "failed", "error": {
            "category": "imported", "retryable": True,
            "message": f"{call['name']} was still open when this run was exported; its ledger "
                       "row stayed with the source, so it may or may not have run",
            "next": "call it again if it is still needed"}}, tool_call_id=call_id))
    events.append(NewEvent(EventType.RUN_STATUS, {"from": state["status"], "to": RunStatus.QUEUED,
                                          "reason": "imported", "detail": meta["run_id"]}))
    return events


def _step_status(state: dict[str, Any], key: str) -> str:
    status = state["steps"].get(key, {}).get("status", StepStatus.PENDING)
    return status if status in StepStatus.values else StepStatus.PENDING


def _projection(state: dict[str, Any]) -> dict[str, Any]:
    return {**state_projection(state), "recoveries": state["recoveries"]}
