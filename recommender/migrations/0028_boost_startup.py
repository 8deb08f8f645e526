from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("recommender", "0027_actuation_webhook_acks_in_place_mode"),
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
