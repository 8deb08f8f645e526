"""rightsize leaves a container whose recommendation no node can hold as it is, and
says so in the container's notes (services/advice/advise.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.test import Client

from recommender.models import NodePool, Workload
from tests.api.test_rightsize import DEPLOYMENT, rightsize

pytestmark = pytest.mark.django_db
GIB = 2**30


def test_a_recommendation_no_node_holds_is_noted_not_written(
    read_client: Client, shop: Workload
) -> None:
    rec = shop.containers.get(name="app").latest_recommendation
    rec.target_cpu_millicores = 64_000
    rec.save(update_fields=["target_cpu_millicores"])
    NodePool.objects.create(
        cluster=shop.cluster,
        name="m5.xlarge",
        nodes=2,
        node_cpu_millicores=3920,
        node_memory_bytes=15 * GIB,
        node_pods=58,
        node_allocatables=[[3920, 15 * GIB]],
        pods=4,
        nodes_needed_now=1,
        nodes_needed_after=1,
        node_monthly_cost=100.0,
        price_source="default",
        computed_at=datetime(2026, 11, 21, tzinfo=UTC),
    )

    data = rightsize(read_client, DEPLOYMENT).json()

    document = data["documents"][0]
    assert document["status"] == "unchanged"
    app = next(c for c in document["containers"] if c["name"] == "app")
    assert app["changes"] == [] and app["source"] == "none"
    assert any("fits no node of the cluster" in note for note in app["notes"])
    assert (
        data["manifests"][0]["spec"]["template"]["spec"]["containers"][0]["resources"][
            "requests"
        ]["cpu"]
        == "1"
    )
