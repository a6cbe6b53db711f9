"""The (run, type, seq) event index leaves out the per-step types (written on every step)."""

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
        migrations.AddIndex(
            model_name='event',
            index=models.Index(condition=models.Q(('type__in', ('model.replied', 'model.requested', 'tool.result')), _negated=True), fields=['run', 'type', 'seq'], name='event_run_type'),
        ),
    ]
