from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("recommender", "0017_h23d_written_state"),
    ]

    operations = [
        migrations.AddField(
            model_name="workload",
            name="price_per_core_hour",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="workload",
            name="price_per_gib_hour",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="workload",
            name="price_source",
            field=models.CharField(blank=True, default="default", max_length=16),
        ),
    ]
