"""CPU startup boost on the simulated cluster (the embedded default): an evicted pod's
replacement is admitted boosted through the webhook's service, the eviction is verified
on its requests as admitted, and the next cycles shrink it back in place."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from recommender.engine.startup_boost import BOOST_ANNOTATION
from recommender.models import ResizeChange
from recommender.services.actuation import approvals
from recommender.services.actuation.cycle import run_cycle
from recommender.services.policy.changes import update_policy
from tests.services.test_updater_simulated import (  # noqa: F401 (fixtures)
    NOW,
    a_workload_needing_changes,
    cluster,
    fresh_admission_cache,
    pods_of,
    small_fleet,
)

pytestmark = pytest.mark.django_db
S = ResizeChange.Status


def test_a_boosted_replacement_is_verified_then_shrunk(cluster):  # noqa: F811
    workload = a_workload_needing_changes(cluster, "Recreate")
    # As an operator does: the webhook's cache learns of it at once.
    update_policy(
        workload_id=workload.pk,
        changes={"startup_boost": {"factor": 2, "duration": "1m"}},
        actor=None,
        now=NOW,
    )
    change = max(
        ResizeChange.objects.filter(workload=workload), key=lambda c: c.priority
    )
    approvals.approve_change(change_id=change.pk, approved_by=None, now=NOW)
    later = NOW + timedelta(minutes=1)
    assert run_cycle(cluster, now=later, holder="t").evicted == 1
    pod = pods_of(cluster, workload, later)[change.pod]
    recorded = json.loads(pod.annotations[BOOST_ANNOTATION])["containers"]
    assert recorded
    for container in pod.containers:
        if container.name in recorded:
            after = change.resources_after[container.name]["requests"]["cpu"]
            assert container.requests.cpu_millicores == 2 * after

    # Verified on the requests as admitted; not yet Ready for 60 s: still boosted.
    report = run_cycle(cluster, now=later + timedelta(seconds=30), holder="t")
    change.refresh_from_db()
    assert change.status == S.APPLIED, change.error
    assert report.unboosted == 0

    report = run_cycle(cluster, now=later + timedelta(minutes=2), holder="t")
    assert report.unboosted == 1
    pod = pods_of(cluster, workload, later + timedelta(minutes=2))[change.pod]
    for container in pod.containers:
        if container.name in recorded:
            after = change.resources_after[container.name]["requests"]["cpu"]
            assert container.requests.cpu_millicores == after
