"""A worker SIGKILLed while its in-place resize is in flight to the API server: the
change stays ``applying`` (what the change page shows), the killed holder's lease
lapses after three updater intervals, the next cycle runs on another worker, and no
change is applied twice (one resize request, one attempt, one audit event each)."""

from __future__ import annotations

import os
import signal
from datetime import UTC, datetime, timedelta

import pytest

from recommender.models import AuditEvent, Container, Policy, ResizeChange
from recommender.services.actuation import control
from recommender.tasks import update_cluster as update_cluster_task
from tests.factories import make_cluster, make_recommendation, make_workload
from tests.faults.conftest import poll
from tests.k8s_fake.actuation import deployment
from tests.k8s_fake.server import FakeApiServer, write_kubeconfig

pytestmark = pytest.mark.faults

NOW = datetime(2026, 11, 24, 6, 0, tzinfo=UTC)
MI = 2**20
UPDATER_INTERVAL_S = 5
S = ResizeChange.Status


@pytest.fixture
def api_server():
    server = FakeApiServer(deployment("api", replicas=3)).start()
    yield server
    server.stop()


def resizes(api_server) -> list[str]:
    return [r.path for r in api_server.write_verbs() if r.path.endswith("/resize")]


def test_a_worker_killed_mid_apply_applies_nothing_twice(
    workers, api_server, tmp_path, settings
):
    settings.UPDATER_INTERVAL_S = UPDATER_INTERVAL_S
    kubeconfig = write_kubeconfig(
        tmp_path / "kubeconfig", {"fake": api_server}, current="fake"
    )
    cluster = make_cluster("fake", kind="kubernetes", context="fake")
    workload = make_workload(
        cluster,
        "api",
        namespace="shop",
        mode="InPlaceOrRecreate",
        replicas=3,
        containers={"app": {"request_cpu_millicores": 500}},
    )
    Policy.objects.filter(workload=workload).update(approval="automatic")
    make_recommendation(
        Container.objects.get(workload=workload),
        cpu_millicores=250,
        memory_bytes=300 * MI,
    )
    env = {
        "KUBECONFIG": str(kubeconfig),
        "PROMETHEUS_URL": "",
        "VPAWEB_UPDATER_INTERVAL_S": str(UPDATER_INTERVAL_S),
        "VPAWEB_K8S_RETRIES": "0",
        "VPAWEB_K8S_READ_TIMEOUT_S": "120",
    }
    release = api_server.hold_writes("/resize")
    queue, first = workers(env)
    update_cluster_task.apply_async(args=[cluster.pk, NOW.isoformat()], queue=queue)

    # The resize is in flight (held by the API server) when the worker dies.
    poll(lambda: resizes(api_server), what="the resize request")
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=20)
    (held,) = resizes(api_server)
    applying = ResizeChange.objects.get(status=S.APPLYING)
    assert applying.attempts == 1
    release.set()  # the API server finishes the request its client no longer awaits
    poll(lambda: api_server.resized, what="the held resize to be taken")

    # The killed holder's lease lapses after three intervals; the next cycle runs.
    workers(env)
    later = NOW + timedelta(seconds=control.lock_ttl_s() + 1)
    report = update_cluster_task.apply_async(
        args=[cluster.pk, later.isoformat()], queue=queue
    ).get(timeout=120)
    assert not report["not_leader"], report
    # Nothing applied twice. The change was left applying with no write recorded
    # (the worker died before the answer), but the pod's spec holds the new requests
    # (the API server took the resize), so the next cycle follows the change instead
    # of sending the identical resize again: exactly one resize of that pod, one
    # attempt and one change.apply audit event per change.
    assert report["recovered"] == 0, report
    assert resizes(api_server).count(held) == 1
    assert len(set(resizes(api_server))) == len(resizes(api_server))
    changes = ResizeChange.objects.filter(workload=workload)
    assert set(changes.values_list("attempts", flat=True)) <= {0, 1}
    applies = list(
        AuditEvent.objects.filter(action="change.apply").values_list(
            "object_id", flat=True
        )
    )
    assert all(applies.count(pk) == 1 for pk in applies)
    applying.refresh_from_db()
    assert applying.status == S.APPLYING and applying.attempts == 1

    # Once the kubelet actuates it, the change is verified, still without a resend.
    namespace, pod_name = api_server.resized[0]
    api_server.kubelet_actuates(namespace, pod_name)
    after = later + timedelta(seconds=UPDATER_INTERVAL_S)
    update_cluster_task.apply_async(
        args=[cluster.pk, after.isoformat()], queue=queue
    ).get(timeout=120)
    applying.refresh_from_db()
    assert applying.status == S.APPLIED and applying.attempts == 1
    assert resizes(api_server).count(held) == 1
    print(
        f"killed mid-apply: change {applying.pk} {applying.status} "
        f"(attempts {applying.attempts}); next cycle {report}"
    )
