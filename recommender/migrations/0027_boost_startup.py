from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("recommender", "0026_node_pools_from_nodes"),
    ]

    operations = [
        migrations.AddField(
            model_name="policy",
            name="startup_boost",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="workload",
            name="startup_boosted_pods",
            field=models.JSONField(blank=True, default=list),
        ),
    ]
