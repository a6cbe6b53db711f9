# Existing keys and audit rows: their team, their role, their export number. Its own
# migration: PostgreSQL refuses the schema changes of 0007 in the transaction that updates rows.

from django.db import migrations
from django.db.models import F, Max, OuterRef, Subquery

_ORDER = ("admins", "operators", "support", "viewers")


def number_existing(apps, schema_editor):
    """Number the audit rows already written in id order: they are all committed."""
    Intervention = apps.get_model("approvals", "Intervention")
    AuditSequence = apps.get_model("approvals", "AuditSequence")
    Intervention.objects.update(seq=F("id"))
    last = Intervention.objects.aggregate(m=Max("id"))["m"] or 0
    AuditSequence.objects.create(pk=1, last_seq=last)


def name_teams(apps, schema_editor):
    """Give each audit row its run's team, or the team its data names (membership rows)."""
    Intervention = apps.get_model("approvals", "Intervention")
    Run = apps.get_model("runs", "Run")
    Team = apps.get_model("runs", "Team")
    Intervention.objects.filter(run__isnull=False).update(
        team_id=Subquery(Run.objects.filter(pk=OuterRef("run_id")).values("team_id")[:1]))
    for team in Team.objects.all():
        Intervention.objects.filter(run__isnull=True, data__team=team.slug).update(team=team)


def keys_to_default_team(apps, schema_editor):
    """Put every existing key in the default team with its owner's highest role there."""
    ApiKey = apps.get_model("approvals", "ApiKey")
    Membership = apps.get_model("approvals", "Membership")
    Team = apps.get_model("runs", "Team")
    team, _ = Team.objects.get_or_create(slug="default", defaults={"name": "Default team"})
    for key in ApiKey.objects.select_related("user"):
        held = set(key.user.groups.values_list("name", flat=True))
        held |= set(Membership.objects.filter(user=key.user, team=team)
                    .values_list("role", flat=True))
        if key.user.is_superuser:
            held.add("admins")
        key.team = team
        # An owner with no role keeps a viewer key that is refused until they get one.
        key.role = next((r for r in _ORDER if r in held), "viewers")
        key.save(update_fields=["team", "role"])


class Migration(migrations.Migration):

    dependencies = [
        ('approvals', '0008_audit_export_scoped_keys'),
        ('runs', '0016_team'),
    ]

    operations = [
        migrations.RunPython(number_existing, migrations.RunPython.noop),
        migrations.RunPython(name_teams, migrations.RunPython.noop),
        migrations.RunPython(keys_to_default_team, migrations.RunPython.noop),
    ]
