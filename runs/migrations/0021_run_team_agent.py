"""The queue's agent filter lists a team's agent names by index probes (a loose index scan,
runs.selectors_lists.run_agent_names): an index on (team, agent_name), which also serves every
lookup by team, replaces the team foreign key's own index, so a run still writes one index
entry for its team. Made first, dropped second: lookups by team always have an index.
"""

import django.db.models.deletion
from django.db import migrations, models

import runs.models.team


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0020_run_stuck_order"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["team", "agent_name"], name="run_team_agent"),
        ),
        migrations.AlterField(
            model_name="run",
            name="team",
            field=models.ForeignKey(db_index=False, default=runs.models.team.default_team_id,
                                    on_delete=django.db.models.deletion.PROTECT,
                                    related_name="runs", to="runs.team"),
        ),
    ]
