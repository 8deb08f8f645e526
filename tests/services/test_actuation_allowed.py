"""A cluster is written only when an operator allowed it: against the fake API
server, a cluster without "actuation allowed" receives no request but GETs, VPA
objects naming vpaweb included; an allowed one is asked its permissions
(SelfSubjectAccessReview), a missing path is not tried, and a 403 stops its path with
an exponential back-off and one WARNING."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta

import pytest

from recommender.models import AuditEvent, Cluster, Policy
from recommender.services.actuation import control, permissions
from tests.factories import make_cluster, make_workload
from tests.k8s_fake.actuation import FakeCluster, deployment, fake_cluster, vpa_object
from tests.services.test_vpa_status_fake_api import (
    NOW,
    STATUS_PATH,
    cycle,
    recommend,
)

pytestmark = pytest.mark.django_db
MI = 2**20
VPA_STATUS = ("autoscaling.k8s.io", "verticalpodautoscalers/status", "patch")


@pytest.fixture
def cleanup() -> Iterator[list[FakeCluster]]:
    fakes: list[FakeCluster] = []
    yield fakes
    for fake in fakes:
        fake.close()


def world(tmp_path, *, allowed: bool):
    """A VPA object naming vpaweb (its workload mirrored) and a workload vpaweb owns
    in Recreate with automatic approval: every write path has something to do."""
    objects = (
        deployment("api")
        + deployment("web")
        + [vpa_object("api-vpa", "shop", "api", recommenders=("vpaweb",))]
    )
    fake = fake_cluster(objects, tmp_path)
    cluster = make_cluster(
        "fake", kind="kubernetes", context="fake", actuation_allowed=allowed
    )
    for name, source in (("api", Policy.Source.VPA_OBJECT), ("web", "vpaweb")):
        workload = make_workload(
            cluster,
            name,
            namespace="shop",
            mode="Recreate",
            containers={"app": {"request_cpu_millicores": 500}},
        )
        Policy.objects.filter(workload=workload).update(
            source=source, approval="automatic"
        )
        recommend(workload)
    return fake, cluster


def test_a_cluster_without_actuation_allowed_gets_no_write_of_any_kind(
    tmp_path, cleanup
):
    fake, cluster = world(tmp_path, allowed=False)
    cleanup.append(fake)
    for minute in range(10):
        report = cycle(fake, cluster, NOW + timedelta(minutes=minute))
        assert "actuation is not allowed for cluster fake" in report.writes_blocked
    # Not even an access review: every request was a GET.
    assert fake.server.write_verbs() == []
    assert {r.method for r in fake.server.requests} == {"GET"}
    # An admin allows it (audited): the next cycle asks, then writes.
    control.set_actuation_allowed(cluster=cluster, allowed=True, actor=None, now=NOW)
    assert AuditEvent.objects.filter(action="cluster.actuation").count() == 1
    report = cycle(fake, cluster, NOW + timedelta(minutes=11))
    assert report.vpa_statuses == 1 and report.evicted == 1
    assert len(fake.access_reviews()) == sum(
        len(v) for v in permissions.WRITE_PATHS.values()
    )


def test_a_path_without_permission_is_shown_missing_and_never_tried(tmp_path, cleanup):
    fake, cluster = world(tmp_path, allowed=True)
    cleanup.append(fake)
    fake.server.deny(*VPA_STATUS)
    for minute in range(5):
        report = cycle(fake, cluster, NOW + timedelta(minutes=minute))
    assert ("PATCH", STATUS_PATH.format("api-vpa")) not in fake.writes()
    assert report.vpa_statuses == 0
    cluster.refresh_from_db()
    paths = {p.path: p for p in permissions.write_paths(cluster)}
    assert paths["vpa_status"].allowed is False
    assert "patch verticalpodautoscalers/status" in paths["vpa_status"].reason
    assert all(p.allowed for name, p in paths.items() if name != "vpa_status"), paths
    # The evictions the other workload needs still happen.
    assert any(path.endswith("/eviction") for _, path in fake.writes())
    # Asked once (not again until RECHECK_S has passed).
    assert len(fake.access_reviews()) == sum(
        len(v) for v in permissions.WRITE_PATHS.values()
    )


def test_a_403_stops_the_path_with_back_off_and_one_warning(
    tmp_path, cleanup, caplog, settings
):
    settings.UPDATER_INTERVAL_S = 60
    fake, cluster = world(tmp_path, allowed=True)
    cleanup.append(fake)
    # Allowed when asked; the role is taken away afterwards.
    cycle(fake, cluster, NOW)
    fake.server.deny(*VPA_STATUS)
    status_path = STATUS_PATH.format("api-vpa")
    api = cluster.workloads.get(name="api")
    caplog.set_level(logging.INFO)
    tried_at = []
    for minute in range(1, 16):
        recommend(api, cpu=250 + minute)  # the status would change every cycle
        before = fake.writes().count(("PATCH", status_path))
        cycle(fake, cluster, NOW + timedelta(minutes=minute))
        if fake.writes().count(("PATCH", status_path)) > before:
            tried_at.append(minute)
    # Tried at once, then after 1, 2, 4 and 8 intervals: not every cycle.
    assert tried_at == [1, 2, 4, 8, 16][: len(tried_at)] and len(tried_at) == 4
    warnings = [
        r
        for r in caplog.records
        if r.levelno >= logging.WARNING and "VPA status" in r.getMessage()
    ]
    assert len(warnings) == 1
    cluster.refresh_from_db()
    stopped = {p.path: p for p in permissions.write_paths(cluster)}["vpa_status"]
    assert stopped.stopped_until is not None and "forbidden" in stopped.error
    # The role comes back: the next try succeeds and clears the stop.
    fake.server.denied.clear()
    cycle(fake, cluster, NOW + timedelta(minutes=40))
    cluster.refresh_from_db()
    assert cluster.write_backoff == {}


def test_new_clusters_are_read_only_until_allowed():
    cluster = Cluster.objects.create(name="new", kind="kubernetes", context="x")
    assert cluster.actuation_allowed is False
    assert control.write_block_reason(cluster) is not None
