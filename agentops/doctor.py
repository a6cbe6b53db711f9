"""Configuration and readiness checks, each answering in plain words what is wrong and what
to do. ``manage.py agentops doctor`` prints ``doctor_checks()``; ``/readyz`` uses
``readiness_checks()``.
"""
from __future__ import annotations

import importlib
import ipaddress
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import redis
from cryptography.fernet import Fernet
from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor

from agentops import clock
from agentops.db_budget import session_budget, web_sessions_max, worker_host_sessions_max
from agentops.agents import registry
from agentops.errors import ConfigError
from agentops.llm.configured import model_from_settings
from agentops.observability.collectors import heartbeat_max_age_s
from agentops.proxies import trusted_proxies
from agentops.replica.health import replica_report, replica_sessions_report
from runs.models import Team, WorkerHeartbeat
from runs.pooler import pooled

DEV_SECRET_KEY = "dev-only-insecure-key-set-SECRET_KEY-in-production"

# Once a process has seen every migration applied it stays so: migrations only change with a
# new deploy, which starts new processes. Saves /readyz from reading the migration graph.
_migrations_ok: set[str] = set()


@dataclass(frozen=True)
class Check:
    """The outcome of one check: its name, whether it passed, and a sentence for a person."""

    name: str
    ok: bool
    message: str


def check_database() -> Check:
    """Check the default database answers a query."""
    conn = connections[DEFAULT_DB_ALIAS]
    try:
        with conn.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as exc:
        where = conn.settings_dict.get("HOST") or conn.settings_dict.get("NAME")
        return Check("database", False, f"Cannot reach the database at {where}: {exc}".strip())
    return Check("database", True, f"The {conn.vendor} database answers.")


def check_migrations() -> Check:
    """Check every migration is applied."""
    if DEFAULT_DB_ALIAS in _migrations_ok:
        return Check("migrations", True, "All migrations are applied.")
    try:
        executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as exc:
        return Check("migrations", False, f"Cannot read the applied migrations: {exc}")
    if plan:
        names = ", ".join(f"{m.app_label}.{m.name}" for m, _ in plan[:3])
        more = f" and {len(plan) - 3} more" if len(plan) > 3 else ""
        return Check(
            "migrations", False,
            f"{len(plan)} migration(s) are not applied ({names}{more}): run `manage.py migrate`.",
        )
    _migrations_ok.add(DEFAULT_DB_ALIAS)
    return Check("migrations", True, "All migrations are applied.")


def check_worker_heartbeat() -> Check:
    """Check at least one worker reported a heartbeat recently."""
    max_age = heartbeat_max_age_s()
    try:
        latest = WorkerHeartbeat.objects.order_by("-seen_at").values_list("seen_at", flat=True)
        seen = latest.first()
    except DatabaseError as exc:
        return Check("worker_heartbeat", False, f"Cannot read worker heartbeats: {exc}")
    if seen is None:
        return Check(
            "worker_heartbeat", False,
            "No worker has ever reported: start one with `manage.py agentops worker`.",
        )
    age = (clock.now() - seen).total_seconds()
    if age > max_age:
        return Check(
            "worker_heartbeat", False,
            f"No worker heartbeat for {age:.0f}s (limit {max_age:.0f}s): is a "
            "`manage.py agentops worker` (with its sweeper) running and able to reach the "
            "database?",
        )
    return Check("worker_heartbeat", True, f"A worker reported {age:.0f}s ago.")


def check_secret_key() -> Check:
    """Check SECRET_KEY is set, not the development key, and long enough in production."""
    key = settings.SECRET_KEY or ""
    if settings.DEBUG:
        return Check("secret_key", True, "DEBUG is on, so the development key is allowed.")
    if not key or key == DEV_SECRET_KEY:
        return Check(
            "secret_key", False,
            "SECRET_KEY is unset or the development default: set a long random SECRET_KEY in "
            "the environment (python -c 'import secrets; print(secrets.token_urlsafe(50))').",
        )
    if len(key) < 50 or len(set(key)) < 5:
        return Check(
            "secret_key", False, "SECRET_KEY is too short: use at least 50 random characters."
        )
    return Check("secret_key", True, "SECRET_KEY is set from the environment.")


def check_key_ring() -> Check:
    """Check the dedicated keys (seal, redaction, checkpoint) and the trusted-proxy setting."""
    problems = []
    try:
        trusted_proxies()
    except ValueError as exc:
        problems.append(str(exc))
    seal_keys = list(getattr(settings, "AGENTOPS_SEAL_KEYS", ()) or ())
    for key in seal_keys:
        try:
            Fernet(key)
        except ValueError:
            problems.append("an AGENTOPS_SEAL_KEYS entry is not a Fernet key (make one with "
                            "python -c 'from cryptography.fernet import Fernet; "
                            "print(Fernet.generate_key().decode())')")
    if not settings.DEBUG:
        if not seal_keys:
            problems.append("AGENTOPS_SEAL_KEYS is unset: sealed tool arguments depend on "
                            "SECRET_KEY, and rotating it would make them unreadable")
        if len(getattr(settings, "AGENTOPS_REDACTION_KEY", "") or "") < 32:
            problems.append("AGENTOPS_REDACTION_KEY is unset or under 32 characters")
        if not getattr(settings, "AGENTOPS_CHECKPOINT_KEYS", None):
            problems.append("AGENTOPS_CHECKPOINT_KEYS is unset: checkpoint exports are signed "
                            "with a key derived from SECRET_KEY")
    if problems:
        return Check("key_ring", False, "; ".join(problems) + ".")
    return Check("key_ring", True, "Seal, redaction and checkpoint keys are configured."
                 if not settings.DEBUG else "DEBUG is on, so derived keys are allowed.")


def check_allowed_hosts() -> Check:
    """Check ALLOWED_HOSTS names the real hosts when DEBUG is off."""
    hosts = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG:
        return Check("allowed_hosts", True, "DEBUG is on, so any host is allowed.")
    if not hosts or "*" in hosts:
        return Check(
            "allowed_hosts", False,
            "ALLOWED_HOSTS is empty or '*': set it to the host names users type, comma-separated.",
        )
    return Check("allowed_hosts", True, f"ALLOWED_HOSTS is {', '.join(hosts)}.")


def check_debug() -> Check:
    """Say whether DEBUG is on (fine on a laptop, wrong in production)."""
    if settings.DEBUG:
        return Check(
            "debug", True,
            "DEBUG is on: fine for the embedded demo, never in production (AGENTOPS_DEBUG=0).",
        )
    return Check("debug", True, "DEBUG is off.")


def check_https() -> Check:
    """Check the production security settings are on when DEBUG is off."""
    if settings.DEBUG:
        return Check("https", True, "DEBUG is on, so secure cookies and HSTS are off.")
    missing = [
        name for name in ("SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_HSTS_SECONDS")
        if not getattr(settings, name, None)
    ]
    if missing:
        return Check(
            "https", False,
            f"{', '.join(missing)} off with DEBUG off: settings.py must call "
            "agentops.settings_security.apply(globals(), debug=DEBUG).",
        )
    return Check("https", True, "Secure cookies and HSTS are on.")


def check_metrics_access() -> Check:
    """Check the /metrics allow list parses, and say who may scrape."""
    allow = list(getattr(settings, "AGENTOPS_METRICS_ALLOW", ["127.0.0.1", "::1"]))
    bad = []
    for entry in allow:
        try:
            ipaddress.ip_network(entry.strip(), strict=False)
        except ValueError:
            bad.append(entry)
    if bad:
        return Check(
            "metrics_access", False,
            f"AGENTOPS_METRICS_ALLOW has entries that are not addresses or networks: {bad}.",
        )
    token = "or with the bearer token" if getattr(settings, "AGENTOPS_METRICS_TOKEN", "") else (
        "(no AGENTOPS_METRICS_TOKEN set)"
    )
    who = ", ".join(allow) or "no address"
    return Check("metrics_access", True, f"/metrics answers {who} {token}.")


def check_redis() -> Check:
    """Check REDIS_URL answers a PING when it is set."""
    url = getattr(settings, "REDIS_URL", "")
    if not url:
        return Check("redis", True, "REDIS_URL is not set: live updates stay in one process.")

    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
        client.ping()
    except redis.RedisError as exc:
        return Check("redis", False, f"REDIS_URL is set but Redis does not answer: {exc}")
    return Check("redis", True, "Redis answers.")


def check_db_sessions() -> Check:
    """Check the configured hosts' maximum sessions fit PostgreSQL's max_connections."""
    conn = connections[DEFAULT_DB_ALIAS]
    if conn.vendor != "postgresql":
        return Check("db_sessions", True, f"The {conn.vendor} database has no session limit.")
    try:
        with conn.cursor() as cursor:
            cursor.execute("SHOW max_connections")
            limit = int(cursor.fetchone()[0])
    except DatabaseError as exc:
        return Check("db_sessions", False, f"Cannot read max_connections: {exc}")
    budget = session_budget()
    room, need = limit - budget.reserve, budget.web + budget.workers
    if pooled():
        return _pooled_sessions_check(need, room, limit)
    if web_sessions_max() <= 0:
        return Check("db_sessions", False, "AGENTOPS_WEB_DB_POOL_MAX=0: a web process's "
                     "sessions are unbounded (one per request thread); set it above 0.")
    sums = (f"{settings.AGENTOPS_WEB_PROCESSES} web process(es) x {web_sessions_max()} + "
            f"{settings.AGENTOPS_WORKER_HOSTS} worker host(s) x {worker_host_sessions_max()} "
            f"= {need} sessions; max_connections {limit} minus the reserve of "
            f"{budget.reserve} leaves {room}")
    if need > room:
        return Check("db_sessions", False, f"{sums}: raise max_connections, or lower "
                     "AGENTOPS_WEB_DB_POOL_MAX, AGENTOPS_DB_POOL_MAX or AGENTOPS_WORKERS "
                     "(docs/deploy.md, \"Database sessions\").")
    return Check("db_sessions", True, f"{sums}.")


def _pooled_sessions_check(need: int, room: int, limit: int) -> Check:
    """Behind a transaction pooler: PostgreSQL sees the pooler's server connections and one
    owner session per q2 process (runs.pooler); the pooler sees the client sessions."""
    owners = (int(settings.AGENTOPS_WORKER_HOSTS) * int(settings.Q_CLUSTER["workers"])
              if settings.AGENTOPS_DB_DIRECT_URL else 0)
    sums = (f"behind a transaction pooler: up to {need} client sessions go to the pooler "
            f"(its max_client_conn must exceed them), {owners} owner session(s) go straight "
            f"to PostgreSQL; max_connections {limit} minus the reserve leaves {room} for "
            f"those and the pooler's server connections (its max_db_connections)")
    if owners >= room:
        return Check("db_sessions", False, f"{sums}: raise max_connections or lower "
                     "AGENTOPS_WORKERS (docs/deploy.md, \"Behind PgBouncer\").")
    return Check("db_sessions", True, f"{sums}.")


def check_artifact_storage() -> Check:
    """Check the artifact storage accepts a write and a delete."""
    probe = f"_doctor/{uuid.uuid4().hex}"
    try:
        storage = storages["artifacts"]
        name = storage.save(probe, ContentFile(b"ok"))
        storage.delete(name)
    except Exception as exc:  # noqa: BLE001 - any storage backend error means "not writable"
        return Check(
            "artifact_storage", False,
            f"The artifact storage is not writable ({type(exc).__name__}: {exc}): check "
            "AGENTOPS_MEDIA_ROOT or STORAGES['artifacts'] and its permissions.",
        )
    return Check("artifact_storage", True, "The artifact storage is writable.")


def check_agents() -> Check:
    """Check every module in AGENTOPS_AGENTS imports."""
    modules = list(getattr(settings, "AGENTOPS_AGENTS", []))
    if not modules:
        return Check("agents", False, "AGENTOPS_AGENTS is empty: no agent can be started.")
    broken = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - report any import failure in words
            broken.append(f"{name} ({type(exc).__name__}: {exc})")
    if broken:
        return Check("agents", False, "These agent modules do not import: " + "; ".join(broken))
    return Check("agents", True, f"Agent modules import: {', '.join(modules)}.")


def check_agent_models() -> Check:
    """Check every registered agent has a model: its own ``model=`` or the model settings."""
    try:
        needing = sorted({a.name for a in registry.configured() if a.model is None})
    except Exception as exc:  # noqa: BLE001 - a broken agent module is check_agents' to name
        return Check("agent models", False, f"The agents cannot be read: {exc}")
    if not needing:
        return Check("agent models", True, "Every agent brings its own model.")
    try:
        model_from_settings()
    except ConfigError as exc:
        return Check("agent models", False,
                     f"{', '.join(needing)} declare no model= and use the AGENTOPS_MODEL_* "
                     f"settings, which are incomplete: {exc.message}")
    return Check("agent models", True,
                 f"{', '.join(needing)} use the model the AGENTOPS_MODEL_* settings describe.")


def check_sso_teams() -> Check:
    """Check every team AGENTOPS_OIDC_ROLE_MAP names exists (single sign-on skips the others)."""
    if not getattr(settings, "OIDC_RP_CLIENT_ID", ""):
        return Check("sso_teams", True, "Single sign-on is off.")
    role_map = getattr(settings, "AGENTOPS_OIDC_ROLE_MAP", {})
    named = {g.team for grants in role_map.values() for g in grants if g.team}
    missing = sorted(named - set(Team.objects.filter(slug__in=named)
                                 .values_list("slug", flat=True)))
    if missing:
        return Check("sso_teams", False,
                     f"AGENTOPS_OIDC_ROLE_MAP names teams that do not exist: "
                     f"{', '.join(missing)}; their roles are not given at sign-in. Create "
                     "the teams or fix the slugs.")
    return Check("sso_teams", True, f"Single sign-on maps groups to roles in "
                 f"{len(named)} team(s), all of which exist.")


def check_replica() -> Check:
    """Say whether the read replica answers and whether a failover could lose commits."""
    return Check(*replica_report())


def check_replica_sessions() -> Check:
    """Check the web processes' sessions on the read replica fit ITS max_connections."""
    return Check(*replica_sessions_report())


def readiness_checks() -> list[Check]:
    """Return the checks /readyz needs: database, migrations, a recent worker heartbeat."""
    database = check_database()
    if not database.ok:
        return [database]
    return [database, check_migrations(), check_worker_heartbeat()]


_ALL: tuple[Callable[[], Check], ...] = (
    check_debug,
    check_secret_key,
    check_key_ring,
    check_allowed_hosts,
    check_https,
    check_database,
    check_migrations,
    check_db_sessions,
    check_replica,
    check_replica_sessions,
    check_metrics_access,
    check_redis,
    check_artifact_storage,
    check_agents,
    check_agent_models,
    check_worker_heartbeat,
    check_sso_teams,
)
_NEED_DATABASE = frozenset({check_migrations, check_db_sessions, check_worker_heartbeat,
                            check_sso_teams, check_replica, check_replica_sessions})


def doctor_checks() -> list[Check]:
    """Run every configuration check and return their outcomes in a fixed order."""
    results: list[Check] = []
    for fn in _ALL:
        if fn in _NEED_DATABASE and not results[_ALL.index(check_database)].ok:
            name = fn.__name__.removeprefix("check_")
            results.append(Check(name, False, "Skipped: no database."))
        else:
            results.append(fn())
    return results

