"""App config for approvals."""
from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    """Approvals: approvals, operator interventions, roles and audit."""

    name = "approvals"
    default_auto_field = "django.db.models.BigAutoField"
