"""The advice path's two halves: ``load_advice_inputs`` reads many owners in a constant
number of queries, and ``advise`` computes from those inputs without touching the
database (what lets the admission webhook cache ``(namespace, owner) -> inputs``)."""

from __future__ import annotations

import pytest

from recommender.engine.capping import LimitRangeItem
from recommender.engine.resources import Resources
from recommender.models import NamespaceLimitRange, Policy, StaticCoefficient
from recommender.services.advice.advise import (
    SOURCE_RECOMMENDATION,
    SOURCE_STATIC_COEFFICIENT,
    advise,
    load_advice_inputs,
)
from recommender.services.advice.limits import item_to_dict
from recommender.services.advice.pod_spec import parse_pod_containers
from tests.factories import make_cluster, make_recommendation, make_workload

pytestmark = pytest.mark.django_db

MI = 2**20


def _fleet(count: int):
    cluster = make_cluster("prod")
    for index in range(count):
        workload = make_workload(cluster, f"api-{index}", namespace=f"ns-{index % 2}")
        Policy.objects.filter(workload=workload).update(
            container_policies=[{"containerName": "*", "minAllowed": {"cpu": "300m"}}]
        )
        make_recommendation(workload.containers.get(), cpu_millicores=100 + index)
    NamespaceLimitRange.objects.create(
        cluster=cluster,
        namespace="ns-0",
        container_item=item_to_dict(
            LimitRangeItem(
                type="Container",
                default=Resources(cpu_millicores=2000, memory_bytes=2048 * MI),
            )
        ),
    )
    StaticCoefficient.objects.create(namespace="", cpu_factor=0.5)
    return cluster


def test_many_owners_cost_the_same_queries_as_one(django_assert_max_num_queries):
    cluster = _fleet(6)
    keys = [(f"ns-{i % 2}", "Deployment", f"api-{i}") for i in range(6)]
    unknown = ("ns-0", "Deployment", "not-there")

    with django_assert_max_num_queries(4) as one:
        load_advice_inputs(cluster_id=cluster.pk, keys=keys[:1])
    with django_assert_max_num_queries(len(one.captured_queries)):
        inputs = load_advice_inputs(cluster_id=cluster.pk, keys=[*keys, unknown])

    assert all(inputs[key].workload is not None for key in keys)
    assert inputs[unknown].workload is None
    assert inputs[unknown].coefficient is not None  # the global one
    assert inputs[keys[0]].container_range is not None  # ns-0's LimitRange
    assert inputs[keys[1]].container_range is None  # ns-1 has none


def test_advise_reads_nothing(django_assert_num_queries):
    cluster = _fleet(2)
    key = ("ns-0", "Deployment", "api-0")
    unknown = ("ns-0", "Deployment", "not-there")
    inputs = load_advice_inputs(cluster_id=cluster.pk, keys=[key, unknown])
    # As the API server sends the pod after LimitRanger: requests and limits set.
    containers = parse_pod_containers(
        {
            "containers": [
                {
                    "name": "app",
                    "resources": {
                        "requests": {"cpu": "500m", "memory": "512Mi"},
                        "limits": {"cpu": "1", "memory": "1Gi"},
                    },
                }
            ]
        },
        field="pod.spec",
    )

    with django_assert_num_queries(0):
        known = advise(inputs[key], containers).containers[0]
        first_deploy = advise(inputs[unknown], containers).containers[0]

    # 100m raised to the policy's minAllowed 300m; the limit keeps the ratio 2.
    assert known.source == SOURCE_RECOMMENDATION
    assert (known.requests.cpu_millicores, known.limits.cpu_millicores) == (300, 600)
    # An owner vpaweb does not know: the global coefficient halves the CPU request.
    assert first_deploy.source == SOURCE_STATIC_COEFFICIENT
    assert first_deploy.requests.cpu_millicores == 250
