"""App config for runs."""
from django.apps import AppConfig


class RunsConfig(AppConfig):
    """Runs: the run/step/event/snapshot models and the engine."""

    name = "runs"
    default_auto_field = "django.db.models.BigAutoField"
