"""What-if reports the replicas a Utilization HPA would have run: at the requests now
(checked against a minute-by-minute loop over the history) and at each profile's
targets, within the HPA's min/max replicas."""

from __future__ import annotations

import math
from collections import defaultdict

import pytest

from recommender.models import Container, Policy
from recommender.services.replay.replay import load_cluster_history
from recommender.services.replay.whatif import what_if
from tests.factories import utilization_hpa

from .test_whatif import NOW, _workload

REQUEST_M = 100
TARGET = 60


def _by_hand(trace, containers: int, max_replicas: int) -> tuple[float, float]:
    """Mean pods seen and mean replicas wanted, one minute at a time."""
    pods: dict[float, set[str]] = defaultdict(set)
    usage: dict[float, float] = defaultdict(float)
    for sid, t, cpu in zip(
        trace.series_index.tolist(),
        trace.timestamp_s.tolist(),
        trace.cpu_cores.tolist(),
        strict=True,
    ):
        pods[t].add(trace.series_keys[sid])
        usage[t] += 0.0 if math.isnan(cpu) else cpu * 1000.0
    wanted = []
    for t, running in pods.items():
        n = len(running)
        ratio = usage[t] / (n * REQUEST_M * containers) * 100 / TARGET
        desired = n if abs(ratio - 1) <= 0.1 else math.ceil(round(n * ratio, 9))
        wanted.append(min(max(desired, 1), max_replicas))
    seen = sum(len(p) for p in pods.values()) / len(pods)
    return seen, sum(wanted) / len(wanted)


@pytest.mark.django_db
def test_what_if_reports_the_hpas_replicas_at_old_and_new_requests() -> None:
    workload = _workload()
    Policy.objects.create(workload=workload, profile="vpa")
    loaded = load_cluster_history(
        cluster_name=workload.cluster.name,
        namespace=workload.namespace,
        workload=workload.name,
        days=2,
        now_s=NOW.timestamp(),
    )
    prefix = f"{workload.namespace}/{workload.name}/"
    names = [cid.removeprefix(prefix) for cid in loaded.trace.container_ids]
    for position, name in enumerate(names):
        Container.objects.create(
            workload=workload,
            name=name,
            position=position,
            request_cpu_millicores=REQUEST_M,
            request_memory_bytes=2**28,
        )
    workload.hpa_conflicts = [
        utilization_hpa("wide", target=TARGET, max_replicas=500),
        utilization_hpa("capped", target=TARGET, max_replicas=2),
    ]
    workload.save(update_fields=["hpa_conflicts"])

    out = what_if(
        workload_id=workload.pk,
        profile="vpa",
        overrides={"margin_fraction": 0.5},
        days=2,
        now=NOW,
    )

    wide, capped = out["hpa_replicas"]
    seen, wanted = _by_hand(loaded.trace, len(names), max_replicas=500)
    assert wide["hpa"] == "wide" and wide["resource"] == "cpu"
    assert wide["seen"]["mean"] == pytest.approx(seen, abs=0.01)
    assert wide["request"]["mean"] == pytest.approx(wanted, abs=0.01)
    assert "no replica series" in wide["replicas_from"]
    # A 50 % margin recommends more cpu a pod: the HPA would run no more pods.
    assert wide["current"]["mean"] is not None
    assert wide["candidate"]["mean"] <= wide["current"]["mean"]
    # maxReplicas 2 caps every minute.
    assert capped["max_replicas"] == 2
    for key in ("request", "current", "candidate"):
        assert capped[key]["max"] <= 2
    assert capped["request"]["mean"] == pytest.approx(
        _by_hand(loaded.trace, len(names), max_replicas=2)[1], abs=0.01
    )


@pytest.mark.django_db
def test_a_workload_without_a_utilization_hpa_reports_none() -> None:
    workload = _workload()
    out = what_if(workload_id=workload.pk, profile="vpa", days=1, now=NOW)
    assert out["hpa_replicas"] == []
