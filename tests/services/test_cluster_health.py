"""A failing cluster: seen from its latest finished refresh until one succeeds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from recommender.models import RefreshRun
from recommender.services.operations.cluster_health import (
    cluster_failure,
    failing_clusters,
)
from tests.factories import make_cluster

T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def run(cluster, minute, status, *, error="", shard="", kind=RefreshRun.Kind.REFRESH):
    return RefreshRun.objects.create(
        cluster=cluster,
        kind=kind,
        shard=shard,
        status=status,
        started_at=T0 + timedelta(minutes=minute),
        error=error,
    )


OK, FAILED, RUNNING = (
    RefreshRun.Status.SUCCEEDED,
    RefreshRun.Status.FAILED,
    RefreshRun.Status.RUNNING,
)


@pytest.mark.django_db
def test_failing_since_the_first_failure_after_the_last_success():
    cluster = make_cluster("prod")
    run(cluster, 0, FAILED, error="old trouble")
    run(cluster, 1, OK)
    run(cluster, 2, FAILED, error="cannot list pods: HTTP 403")
    run(cluster, 3, FAILED, error="cannot reach the API server", shard="shop")
    run(cluster, 4, RUNNING)  # not finished: does not count either way

    failure = cluster_failure(cluster)

    assert failure is not None
    assert failure.since == T0 + timedelta(minutes=2)
    assert failure.last_failed_at == T0 + timedelta(minutes=3)
    assert failure.last_succeeded_at == T0 + timedelta(minutes=1)
    assert failure.failed_runs == 2
    assert (failure.error, failure.shard) == ("cannot reach the API server", "shop")


@pytest.mark.django_db
def test_a_success_ends_it_and_other_kinds_do_not_count():
    cluster = make_cluster("prod")
    run(cluster, 0, FAILED, error="x")
    run(cluster, 1, OK)
    run(cluster, 2, FAILED, kind=RefreshRun.Kind.EXPIRE, error="expiry trouble")
    assert cluster_failure(cluster) is None
    assert failing_clusters() == []


@pytest.mark.django_db
def test_never_succeeded_and_only_enabled_clusters_by_default():
    broken = make_cluster("broken")
    off = make_cluster("off", is_enabled=False)
    fine = make_cluster("fine")
    for minute in range(3):
        run(broken, minute, FAILED, error=f"failure {minute}")
        run(off, minute, FAILED, error="off")
    run(fine, 0, OK)

    (failure,) = failing_clusters()

    assert failure.cluster == "broken"
    assert failure.since == T0
    assert failure.last_succeeded_at is None
    assert failure.failed_runs == 3
    assert failure.error == "failure 2"
