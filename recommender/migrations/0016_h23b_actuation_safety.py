"""Rejections stick (``ResizeChange.snooze``, ``snoozed_until``) and record who
decided (``decided_by_label``); a change records when its write was answered
(``written_at``). Policies and clusters get maintenance windows. Actuation is allowed per cluster (``Cluster.actuation_allowed``), with the write
permissions vpaweb found and the write paths a 403 stopped.

Existing clusters: actuation stays allowed where it was in use and is safe to keep,
and is off everywhere else. Allowed: the simulated cluster (its writes stay in
vpaweb's database) and every Kubernetes cluster where an operator already set some
vpaweb-owned policy to a mode other than Off (Initial, Recreate, InPlaceOrRecreate):
its webhook and updater keep working. Not allowed: a cluster where every policy is
Off or mirrors a VPA object; it was only ever meant to be read, and a VPA object
naming vpaweb there no longer makes vpaweb write its status. An admin allows it on
the Changes page.
"""

from django.db import migrations, models


def allow_where_in_use(apps, schema_editor):
    Cluster = apps.get_model("recommender", "Cluster")
    Policy = apps.get_model("recommender", "Policy")
    acting = (
        Policy.objects.filter(source="vpaweb")
        .exclude(mode="Off")
        .values("workload__cluster_id")
    )
    Cluster.objects.filter(
        models.Q(kind="simulated") | models.Q(pk__in=acting)
    ).update(actuation_allowed=True)


class Migration(migrations.Migration):
    dependencies = [
        ("recommender", "0016_h27_retention"),
    ]

    operations = [
        migrations.AddField(
            model_name="cluster",
            name="actuation_allowed",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="cluster",
            name="write_backoff",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="cluster",
            name="write_permissions",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.RunPython(allow_where_in_use, migrations.RunPython.noop),
        migrations.AddField(
            model_name="resizechange",
            name="decided_by_label",
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.AddField(
            model_name="resizechange",
            name="snooze",
            field=models.CharField(
                blank=True,
                choices=[
                    ("1d", "1 day"),
                    ("7d", "7 days"),
                    ("until_changed", "until the recommendation changes"),
                ],
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="resizechange",
            name="snoozed_until",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="resizechange",
            name="written_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="policy",
            name="maintenance_windows",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name="policy",
            name="window_bypasses_quick_oom",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="cluster",
            name="maintenance_windows",
            field=models.JSONField(blank=True, default=list),
        ),
    ]
