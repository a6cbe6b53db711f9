"""Time-ordered run ids; the (run, type, seq) event index leaves out the per-step types."""

import agentops.clock
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0009_saved_views'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='event',
            name='event_run_type',
        ),
        migrations.AlterField(
            model_name='run',
            name='id',
            field=models.UUIDField(default=agentops.clock.new_uuid, editable=False, primary_key=True, serialize=False),
        ),
        migrations.AddIndex(
            model_name='event',
            index=models.Index(condition=models.Q(('type__in', ('model.replied', 'model.requested', 'tool.result')), _negated=True), fields=['run', 'type', 'seq'], name='event_run_type'),
        ),
    ]
