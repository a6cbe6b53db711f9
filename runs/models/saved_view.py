"""A run-list view a user saved under a name: the list's query string, validated on save."""
from __future__ import annotations

from django.conf import settings
from django.db import models


class SavedView(models.Model):
    """One user's named filter set for the run list (``query`` is a canonical query string)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="saved_views")
    # The team whose runs it filters; null = every team the user sees. Hidden once they leave it.
    team = models.ForeignKey("runs.Team", null=True, blank=True, on_delete=models.CASCADE,
                             related_name="+")
    name = models.CharField(max_length=80)
    query = models.CharField(max_length=2000)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["user", "name"]
        constraints = [
            models.UniqueConstraint(fields=["user", "name"], name="saved_view_unique_name"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.query})"
