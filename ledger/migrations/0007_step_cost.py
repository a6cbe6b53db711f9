"""Fewer index entries per tool call: (run, key) unique, the tool index only for running calls.

The key hashes its run's id, so unique per run is the same rule; the new constraint is made
before the old one goes, so a duplicate key is refused throughout.
"""
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('ledger', '0006_honest_outcome'),
        ('runs', '0010_step_cost'),
    ]

    operations = [
        migrations.AddConstraint(
            model_name='toolcall',
            constraint=models.UniqueConstraint(fields=('run', 'idempotency_key'), name='toolcall_unique_run_key'),
        ),
        migrations.AddIndex(
            model_name='toolcall',
            index=models.Index(condition=models.Q(('status', 'running')), fields=['tool'], name='toolcall_tool_running'),
        ),
        migrations.RemoveConstraint(
            model_name='toolcall',
            name='toolcall_unique_key',
        ),
        migrations.RemoveIndex(
            model_name='toolcall',
            name='toolcall_run_status',
        ),
        migrations.RemoveIndex(
            model_name='toolcall',
            name='toolcall_tool_status',
        ),
    ]
