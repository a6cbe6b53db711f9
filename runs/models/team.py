"""Teams: who owns runs. Every run belongs to one team; people hold roles per team."""
from __future__ import annotations

from django.db import models

DEFAULT_TEAM_SLUG = "default"


class Team(models.Model):
    """A group of people and the runs, approvals, keys and settings they own."""

    slug = models.SlugField(max_length=50, unique=True,
                            help_text="short name used in URLs, claims and the CLI")
    name = models.CharField(max_length=100)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


def default_team_id() -> int:
    """Return the id of the default team (made if a flushed test database lost it)."""
    return Team.objects.get_or_create(slug=DEFAULT_TEAM_SLUG,
                                      defaults={"name": "Default team"})[0].pk
