"""Decide-and-next's order (the oldest stuck run after this one) gets an index of its own."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0019_lease_renewal_hot"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                condition=models.Q(("status__in", ["blocked", "unknown"])),
                fields=["updated_at", "id"],
                name="run_stuck_order",
            ),
        ),
    ]
