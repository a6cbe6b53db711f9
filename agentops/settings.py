"""Django settings for AgentOps, read from environment variables.

The default is the embedded set-up: a SQLite file in WAL mode under var/, django-q2's ORM broker
and an in-memory channel layer. Production sets DATABASE_URL (PostgreSQL) and REDIS_URL.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import dj_database_url

from agentops import settings_q2, settings_security, settings_sso
from agentops.observability.logging import logging_config
from agentops.pricing import prices_from_setting
from approvals.audit_declared import sink_from_setting
from approvals.notify.declared import channels_from_setting

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("AGENTOPS_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return raw.strip().lower() in {"1", "true", "yes", "on"}


def _env_number(name: str, default: float, kind: type[int] | type[float]) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return kind(raw)
    except ValueError as exc:
        what = "an integer" if kind is int else "a number"
        raise ValueError(f"{name} must be {what}, got {raw!r}") from exc


def _env_int(name: str, default: int) -> int:
    return int(_env_number(name, default, int))


def _env_float(name: str, default: float) -> float:
    return float(_env_number(name, default, float))


DEBUG = _env_bool("AGENTOPS_DEBUG", True)
SECRET_KEY = os.environ.get("SECRET_KEY") or (
    "dev-only-insecure-key-set-SECRET_KEY-in-production" if DEBUG else ""
)
if not SECRET_KEY:
    raise ValueError("SECRET_KEY must be set when AGENTOPS_DEBUG is off")
ALLOWED_HOSTS = [h for h in os.environ.get("ALLOWED_HOSTS", "*").split(",") if h]
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o]

# A worker host (``manage.py agentops worker``) serves no HTTP: daphne's app (its runserver,
# and the Twisted reactor, TLS and websocket modules it imports: ~45 MB in each of the host's
# processes, docs/workers.md "Memory") is left out of its processes.
_WORKER_HOST = sys.argv[1:3] == ["agentops", "worker"]
INSTALLED_APPS = [
    *([] if _WORKER_HOST else ["daphne"]),
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    *([] if _WORKER_HOST else ["ninja"]),
    "template_partials",
    "django_q",
    "channels",
    "runs",
    "ledger",
    "approvals",
    "agentops",
    "agentops.demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Read pages from the replica when one is set (AGENTOPS_REPLICA_URL); a no-op without.
    "agentops.replica.middleware.ReplicaReadsMiddleware",
]

ROOT_URLCONF = "agentops.urls"
ASGI_APPLICATION = "agentops.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "agentops.context_processors.console",
            ],
        },
    },
]

_default_db = f"sqlite:///{VAR_DIR / 'agentops.sqlite3'}"
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", _default_db),
        conn_max_age=_env_int("DB_CONN_MAX_AGE", 600),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the console read while a worker writes; IMMEDIATE takes the write lock at BEGIN
    # so two writers queue on busy_timeout instead of failing with "database is locked".
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0 if "test" in os.environ.get("AGENTOPS_ENV", "") else 600
if "TEST" not in DATABASES["default"] and os.environ.get("TEST_DATABASE_NAME"):
    DATABASES["default"]["TEST"] = {"NAME": os.environ["TEST_DATABASE_NAME"]}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# The attention-count index INCLUDEs the id on PostgreSQL; SQLite just ignores INCLUDE.
SILENCED_SYSTEM_CHECKS = ["models.W040"]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
if "test" in os.environ.get("AGENTOPS_ENV", ""):
    # Tests only: PBKDF2 is slow on purpose, and hashing every fixture user's password cost
    # the view tests 5-11 s of set-up. Never outside AGENTOPS_ENV=test.
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGIN_URL = "console:login"
LOGIN_REDIRECT_URL = "console:queue"
LOGOUT_REDIRECT_URL = "console:login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns about a missing root
MEDIA_ROOT = Path(os.environ.get("AGENTOPS_MEDIA_ROOT", VAR_DIR / "media"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    # Artifacts live in their own storage so production can point it at object storage.
    "artifacts": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(MEDIA_ROOT / "artifacts")},
    },
}

REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

_q_timeout = _env_int("AGENTOPS_Q_TIMEOUT", 600)
# django-q2: our engine owns retries, timeouts and leases. q2 must never re-run a tick on its
# own schedule (a redelivered tick is harmless, but a q2 retry racing our sweeper wastes work),
# so retry is set far beyond timeout and max_attempts=1; the time slice of a tick
# (AGENTOPS_TICK_SLICE_S) is well under q2's timeout.
AGENTOPS_TICK_SLICE_S = _env_float("AGENTOPS_TICK_SLICE_S", 20.0)
# Tests and scripts that drive ticks themselves turn queueing off.
AGENTOPS_ENQUEUE_TICKS = _env_bool("AGENTOPS_ENQUEUE_TICKS", True)
# On PostgreSQL a lease holder's unit is one SQL statement (runs/engine/runtime/unit_sql.py); off = ORM.
AGENTOPS_UNIT_SQL = _env_bool("AGENTOPS_UNIT_SQL", True)
# ... and a progress unit is sent without waiting for its commit: the worker computes the next
# unit meanwhile (runs/engine/runtime/unit_overlap.py); off = every unit waits for its commit.
AGENTOPS_UNIT_OVERLAP = _env_bool("AGENTOPS_UNIT_OVERLAP", True)
# How many such units may be in flight on one connection, unread (libpq's pipeline mode, each its
# own transaction); 1 = each is read before the next goes out.
AGENTOPS_UNITS_IN_FLIGHT = _env_int("AGENTOPS_UNITS_IN_FLIGHT", 2)
if AGENTOPS_UNITS_IN_FLIGHT < 1:
    raise ValueError(f"AGENTOPS_UNITS_IN_FLIGHT must be at least 1 (1: each unit is read before "
                     f"the next goes out), got {AGENTOPS_UNITS_IN_FLIGHT}")
# The bound of a quick read (ms): a reply asking only for reads of tools this process saw
# take at most this long commits once with their results, before the next model call; else
# a read's result rides the run's next unit when the read and the run's last model call
# each took at most this long; 0: every result commits on its own
# (runs/engine/runtime/read_rides.py).
AGENTOPS_READ_RIDE_MS = _env_int("AGENTOPS_READ_RIDE_MS", 50)
Q_CLUSTER = settings_q2.q_cluster(
    timeout=_q_timeout, workers=_env_int("AGENTOPS_WORKERS", 2),
    recycle=_env_int("AGENTOPS_Q_RECYCLE", 1_000_000),
    redis_url=REDIS_URL if os.environ.get("AGENTOPS_Q_BROKER") == "redis" else "")

# Engine settings (documented in docs/settings.md).
AGENTOPS_AGENTS = [
    m for m in os.environ.get("AGENTOPS_AGENTS", "agentops.demo.agents").split(",") if m
]
# A silent worker's runs are taken over this long after its last renewal (every TTL / 3).
AGENTOPS_LEASE_TTL_S = _env_float("AGENTOPS_LEASE_TTL_S", 1.5)
# Runs one q2 worker process keeps in flight (runs.slots): a run waiting for its model or a
# tool holds a thread, not a process nor a database connection. SQLite serialises writers:
# one run per process there.
_is_pg = DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
AGENTOPS_RUNS_IN_FLIGHT = _env_int("AGENTOPS_RUNS_IN_FLIGHT", 250 if _is_pg else 1)
# A streaming standby of DATABASE_URL the console's lists, counts, search and history read
# (agentops.replica, docs/deploy.md "Read replica"); every write, lease and engine read stays
# on the primary. Empty = none.
AGENTOPS_REPLICA_URL = os.environ.get("AGENTOPS_REPLICA_URL", "").strip()
if AGENTOPS_REPLICA_URL:
    if not _is_pg:
        raise ValueError("AGENTOPS_REPLICA_URL needs a PostgreSQL DATABASE_URL")
    DATABASES["replica"] = dj_database_url.parse(
        AGENTOPS_REPLICA_URL, conn_max_age=DATABASES["default"]["CONN_MAX_AGE"],
        conn_health_checks=True)
    if DATABASES["replica"]["ENGINE"] != "django.db.backends.postgresql":
        raise ValueError("AGENTOPS_REPLICA_URL must be a postgres:// URL, got "
                         f"{AGENTOPS_REPLICA_URL!r}")
    # A replica that does not answer costs a page this long before it reads the primary
    # (and one page per 5 s after that, agentops.replica.probe). A web process pools it
    # (agentops.db_budget) and waits this long for one of the pool's connections, no longer.
    DATABASES["replica"].setdefault("OPTIONS", {}).setdefault("connect_timeout", 2)
    # A test run makes no second test database: the replica alias is the primary's there.
    DATABASES["replica"]["TEST"] = {"MIRROR": "default"}
DATABASE_ROUTERS = ["agentops.replica.router.ReplicaRouter"]
# PostgreSQL connections per worker process shared by its run slots (psycopg pool); 0 = none.
AGENTOPS_DB_POOL_MAX = _env_int("AGENTOPS_DB_POOL_MAX", 8)
AGENTOPS_DB_POOL_TIMEOUT_S = _env_float("AGENTOPS_DB_POOL_TIMEOUT_S", 60.0)
# Each pool closes one idle connection above its minimum per this many seconds.
AGENTOPS_DB_POOL_IDLE_S = _env_float("AGENTOPS_DB_POOL_IDLE_S", 10.0)
# A web (daphne) process's pool: its maximum sessions (agentops.db_budget); 0 = no pool.
AGENTOPS_WEB_DB_POOL_MAX = _env_int("AGENTOPS_WEB_DB_POOL_MAX", 20)
# Monthly event partitions kept made ahead of this month (runs.partitions; PostgreSQL).
AGENTOPS_EVENT_PARTITIONS_AHEAD = _env_int("AGENTOPS_EVENT_PARTITIONS_AHEAD", 3)
if AGENTOPS_EVENT_PARTITIONS_AHEAD < 1:
    raise ValueError("AGENTOPS_EVENT_PARTITIONS_AHEAD must be at least 1")
# The S3-compatible store archived event partitions go to (runs.event_archive); empty = none.
# Credentials come the way boto3 reads them (AWS_ACCESS_KEY_ID, a profile, a role).
AGENTOPS_ARCHIVE_S3_BUCKET = os.environ.get("AGENTOPS_ARCHIVE_S3_BUCKET", "").strip()
AGENTOPS_ARCHIVE_S3_ENDPOINT_URL = os.environ.get("AGENTOPS_ARCHIVE_S3_ENDPOINT_URL", "").strip()
AGENTOPS_ARCHIVE_S3_PREFIX = os.environ.get("AGENTOPS_ARCHIVE_S3_PREFIX", "agentops/events/")
# A transaction-mode pooler (PgBouncer) in front of PostgreSQL: nothing relies on a session
# outliving its transaction (runs.pooler, docs/deploy.md "Behind PgBouncer").
AGENTOPS_DB_POOLER = os.environ.get("AGENTOPS_DB_POOLER", "").strip().lower()
if AGENTOPS_DB_POOLER not in {"", "transaction"}:
    raise ValueError(f"AGENTOPS_DB_POOLER must be empty (no pooler) or 'transaction', "
                     f"got {AGENTOPS_DB_POOLER!r}")
if AGENTOPS_DB_POOLER and not _is_pg:
    raise ValueError("AGENTOPS_DB_POOLER=transaction needs a PostgreSQL DATABASE_URL")
if AGENTOPS_DB_POOLER:
    # Django's .iterator() holds a named cursor across statements: not through a pooler.
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
# Behind the pooler: PostgreSQL itself, for the one session per worker process that tells
# the sweeper its owner is alive (release on death). Empty: runs wait out their lease TTL.
AGENTOPS_DB_DIRECT_URL = os.environ.get("AGENTOPS_DB_DIRECT_URL", "")
# What `agentops doctor` adds up against max_connections (docs/deploy.md "Sessions").
AGENTOPS_WEB_PROCESSES = _env_int("AGENTOPS_WEB_PROCESSES", 1)
AGENTOPS_WORKER_HOSTS = _env_int("AGENTOPS_WORKER_HOSTS", 1)
AGENTOPS_DB_RESERVE = _env_int("AGENTOPS_DB_RESERVE", 10)
AGENTOPS_SWEEP_INTERVAL_S = _env_float("AGENTOPS_SWEEP_INTERVAL_S", 1.0)
# How often a worker host's recoverer reads the server's session names to notice a dead
# worker (runs.recoverer); expired leases it recovers at their expiry, not on this beat.
AGENTOPS_RECOVERY_CHECK_S = _env_float("AGENTOPS_RECOVERY_CHECK_S", 0.2)
if not 0 < AGENTOPS_RECOVERY_CHECK_S <= 60:
    raise ValueError("AGENTOPS_RECOVERY_CHECK_S must be in (0, 60] seconds, got "
                     f"{AGENTOPS_RECOVERY_CHECK_S!r}")
# A busy tick looks this often whether a recovered run waits for a worker; one that has
# waited longer than the grace (an idle worker would have taken it) makes the tick yield.
AGENTOPS_YIELD_CHECK_S = _env_float("AGENTOPS_YIELD_CHECK_S", 0.25)
AGENTOPS_URGENT_GRACE_S = _env_float("AGENTOPS_URGENT_GRACE_S", 0.3)
# A run that waited at least this long re-checks its requester and resource versions before it
# goes on (runs.engine.runtime.world); a recovered run always does.
AGENTOPS_WORLD_RECHECK_AFTER_S = _env_float("AGENTOPS_WORLD_RECHECK_AFTER_S", 60.0)
# A write tool without its own timeout gets this one: with the lease TTL it bounds how long
# an attempt may still be in flight (its hard deadline, see docs/workers.md "Fencing").
AGENTOPS_TOOL_TIMEOUT_S = _env_float("AGENTOPS_TOOL_TIMEOUT_S", 300.0)
# Tool threads stuck past their hard deadline a worker process may hold before it is
# replaced (runs.hung_threads); 0 = never.
AGENTOPS_HUNG_THREADS_MAX = _env_int("AGENTOPS_HUNG_THREADS_MAX", 2)
AGENTOPS_RECOVERY_LIMIT = _env_int("AGENTOPS_RECOVERY_LIMIT", 5)
AGENTOPS_STEP_RETRY_LIMIT = _env_int("AGENTOPS_STEP_RETRY_LIMIT", 3)
# Failed attempts (step retries and tool attempts) across all of a run's steps before it
# blocks with failure_budget; 0 = no run-level limit. An agent's Budget or policy wins.
AGENTOPS_RUN_FAILURE_LIMIT = _env_int("AGENTOPS_RUN_FAILURE_LIMIT", 10)
# What a run past its deadline does: "block" (for a person) or "terminate" (compensate what
# can be undone, then end it, as the system). An agent's Budget or policy wins.
AGENTOPS_DEADLINE_POLICY = os.environ.get("AGENTOPS_DEADLINE_POLICY", "block").strip().lower()
if AGENTOPS_DEADLINE_POLICY not in ("block", "terminate"):
    raise ValueError("AGENTOPS_DEADLINE_POLICY must be block or terminate, got "
                     f"{AGENTOPS_DEADLINE_POLICY!r}")
AGENTOPS_BACKOFF_BASE_S = _env_float("AGENTOPS_BACKOFF_BASE_S", 1.0)
AGENTOPS_BACKOFF_CAP_S = _env_float("AGENTOPS_BACKOFF_CAP_S", 300.0)
# Backoffs shorter than this are retried in the same tick instead of a durable timer wait.
AGENTOPS_INLINE_BACKOFF_S = _env_float("AGENTOPS_INLINE_BACKOFF_S", 0.05)
AGENTOPS_INLINE_RESULT_BYTES = _env_int("AGENTOPS_INLINE_RESULT_BYTES", 8_000)
# A run's working set (state + tool results held) may use this share of the process's memory
# limit (agentops.memory; AGENTOPS_MEMORY_LIMIT_BYTES = 0 detects it) before its run blocks.
AGENTOPS_MEMORY_SHARE = _env_float("AGENTOPS_MEMORY_SHARE", 0.30)
AGENTOPS_MEMORY_LIMIT_BYTES = _env_int("AGENTOPS_MEMORY_LIMIT_BYTES", 0)
# The model an Agent without model= gets (agentops.llm.configured; docs/sdk.md "Models").
AGENTOPS_MODEL_PROVIDER = os.environ.get("AGENTOPS_MODEL_PROVIDER", "openai")
AGENTOPS_MODEL_BASE_URL = os.environ.get("AGENTOPS_MODEL_BASE_URL", "")
AGENTOPS_MODEL_API_KEY = os.environ.get("AGENTOPS_MODEL_API_KEY", "")
AGENTOPS_MODEL_NAME = os.environ.get("AGENTOPS_MODEL_NAME", "")
AGENTOPS_MODEL_TIMEOUT_S = _env_float("AGENTOPS_MODEL_TIMEOUT_S", 60.0)
AGENTOPS_MODEL_CONTEXT_WINDOW = _env_int("AGENTOPS_MODEL_CONTEXT_WINDOW", 8192)
# Prices per million tokens in dollars, JSON: {"gpt-4o-mini": {"input": 0.15, "output": 0.6}};
# "*" prices every other model. Rows on the console's settings page override these.
AGENTOPS_MODEL_PRICES = prices_from_setting(os.environ.get("AGENTOPS_MODEL_PRICES", ""))
AGENTOPS_MODEL_TOOL_CHOICE = os.environ.get("AGENTOPS_MODEL_TOOL_CHOICE", "auto")
AGENTOPS_MODEL_FORCE_TURNS = _env_int("AGENTOPS_MODEL_FORCE_TURNS", 2)
AGENTOPS_MODEL_STRICT_TOOLS = _env_bool("AGENTOPS_MODEL_STRICT_TOOLS", False)
AGENTOPS_MODEL_REPAIR_TURNS = _env_int("AGENTOPS_MODEL_REPAIR_TURNS", 1)
AGENTOPS_MODEL_STREAM = _env_bool("AGENTOPS_MODEL_STREAM", False)
AGENTOPS_MODEL_MAX_TOKENS = _env_int("AGENTOPS_MODEL_MAX_TOKENS", 0)
# Console pages poll every N seconds as a fallback to live updates over websockets; 0 = off.
AGENTOPS_CONSOLE_POLL_S = _env_float("AGENTOPS_CONSOLE_POLL_S", 5.0)
# MCP servers whose declared tools agents mount (agentops.mcp_tools.mcp_tools_from_settings):
# {"name": {"command": [...] | "url": "...", "env": {...}, "tools": {tool: options}}}.
AGENTOPS_MCP_SERVERS: dict = {}
# Decision links in approval messages (approvals.links, docs/decision-links.md): the site's
# public base URL, how long a link works, and the Slack-compatible interaction endpoint.
AGENTOPS_SITE_URL = os.environ.get("AGENTOPS_SITE_URL", "http://localhost:8000")
AGENTOPS_DECISION_LINK_MAX_AGE_S = _env_int("AGENTOPS_DECISION_LINK_MAX_AGE_S", 24 * 3600)
AGENTOPS_SLACK_SIGNING_SECRET = os.environ.get("AGENTOPS_SLACK_SIGNING_SECRET", "")
# {"<Slack user id>": "<AgentOps username>"}; unmapped Slack users are matched by email.
AGENTOPS_SLACK_USERS: dict = json.loads(os.environ.get("AGENTOPS_SLACK_USERS") or "{}")
# Per-user API rate limit, e.g. "600/m"; unset means no limit.
AGENTOPS_API_RATE = os.environ.get("AGENTOPS_API_RATE") or None

# Notifications (docs/notifications.md): channels declared once, as JSON
# {"name": {"kind": "email" | "slack" | "webhook", "url": "...", "secret": "..."}}; none
# declared = console only. Links in messages start with AGENTOPS_SITE_URL.
AGENTOPS_NOTIFY_CHANNELS = channels_from_setting(os.environ.get("AGENTOPS_NOTIFY_CHANNELS", ""))
AGENTOPS_NOTIFY_TIMEOUT_S = _env_float("AGENTOPS_NOTIFY_TIMEOUT_S", 10.0)
AGENTOPS_NOTIFY_CLAIM_S = _env_float("AGENTOPS_NOTIFY_CLAIM_S", 60.0)
AGENTOPS_NOTIFY_MAX_ATTEMPTS = _env_int("AGENTOPS_NOTIFY_MAX_ATTEMPTS", 8)
AGENTOPS_NOTIFY_BACKOFF_S = _env_float("AGENTOPS_NOTIFY_BACKOFF_S", 5.0)
# Audit stream (docs/audit.md): every audit row to a webhook (signed with the secret) or a
# syslog receiver ("syslog+tcp://host:port", "syslog://host:port" for UDP); empty = off.
AGENTOPS_AUDIT_SINK = os.environ.get("AGENTOPS_AUDIT_SINK", "").strip()
AGENTOPS_AUDIT_SINK_SECRET = os.environ.get("AGENTOPS_AUDIT_SINK_SECRET", "")
sink_from_setting(AGENTOPS_AUDIT_SINK, AGENTOPS_AUDIT_SINK_SECRET)  # a bad one stops start-up
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = _env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = _env_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = AGENTOPS_NOTIFY_TIMEOUT_S
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "agentops@localhost")
# OpenTelemetry traces (docs/observability.md): off unless an OTLP/HTTP endpoint is set.
AGENTOPS_OTLP_ENDPOINT = os.environ.get("AGENTOPS_OTLP_ENDPOINT", "").strip()
if AGENTOPS_OTLP_ENDPOINT and not AGENTOPS_OTLP_ENDPOINT.startswith(("http://", "https://")):
    raise ValueError("AGENTOPS_OTLP_ENDPOINT must be an OTLP/HTTP base URL such as "
                     f"http://otel-collector:4318, got {AGENTOPS_OTLP_ENDPOINT!r}")
AGENTOPS_OTEL_SERVICE_NAME = os.environ.get("AGENTOPS_OTEL_SERVICE_NAME", "agentops")
# Prompts and replies on model-call spans and in the run (redacted): opt-in.
AGENTOPS_TRACE_CONTENT = _env_bool("AGENTOPS_TRACE_CONTENT", False)

LOGGING = logging_config(json=_env_bool("AGENTOPS_LOG_JSON", False),
                         level=os.environ.get("LOG_LEVEL", "WARNING"))

# Production security (secure cookies, HSTS, CSP, login throttling, whitenoise): see
# agentops/settings_security.py and docs/security.md.
settings_security.apply(globals(), debug=DEBUG)
# Single sign-on with OpenID Connect, off unless AGENTOPS_OIDC_CLIENT_ID is set (docs/sso.md).
settings_sso.apply(globals(), os.environ)
