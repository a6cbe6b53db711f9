"""Teams own runs: the team ``default`` is made and every existing run lands in it."""

import django.db.models.deletion
from django.db import migrations, models

import runs.models.team


def default_team_create(apps, schema_editor):
    Team = apps.get_model("runs", "Team")
    team, _ = Team.objects.get_or_create(slug="default", defaults={"name": "Default team"})
    apps.get_model("runs", "Run").objects.filter(team__isnull=True).update(team=team)


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0015_block_reason_memory_budget'),
    ]

    operations = [
        migrations.CreateModel(
            name='Team',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('slug', models.SlugField(help_text='short name used in URLs, claims and the CLI', unique=True)),
                ('name', models.CharField(max_length=100)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'ordering': ['slug'],
            },
        ),
        migrations.AddField(
            model_name='run',
            name='team',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name='runs', to='runs.team'),
        ),
        migrations.RunPython(default_team_create, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='run',
            name='team',
            field=models.ForeignKey(default=runs.models.team.default_team_id, on_delete=django.db.models.deletion.PROTECT, related_name='runs', to='runs.team'),
        ),
    ]
