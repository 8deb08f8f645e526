"""The webhook's CPU startup boost, on the AdmissionReviews kube-apiserver v1.36 really
sent (tests/fixtures/k8s-wire/admission): the recommended CPU times the factor (limits
at the same ratio, so the QoS class stays), capped by maxAllowed and the nodes, only in
the modes whose updater shrinks it back, annotated and counted."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone
from prometheus_client import REGISTRY

from recommender.engine.startup_boost import BOOST_ANNOTATION
from recommender.models import Policy
from recommender.services.admission.decision import PATCHED
from recommender.services.admission.review import record_decision
from recommender.services.admission.snapshot import forget_holders
from tests.factories import make_cluster
from tests.services.test_admission import (
    applied,
    decide,
    owned,
    recorded,
    resources,
    workload_with,
)
from tests.services.test_fits_no_node import nodes_of

pytestmark = pytest.mark.django_db
MI = 2**20
GIB = 2**30
BOOST = {"factor": 2.0, "duration_s": 300}


@pytest.fixture
def cluster():
    forget_holders()
    yield make_cluster("wire")
    forget_holders()


def boosted(workload, boost=BOOST):
    Policy.objects.filter(workload=workload).update(startup_boost=boost)
    return workload


def boosts_counted() -> float:
    value = REGISTRY.get_sample_value(
        "vpaweb_startup_boosts_total", {"event": "boosted"}
    )
    return value or 0.0


def test_a_new_pod_is_admitted_with_boosted_cpu_and_annotated(cluster):
    boosted(
        workload_with(
            cluster,
            "hooked",
            "wire-hook",
            {"app": (250, 300 * MI), "side": (20, 32 * MI)},
            mode=Policy.Mode.IN_PLACE_OR_RECREATE,
        )
    )
    review = recorded("a-replicaset-pod")
    before = boosts_counted()
    decision = decide(cluster, review)
    assert decision.outcome == PATCHED, decision.reason
    pod = applied(review, decision)
    # No limit before: the boost adds none (a Burstable pod stays Burstable).
    assert resources(pod, 0) == {"requests": {"cpu": "500m", "memory": "300Mi"}}
    assert resources(pod, 1) == {"requests": {"cpu": "40m", "memory": "32Mi"}}
    assert json.loads(pod["metadata"]["annotations"][BOOST_ANNOTATION]) == {
        "duration_s": 300,
        "containers": {
            "app": {"requests": {"cpu": "250m"}},
            "side": {"requests": {"cpu": "20m"}},
        },
    }
    assert "startup boost of app, side" in decision.reason
    record_decision(decision, cluster_name="wire", dry_run=False, at=timezone.now())
    assert boosts_counted() == before + 1


def test_a_guaranteed_pod_is_boosted_with_its_limits_and_stays_guaranteed(cluster):
    boosted(
        workload_with(
            cluster,
            "hooked-db",
            "wire-hook",
            {"db": (250, 300 * MI)},
            kind="StatefulSet",
            mode=Policy.Mode.RECREATE,
        )
    )
    review = recorded("c-statefulset-pod")
    pod = applied(review, decide(cluster, review))
    assert resources(pod) == {
        "requests": {"cpu": "500m", "memory": "300Mi"},
        "limits": {"cpu": "500m", "memory": "300Mi"},
    }
    assert json.loads(pod["metadata"]["annotations"][BOOST_ANNOTATION])[
        "containers"
    ] == {"db": {"requests": {"cpu": "250m"}, "limits": {"cpu": "250m"}}}


def test_requests_only_at_its_limit_is_not_boosted_and_says_why(cluster):
    boosted(
        workload_with(
            cluster,
            "bare",
            "wire-hook",
            {"app": (3000, 300 * MI)},
            policies=[{"containerName": "app", "controlledValues": "RequestsOnly"}],
            mode=Policy.Mode.RECREATE,
        )
    )
    review = owned(recorded("b-bare-pod"), "Deployment", "bare")
    decision = decide(cluster, review)
    pod = applied(review, decision)
    # Capped to the 1-CPU limit by the advice: a boost would make it Guaranteed-ish
    # (request above the limit is refused), so none.
    assert resources(pod)["requests"]["cpu"] == "1"
    assert BOOST_ANNOTATION not in pod["metadata"]["annotations"]
    assert "no startup boost" in decision.reason and "limit" in decision.reason


def test_the_boost_stays_under_max_allowed_and_the_nodes(cluster):
    workload = boosted(
        workload_with(
            cluster,
            "hooked",
            "wire-hook",
            {"app": (250, 300 * MI)},
            policies=[{"containerName": "app", "maxAllowed": {"cpu": "400m"}}],
            mode=Policy.Mode.IN_PLACE_OR_RECREATE,
        ),
        {"factor": 4.0, "duration_s": 60},
    )
    review = recorded("a-replicaset-pod")
    pod = applied(review, decide(cluster, review))
    assert resources(pod, 0)["requests"]["cpu"] == "400m"
    # A node too small for the boosted pod: no boost at all, the recommendation kept.
    Policy.objects.filter(workload=workload).update(container_policies=[])
    nodes_of(cluster, (900, 15 * GIB))
    decision = decide(cluster, review)
    pod = applied(review, decision)
    assert resources(pod, 0)["requests"]["cpu"] == "250m"
    assert "fits no node" in decision.reason


def test_initial_mode_never_boosts(cluster):
    boosted(
        workload_with(
            cluster, "hooked", "wire-hook", {"app": (250, 300 * MI)}, mode="Initial"
        )
    )
    review = recorded("a-replicaset-pod")
    decision = decide(cluster, review)
    pod = applied(review, decision)
    assert resources(pod, 0)["requests"]["cpu"] == "250m"
    assert BOOST_ANNOTATION not in pod["metadata"]["annotations"]
    assert "never resizes a running pod" in decision.reason


@pytest.mark.parametrize(
    "mode",
    [Policy.Mode.RECREATE, Policy.Mode.IN_PLACE_OR_RECREATE, Policy.Mode.IN_PLACE],
)
def test_every_mode_whose_updater_shrinks_it_boosts(cluster, mode):
    boosted(
        workload_with(
            cluster, "hooked", "wire-hook", {"app": (250, 300 * MI)}, mode=mode
        )
    )
    review = recorded("a-replicaset-pod")
    pod = applied(review, decide(cluster, review))
    assert resources(pod, 0)["requests"]["cpu"] == "500m"
    assert BOOST_ANNOTATION in pod["metadata"]["annotations"]
