"""App config for runs."""
from django.apps import AppConfig


class RunsConfig(AppConfig):
    """Runs: the run/step/event/snapshot models and the engine."""

    name = "runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Name this process's PostgreSQL sessions after it (release on death, see sweeper)."""
        from django.db.backends.signals import connection_created

        connection_created.connect(_name_session, dispatch_uid="agentops-session-name")


def _name_session(connection: object, **kwargs: object) -> None:
    # A lease owner is "host:pid" (runs.tasks.worker_name); a session named the same tells
    # the sweeper the owner is alive. A killed process's sessions vanish with it.
    if getattr(connection, "vendor", "") != "postgresql":
        return
    if connection.settings_dict["OPTIONS"].get("application_name"):  # type: ignore[attr-defined]
        return  # named at connect time (pooled worker processes, runs.slots.pool_enable)
    from runs.pooler import session_name

    # Behind a pooler: "pooled host:pid", tracked by PgBouncer per client (runs.pooler).
    with connection.cursor() as cur:  # type: ignore[attr-defined]
        cur.execute("SELECT set_config('application_name', %s, false)", [session_name()])
