from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("recommender", "0019_h26_node_pools_schedule"),
    ]

    operations = [
        migrations.AddField(
            model_name="checkpoint",
            name="read_through_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="checkpoint",
            name="unsettled_samples",
            field=models.BigIntegerField(default=0),
        ),
    ]
