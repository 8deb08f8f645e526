"""The simulated cluster creates its pods through the webhook's service (Initial mode
end to end without Kubernetes)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from recommender.cluster.simulated import SimulatedCluster, build_fleet
from recommender.cluster.simulated_admission import ADMITTED
from recommender.engine.resources import Resources
from recommender.models import AdmissionCount, Container
from recommender.services.admission import counters
from recommender.services.admission.review import in_process_admission
from recommender.services.admission.snapshot import forget_holders
from tests.factories import make_cluster, make_recommendation, make_workload

pytestmark = pytest.mark.django_db
MI = 2**20


def _cron_run(fleet):
    """A CronJob of the fleet and the start time of one of its runs."""
    cron = next(w for w in fleet.workloads if w.kind == "CronJob")
    (pod, start_s, _), *_ = cron.runs_between(1.8e9, 1.8e9 + 86400)
    return cron, pod, start_s


@pytest.mark.parametrize("mode", ["Initial", "Off"])
def test_a_new_cronjob_pod_is_admitted_with_the_recommendation(mode):
    forget_holders()
    counters.flush_counts()
    fleet = build_fleet(7, 40)
    cron, pod_name, start_s = _cron_run(fleet)
    cluster = make_cluster(f"sim-{mode.lower()}")  # ADMITTED is per process
    workload = make_workload(
        cluster,
        cron.name,
        namespace=cron.namespace,
        kind="CronJob",
        mode=mode,
        containers={c.name: {} for c in cron.containers},
    )
    first = cron.containers[0]
    make_recommendation(
        Container.objects.get(workload=workload, name=first.name),
        cpu_millicores=123,
        memory_bytes=77 * MI,
    )
    now = datetime.fromtimestamp(start_s + 30, tz=UTC)
    adapter = SimulatedCluster(
        name=cluster.name,
        fleet=fleet,
        now=now,
        admit=in_process_admission(cluster.name),
        admit_window_s=120,
    )

    def pod_containers():
        (info,) = [w for w in adapter.discover().workloads if w.name == cron.name]
        (pod,) = [p for p in info.pods if p.name == pod_name]
        return {c.name: c for c in pod.containers}

    containers = pod_containers()
    if mode == "Initial":
        assert containers[first.name].requests == Resources(123, 77 * MI)
        assert AdmissionCount.objects.get().outcome == "patched"
    else:
        assert containers[first.name].requests == first.requests
        assert AdmissionCount.objects.get().outcome == "left_alone"
    # The pod keeps what it was admitted with; it is not admitted twice.
    assert pod_containers() == containers
    assert AdmissionCount.objects.get().count == 1
    assert ADMITTED.get((cluster.name, cron.namespace, pod_name)) is not None
