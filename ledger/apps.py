"""App config for the ledger."""
from django.apps import AppConfig


class LedgerConfig(AppConfig):
    """Ledger: tool calls, attempts and artifacts."""

    name = "ledger"
    default_auto_field = "django.db.models.BigAutoField"
