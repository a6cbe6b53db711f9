"""The demo app: a sandbox outside world whose table records every side effect."""
from django.apps import AppConfig


class DemoConfig(AppConfig):
    """App label ``demo``: WorldEffect, the demo agents' outside world."""

    name = "agentops.demo"
    label = "demo"
    verbose_name = "Demo world"
    default_auto_field = "django.db.models.BigAutoField"
