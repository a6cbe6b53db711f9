"""Budget policies and saved views belong to a team: existing ones land in the default team."""

import django.db.models.deletion
from django.db import migrations, models

import runs.models.team


def to_default_team(apps, schema_editor):
    team, _ = apps.get_model("runs", "Team").objects.get_or_create(
        slug="default", defaults={"name": "Default team"})
    for model in ("BudgetPolicy", "SavedView"):
        apps.get_model("runs", model).objects.filter(team__isnull=True).update(team=team)


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0016_team'),
    ]

    operations = [
        migrations.AddField(
            model_name='budgetpolicy',
            name='team',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name='budget_policies', to='runs.team'),
        ),
        migrations.AddField(
            model_name='savedview',
            name='team',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.team'),
        ),
        migrations.RunPython(to_default_team, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='budgetpolicy',
            name='team',
            field=models.ForeignKey(default=runs.models.team.default_team_id, on_delete=django.db.models.deletion.PROTECT, related_name='budget_policies', to='runs.team'),
        ),
        migrations.AlterField(
            model_name='budgetpolicy',
            name='agent_name',
            field=models.CharField(blank=True, max_length=100),
        ),
        migrations.AddConstraint(
            model_name='budgetpolicy',
            constraint=models.UniqueConstraint(fields=('team', 'agent_name'), name='budget_policy_unique_per_team'),
        ),
    ]
