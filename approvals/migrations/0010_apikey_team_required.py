# Every key has a team now (0008 put existing ones in the default team).

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('approvals', '0009_scoped_keys_data'),
        ('runs', '0016_team'),
    ]

    operations = [
        migrations.AlterField(
            model_name='apikey',
            name='team',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='api_keys', to='runs.team'),
        ),
        migrations.AlterField(
            model_name='apikey',
            name='role',
            field=models.CharField(choices=[('viewers', 'viewers'), ('operators', 'operators'), ('support', 'support'), ('admins', 'admins')], max_length=20),
        ),
    ]
