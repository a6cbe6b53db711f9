"""A lease renewal updates the run row in place (a HOT update) on PostgreSQL.

A renewal changes only ``lease_expires_at``. While that column was indexed
(``run_lease_expiry``), every renewal wrote a new entry into each of the run table's
indexes; unindexed, PostgreSQL can update the row in place when its page has room, which
``fillfactor`` keeps (new pages are filled to 80 %; existing pages get room as rows move
or after a ``VACUUM FULL``). The expired-lease sweep reads running runs through the
``status`` prefix of ``run_status_updated`` instead (bounded by the runs in flight).
SQLite has no fillfactor: there only the index goes.
"""

from django.db import migrations

FILLFACTOR = 80


def fillfactor(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE runs_run SET (fillfactor = {FILLFACTOR})")


def fillfactor_reset(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE runs_run RESET (fillfactor)")


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0018_event_partitions"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="run", name="run_lease_expiry"),
        migrations.RunPython(fillfactor, fillfactor_reset),
    ]
