"""Migration 0016 adds ``Cluster.actuation_allowed``: existing clusters stay allowed
where actuation was in use (the simulated cluster, a vpaweb policy in a mode other
than Off) and become read only everywhere else."""

from __future__ import annotations

import pytest

BEFORE = "0015_h16e_workload_totals"
AFTER = "0016_h23b_actuation_safety"


@pytest.mark.django_db(transaction=True)
def test_actuation_stays_allowed_only_where_it_was_in_use(migrate_to):
    apps = migrate_to(BEFORE)
    Cluster = apps.get_model("recommender", "Cluster")
    Workload = apps.get_model("recommender", "Workload")
    Policy = apps.get_model("recommender", "Policy")

    def cluster(name, kind, policies):
        row = Cluster.objects.create(name=name, kind=kind)
        for i, (mode, source) in enumerate(policies):
            workload = Workload.objects.create(
                cluster=row, kind="Deployment", namespace="ns", name=f"w{i}"
            )
            Policy.objects.create(workload=workload, mode=mode, source=source)
        return row.pk

    simulated = cluster("sim", "simulated", [])
    acting = cluster("acting", "kubernetes", [("Off", "vpaweb"), ("Initial", "vpaweb")])
    read_only = cluster("ro", "kubernetes", [("Off", "vpaweb")])
    mirrored = cluster("mirror", "kubernetes", [("Recreate", "vpa-object")])

    apps = migrate_to(AFTER)
    allowed = dict(
        apps.get_model("recommender", "Cluster").objects.values_list(
            "pk", "actuation_allowed"
        )
    )
    assert allowed == {
        simulated: True,
        acting: True,
        read_only: False,
        mirrored: False,
    }
