from django.db import migrations, models

# PostgreSQL only: the covering index of migration 0013 (container_facts_columns),
# rebuilt with the live pods' mean requests, which the overview's passes over every
# shown container now read beside the requests (models/provisioning.py,
# billed_request_sql), so they stay index-only scans.
INDEX = "container_facts_columns"
BEFORE = (
    "id, kind, request_cpu_millicores, request_memory_bytes, latest_recommendation_id"
)
AFTER = f"{BEFORE}, pods_request_cpu_millicores, pods_request_memory_bytes"


def _rebuild(columns):
    def rebuild(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")
        schema_editor.execute(
            f"CREATE INDEX {INDEX} ON recommender_container (workload_id)"
            f" INCLUDE ({columns})"
        )

    return rebuild


class Migration(migrations.Migration):
    dependencies = [
        ("recommender", "0030_revert_change_revert"),
    ]

    operations = [
        migrations.AddField(
            model_name="container",
            name="pods_request_cpu_millicores",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="container",
            name="pods_request_memory_bytes",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="workloadtotals",
            name="excess_cpu_millicores",
            field=models.FloatField(default=0.0),
        ),
        migrations.AlterField(
            model_name="workloadtotals",
            name="excess_memory_bytes",
            field=models.FloatField(default=0.0),
        ),
        migrations.RunPython(_rebuild(AFTER), _rebuild(BEFORE)),
    ]
