"""The fault family together (issue 39): kill, pause, cut stream, terminated sessions, hung tool.

Three real worker hosts (``manage.py agentops worker``, two q2 processes each) on PostgreSQL
run ~30 mixed runs while, at once:

- **kill**: a host's whole process group is SIGKILLed, then started again;
- **pause**: a host is SIGSTOPped past the lease TTL, then SIGCONTed (it wakes up mid-call
  believing it still holds its runs);
- **db_terminate**: every PostgreSQL session of a host's processes is ended by
  ``pg_terminate_backend`` (the processes live on);
- **stream_cut**: the model provider (a real loopback HTTP server, tests/llm/fakes.py) closes
  streamed replies after two chunks, without finish_reason or ``[DONE]``; most stream runs are
  cut one or two times, two are cut on every request;
- **hung_tool**: a tool that never returns (and declares no timeout) on every host may hang
  a thread; a process holding one is replaced (AGENTOPS_HUNG_THREADS_MAX=1).

Afterwards: no run is lost (every one terminal or waiting for a person), no side effect
happened twice, no attempt is running without a lease, every log replays to its snapshot,
every recovery ("the run lost its worker") followed a fault that really took that worker, and
every blocked run's reason is one its faults explain (``EXPLAINED_BY`` below).
"""
from __future__ import annotations

import json
import random
import re
import statistics
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import pytest
from django.db import connection
from django.utils import timezone

from ledger.models import ToolCall
from runs.engine.runtime.selfcheck import attempts_running_unleased
from runs.engine.runtime.snapshots import load_state, replay_state
from runs.models import Event, Run
from runs.statuses import ATTENTION, TERMINAL
from tests.e2e.test_chaos import _assert_effects, _host
from tests.llm.fakes import Answer, fake_provider, oa_stream

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

HOSTS = 3
CHAOS_S = 60
BUSY, BUSY_TURNS = 6, 40  # long runs: every host has work in flight when a fault lands
SETTLE_S = 90
RECOVERY_LIMIT = 1  # a second lost worker blocks the run: recovery_limit and its stragglers
STEP_RETRY_LIMIT = 3  # a stream run cut at most twice always has a retry left
CUTS = ["0", "1", "2", "1", "2", "1", "always", "always"]
FAULTS = ["kill", "db_terminate", "pause"]
LOST_WORKER = {"kill", "pause", "db_terminate", "hung_tool"}
# Which fault can produce which blocked reason; any other reason on a blocked run is false.
EXPLAINED_BY = {
    # The run lost its worker more than its limit allows, each loss one of these faults.
    "recovery_limit": LOST_WORKER,
    # Every model request of the run was cut (only the "cut always" stream runs).
    "retry_exhausted": {"stream_cut"},
}


@dataclass
class Fault:
    """One fault injected into a worker host."""

    kind: str
    host: str
    at: object  # when it began (database time zone aware)
    owners: set[str]  # lease owner names of the host's processes at that moment
    held: set[str] = field(default_factory=set)  # runs they held
    sessions: int = 0  # PostgreSQL sessions ended (db_terminate)


class CuttingProvider:
    """The provider's answers: per run (by its goal), cut its first N requests, then answer.

    A run's first answer asks for ``charge``; once the conversation holds a tool result the
    answer is text. A cut answer is the first two chunks, then the connection closes.
    """

    def __init__(self) -> None:
        self.seen: Counter = Counter()
        self.cut: Counter = Counter()
        self.lock = threading.Lock()

    def __call__(self, request: dict) -> Answer:
        """Return the answer to one request."""
        messages = request["json"].get("messages", [])
        found = re.search(r"stream (\d+) cut (\d+|always)", json.dumps(messages))
        if found is None:
            return Answer(400, {"error": {"message": "no stream goal in the conversation"}})
        goal, n, cuts = found.group(0), found.group(1), found.group(2)
        with self.lock:
            self.seen[goal] += 1
            cut = cuts == "always" or self.seen[goal] <= int(cuts)
            self.cut[goal] += cut
        if any(m.get("role") == "tool" for m in messages):
            whole = oa_stream(["Charged ", f"s{n}", "; done"])
        else:
            whole = oa_stream(["Charging"], call=("charge", json.dumps({"order": f"s{n}"})))
        return Answer(events=whole.events[:2]) if cut else whole


@pytest.fixture
def world(settings):
    """The world table and fast lease/sweep/recovery settings (runs are created here)."""
    from tests import chaos_agents, fault_family_agents  # noqa: F401  (register here too)

    settings.AGENTOPS_ENQUEUE_TICKS = True
    settings.AGENTOPS_LEASE_TTL_S = 3.0
    settings.AGENTOPS_SWEEP_INTERVAL_S = 1.0
    settings.AGENTOPS_RECOVERY_LIMIT = RECOVERY_LIMIT
    chaos_agents.world_create()
    yield chaos_agents
    chaos_agents.world_drop()


@pytest.fixture
def provider():
    """The loopback model provider, cutting streams."""
    with fake_provider("/v1") as fake:
        fake.reply = CuttingProvider()
        yield fake


@pytest.fixture
def hosts(world, provider, tmp_path):
    """The worker hosts, pointed at the provider; stopped (hard) at the end whatever happens."""
    from tests.e2e.workers import Worker

    env = dict(AGENTOPS_AGENTS="tests.fault_family_agents", AGENTOPS_HUNG_THREADS_MAX="1",
               AGENTOPS_TOOL_TIMEOUT_S="2", AGENTOPS_STEP_RETRY_LIMIT=str(STEP_RETRY_LIMIT),
               AGENTOPS_MODEL_PROVIDER="openai", AGENTOPS_MODEL_BASE_URL=provider.base_url,
               AGENTOPS_MODEL_NAME="fake-model", AGENTOPS_MODEL_API_KEY="sk-x",
               AGENTOPS_MODEL_STREAM="1", LOG_LEVEL="WARNING")
    out = [Worker(f"ff{i}", tmp_path, env) for i in range(HOSTS)]
    for w in out:
        w.start()
    yield out
    for w in out:
        w.resume()
        w.stop()


def _plan(tmp_path) -> list[tuple[str, str, dict]]:
    """Return (agent, goal, input) of every run but the busy ones, in submission order."""
    plan = [(a, f"chaos {i}", {"order": f"o{i}"}) for i in range(15)
            for a in [["chaos_read", "chaos_idem", "chaos_probe", "chaos_unsafe",
                       "chaos_mixed"][i % 5]]]
    plan += [("ff_stream", f"stream {i} cut {c}", {}) for i, c in enumerate(CUTS)]
    plan += [("chaos_hang", f"hang {i}", {"marker": str(tmp_path / f"hang-{i}")})
             for i in range(2)]
    random.Random(7).shuffle(plan)
    return plan


def test_fault_family_kill_pause_stream_cut_db_terminate_hung_thread_straggler(
        world, provider, hosts, tmp_path):
    from runs.services import run_start

    rng = random.Random(11)
    busy = [run_start(agent="chaos_busy", goal=f"busy {i}", input={"turns": BUSY_TURNS}).pk
            for i in range(BUSY)]
    plan, ids = _plan(tmp_path), list(busy)
    began = time.monotonic()

    def submit() -> None:
        # Runs arrive over the first half of the chaos, so faults land on work in flight.
        due = min(len(plan), int(len(plan) * (time.monotonic() - began) / (CHAOS_S / 2)) + 4)
        while len(ids) - len(busy) < due:
            agent, goal, data = plan[len(ids) - len(busy)]
            ids.append(run_start(agent=agent, goal=goal, input=data).pk)

    faults = _chaos(hosts, rng, until=began + CHAOS_S, submit=submit, ids=ids, total=len(plan))
    _settle(set(ids), until=time.monotonic() + SETTLE_S)
    for w in hosts:
        w.resume()
        w.stop()
    chaos_s = time.monotonic() - began
    runs = {r.pk: r for r in Run.objects.filter(pk__in=ids)}
    replaced = _replaced_pids(hosts)
    lost, unexplained = _recoveries(runs, faults, replaced)
    _report(runs, faults, provider, chaos_s, lost, len(replaced))

    assert len(runs) == len(plan) + len(busy), "a run was lost"
    stuck = [(str(r.pk)[:8], r.agent_name, r.status) for r in runs.values()
             if r.status not in TERMINAL | ATTENTION]
    assert not stuck, f"runs neither terminal nor needing a person: {stuck}"
    _assert_faults_happened(faults, provider, tmp_path)
    _assert_effects(world.world_rows())
    assert attempts_running_unleased() == {}, "attempts running with nobody holding them"
    assert not unexplained, f"runs recovered from a worker no fault took: {unexplained}"
    _assert_reasons_true(runs, lost)
    for run_id in ids:
        assert replay_state(run_id) == load_state(run_id), f"run {run_id} does not replay"
    # A lost tick is enqueued again after runs_requeue_stale's 10 s: 30 s on a loaded machine.
    slow = [(k, round(x, 1)) for k, xs in _latencies(faults).items() for x in xs if x >= 30]
    assert not slow, f"runs waited too long for another worker after a fault: {slow}"


def _chaos(hosts, rng, *, until: float, submit, ids: list, total: int) -> list[Fault]:
    faults: list[Fault] = []
    next_at = time.monotonic() + 3
    while time.monotonic() < until:
        submit()
        done = len(ids) >= total and not Run.objects.filter(pk__in=ids).exclude(
            status__in=list(TERMINAL | ATTENTION)).exists()
        if done and len(faults) >= 3 * len(FAULTS):
            break
        if time.monotonic() >= next_at:
            faults.append(_inject(FAULTS[len(faults) % len(FAULTS)], _victim(hosts, rng), rng))
            next_at = time.monotonic() + rng.uniform(2.5, 4.5)
        time.sleep(0.3)
    return faults


def _victim(hosts, rng):
    """Return the host holding the most runs right now (faults land on work in flight)."""
    owners = Counter(Run.objects.filter(status="running").values_list("lease_owner", flat=True))
    held = {w: sum(owners[f"{_host()}:{p}"] for p in w.pids()) for w in hosts}
    return max(rng.sample(hosts, len(hosts)), key=held.__getitem__)


def _inject(kind: str, victim, rng) -> Fault:
    pids = victim.pids()
    owners = {f"{_host()}:{pid}" for pid in pids}
    fault = Fault(kind, victim.name, timezone.now(), owners, {str(i) for i in Run.objects.filter(
        status="running", lease_owner__in=owners).values_list("pk", flat=True)})
    if kind == "kill":
        victim.kill()
    elif kind == "pause":
        victim.pause()
    else:
        fault.sessions = _terminate_sessions(pids)
    if kind == "kill":
        time.sleep(rng.uniform(0.5, 1.5))
        victim.start()
    elif kind == "pause":
        time.sleep(rng.uniform(4.0, 5.0))  # past the 3 s lease: others take over
        victim.resume()
    return fault


def _terminate_sessions(pids: set[int]) -> int:
    """End every PostgreSQL session a process in ``pids`` opened (named ``host:pid`` or
    ``agentops-lease-keeper-pid``); return how many."""
    names = [f"{_host()}:{p}"[:63] for p in pids] + [f"agentops-lease-keeper-{p}" for p in pids]
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) "
                    "FROM pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid() AND application_name = ANY(%s)", [names])
        return cur.fetchone()[0]


def _settle(ids: set, *, until: float) -> None:
    while time.monotonic() < until:
        busy = Run.objects.filter(pk__in=ids).exclude(status__in=list(TERMINAL | ATTENTION))
        waiting_on_system = Run.objects.filter(pk__in=ids, status="waiting").exclude(
            wait_kind="approval")
        if not busy.exists() and not waiting_on_system.exists():
            return
        time.sleep(0.5)


def _recoveries(runs: dict, faults: list[Fault], replaced: set[str]
                ) -> tuple[dict[str, list[set[str]]], list]:
    """Return, per run, the faults that explain each of its recoveries (lost its worker).

    A recovery is explained by a fault that took the lost owner's process before it (kill,
    pause, db_terminate), or by the owner being the process whose tool hung (it is replaced):
    the one that ran the hang tool's first recorded attempt, or one whose log says it exits to
    be replaced for hung threads (``replaced``, pids). A hang whose reply was held (a quick
    read, runs.engine.runtime.read_rides) can leave no attempt in the log: then its process's
    log is the only trace. Also returns the recoveries no fault explains (a worker that was not lost).
    """
    hung = {_hung_holder(r) for r in runs.values() if r.agent_name == "chaos_hang"}
    out: dict[str, list[set[str]]] = defaultdict(list)
    unexplained = []
    for ev in Event.objects.filter(run_id__in=list(runs), type="run.recovered").order_by("at"):
        owner = ev.data["lost_owner"]
        why = {f.kind for f in faults if owner in f.owners and f.at <= ev.at}
        why |= {"hung_tool"} if owner in hung or owner.rsplit(":", 1)[-1] in replaced else set()
        out[str(ev.run_id)].append(why)
        if not why:
            unexplained.append((str(ev.run_id)[:8], runs[ev.run_id].agent_name, owner,
                                ev.data.get("cause")))
    return out, unexplained


def _hung_holder(run: Run) -> str:
    """Return the owner that ran the hang tool's first attempt (the one that never returns)."""
    first = Event.objects.filter(run=run, type="tool.started").order_by("seq").first()
    claims = Event.objects.filter(run=run, type="run.status", data__to="running")
    claim = claims.filter(seq__lt=first.seq).order_by("-seq").first() if first else None
    return claim.data["owner"] if claim else ""


def _assert_reasons_true(runs: dict, lost: dict[str, list[set[str]]]) -> None:
    """Every blocked run's reason is one its faults explain; a cut stream is never a reply."""
    false = []
    for r in runs.values():
        losses = lost.get(str(r.pk), [])
        if r.status == "blocked":
            faults = set().union(*losses) if losses else set()
            faults |= {"stream_cut"} if "cut always" in r.goal else set()
            if not EXPLAINED_BY.get(r.attention_reason, set()) & faults:
                false.append((str(r.pk)[:8], r.agent_name, r.attention_reason, sorted(faults),
                              r.attention_detail[:160]))
            elif r.attention_reason == "recovery_limit":
                assert len(losses) > r.recovery_limit, (r.pk, losses)
            elif r.attention_reason == "retry_exhausted":
                assert "stream ended before its end" in r.attention_detail, r.attention_detail
        elif "lost its worker" in (r.attention_detail or ""):
            false.append((str(r.pk)[:8], r.agent_name, r.status, "lost its worker", []))
        if r.agent_name == "ff_stream" and not (r.status == "blocked" and r.attention_reason
                                                == "recovery_limit"):
            want = "blocked" if "cut always" in r.goal else "succeeded"
            assert r.status == want, (r.goal, r.status, r.attention_reason, r.attention_detail)
        if r.status == "unknown":
            assert ToolCall.objects.filter(run=r, status="unknown").exists(), r.pk
    assert not false, f"blocked for a reason no fault explains: {false}"
    replied = Event.objects.filter(run__in=list(runs), run__agent_name="ff_stream",
                                   type="model.replied").values_list("data", flat=True)
    fragments = [d.get("text") for d in replied if (d.get("text") or "").startswith("Charged")
                 and not d["text"].endswith("; done")]
    assert not fragments, f"a cut stream was recorded as a reply: {fragments}"


def _assert_faults_happened(faults: list[Fault], provider, tmp_path) -> None:
    kinds = Counter(f.kind for f in faults)
    assert all(kinds[k] for k in FAULTS), kinds
    assert sum(f.sessions for f in faults if f.kind == "db_terminate") > 0, "no session ended"
    cut = provider.reply.cut
    assert all(cut[g] >= 1 for g in cut if "cut always" in g) and sum(cut.values()) >= 4, cut
    assert all((tmp_path / f"hang-{i}").exists() for i in range(2)), "a hung tool never ran"
    # Its holder was lost (replaced for its hung thread, or taken by another fault first).
    hung = Run.objects.filter(agent_name="chaos_hang", recoveries__gte=1).count()
    assert hung == 2, "a run whose tool hung was never recovered"


def _replaced_pids(hosts) -> set[str]:
    """Return the pids of the worker processes that exited to be replaced for hung threads."""
    logs = [w.log_dir / f"{w.name}-{k}.log" for w in hosts for k in range(1, w.starts + 1)]
    return {m for p in logs for m in re.findall(r"worker process (\d+) exits now to be replaced",
                                                 p.read_text(errors="replace"))}


def _latencies(faults: list[Fault]) -> dict[str, list[float]]:
    """Return, per fault kind, seconds from the fault to each held run's next claim."""
    out: dict[str, list[float]] = defaultdict(list)
    for f in faults:
        for run_id in f.held:
            claim = (Event.objects.filter(run_id=run_id, at__gt=f.at, type="run.status",
                                          data__to="running").order_by("seq").first())
            if claim is not None:
                out[f.kind].append((claim.at - f.at).total_seconds())
    return out


def _report(runs: dict, faults: list[Fault], provider, wall_s: float,
            lost: dict[str, list[set[str]]], replaced: int) -> None:
    kinds = Counter(f.kind for f in faults)
    cut = provider.reply.cut
    print(f"\nfault family: {len(runs)} runs on {HOSTS} hosts in {wall_s:.0f}s")
    print(f"faults injected: {dict(kinds)}; db sessions ended: "
          f"{sum(f.sessions for f in faults)}; streams cut: {sum(cut.values())} "
          f"(of {sum(provider.reply.seen.values())} model requests); hung tools: 2, "
          f"processes replaced for hung threads: {replaced}")
    print("fault timeline: " + ", ".join(
        f"{f.at:%H:%M:%S} {f.kind} {f.host} (held {len(f.held)}"
        + (f", {f.sessions} sessions)" if f.kind == "db_terminate" else ")") for f in faults))
    print(f"outcomes: {dict(Counter(r.status for r in runs.values()))}")
    reasons = Counter((r.status, r.attention_reason) for r in runs.values() if r.attention_reason)
    print(f"reasons: {dict(reasons)}")
    causes = Counter(e["cause"] for e in Event.objects.filter(
        run_id__in=list(runs), type="run.recovered").values_list("data", flat=True))
    print(f"recoveries (lost worker) by cause: {dict(causes)}; explained by: "
          f"{dict(Counter('+'.join(sorted(w)) or '-' for ws in lost.values() for w in ws))}")
    for kind, xs in sorted(_latencies(faults).items()):
        print(f"recovery after {kind}: {len(xs)} runs, median {statistics.median(xs):.1f}s, "
              f"max {max(xs):.1f}s")
