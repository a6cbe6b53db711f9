"""Tool limits (and their breakers) belong to a team: existing ones land in the default team."""

import django.db.models.deletion
from django.db import migrations, models

import runs.models.team


def to_default_team(apps, schema_editor):
    team, _ = apps.get_model("runs", "Team").objects.get_or_create(
        slug="default", defaults={"name": "Default team"})
    apps.get_model("ledger", "ToolLimit").objects.filter(team__isnull=True).update(team=team)


class Migration(migrations.Migration):

    dependencies = [
        ('ledger', '0007_step_cost'),
        ('runs', '0016_team'),
    ]

    operations = [
        migrations.AddField(
            model_name='toollimit',
            name='team',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name='tool_limits', to='runs.team'),
        ),
        migrations.RunPython(to_default_team, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='toollimit',
            name='team',
            field=models.ForeignKey(default=runs.models.team.default_team_id, on_delete=django.db.models.deletion.PROTECT, related_name='tool_limits', to='runs.team'),
        ),
        migrations.AlterField(
            model_name='toollimit',
            name='tool',
            field=models.CharField(max_length=100),
        ),
        migrations.AddConstraint(
            model_name='toollimit',
            constraint=models.UniqueConstraint(fields=('team', 'tool'), name='toollimit_unique_per_team'),
        ),
    ]
