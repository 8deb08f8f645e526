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


# PostgreSQL only: covering indexes, so the overview's passes over every shown
# container (services/dashboard/overview.py: _fleet_totals, the at-risk shortfalls,
# the workloads missing a request) read these few columns by index-only scans
# instead of the tables, whose rows carry JSON (a recommendation's explanation, a
# container's template and sources): at 100,000 containers the recommendation table
# was 108 MB (216 MB once its latest rows were rewritten) against an 8 MB index.
# SQLite has no INCLUDE (and Django's Index(include=...) would warn there), so the
# models do not declare them.
COVERING_INDEXES = {
    "rec_latest_numbers": (
        "recommender_recommendation",
        "id",
        "target_cpu_millicores, target_memory_bytes, lower_cpu_millicores,"
        " lower_memory_bytes, floor_cpu_millicores, floor_memory_bytes, confidence",
    ),
    "container_facts_columns": (
        "recommender_container",
        "workload_id",
        "id, kind, request_cpu_millicores, request_memory_bytes,"
        " latest_recommendation_id",
    ),
    "workload_shown_columns": (
        "recommender_workload",
        "id",
        "cluster_id, is_active, namespace, replicas",
    ),
}


def create_covering_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, (table, key, columns) in COVERING_INDEXES.items():
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {name} ON {table} ({key}) INCLUDE ({columns})"
        )


def drop_covering_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name in COVERING_INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


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
        migrations.RunPython(create_covering_indexes, drop_covering_indexes),
        migrations.AddIndex(
            model_name="oomkill",
            index=models.Index(fields=["occurred_at"], name="oom_kill_time"),
        ),
        migrations.AddIndex(
            model_name="workload",
            index=models.Index(
                fields=["namespace", "name"], name="workload_namespace_name"
            ),
        ),
    ]
