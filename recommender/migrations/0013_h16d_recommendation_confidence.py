from django.db import migrations, models

BATCH = 1000


def fill_confidence(apps, schema_editor):
    """The confidence of every container's latest recommendation (the rows the
    overview's confidence bands read), from its explanation; older rows keep None."""
    from recommender.models.recommendation import confidence_of

    Container = apps.get_model("recommender", "Container")
    Recommendation = apps.get_model("recommender", "Recommendation")
    ids = list(
        Container.objects.filter(latest_recommendation__isnull=False)
        .order_by("latest_recommendation_id")
        .values_list("latest_recommendation_id", flat=True)
    )
    for start in range(0, len(ids), BATCH):
        rows = list(
            Recommendation.objects.filter(pk__in=ids[start : start + BATCH]).only(
                "pk", "explanation"
            )
        )
        for rec in rows:
            rec.confidence = confidence_of(rec.explanation)
        Recommendation.objects.bulk_update(rows, ["confidence"])


class Migration(migrations.Migration):
    dependencies = [
        ("recommender", "0012_h14a_usage_floors"),
    ]

    operations = [
        migrations.AddField(
            model_name="recommendation",
            name="confidence",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.RunPython(fill_confidence, migrations.RunPython.noop),
    ]
