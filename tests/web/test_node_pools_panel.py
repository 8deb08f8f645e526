"""The "nodes you can free" panel and the API's node_pools: where the nodes came
from, "cannot model" instead of a number, the one total, and the plan's age."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from recommender.models import NodePool
from tests.factories import make_cluster, make_workload
from tests.web.conftest import client_for

pytestmark = pytest.mark.django_db
GIB = 2**30


def pool(cluster, name, **fields):
    values = {
        "nodes": 96,
        "node_cpu_millicores": 3920,
        "node_memory_bytes": 15 * GIB,
        "node_pods": 58,
        "node_allocatables": [[3920, 15 * GIB]],
        "pods": 400,
        "nodes_needed_now": 80,
        "nodes_needed_after": 61,
        "node_monthly_cost": 135.0,
        "price_source": "default",
        "node_source": "api-server",
        "computed_at": timezone.now() - timedelta(minutes=4),
        "checked_at": timezone.now() - timedelta(minutes=1),
        **fields,
    }
    return NodePool.objects.create(cluster=cluster, name=name, **values)


def test_a_pool_that_cannot_be_modelled_gives_no_number_and_the_total_leaves_it_out(
    admin_user,
):
    cluster = make_cluster("prod")
    make_workload(cluster)  # the overview shows its panels for a fleet
    pool(cluster, "m5.xlarge")
    pool(
        cluster,
        "r5.xlarge",
        nodes=12,
        nodes_needed_now=0,
        nodes_needed_after=19,
        unplaceable_now=91,
        cannot_model="91 pods running on the pool fit none of its nodes by their "
        "requests (allocatable less each node's DaemonSets)",
        node_source="kube-state-metrics",
        node_source_note="not from the API server: HTTP 403 Forbidden",
    )
    client = client_for(admin_user)

    body = client.get("/api/v1/rollups?by=cluster").json()
    listed = {p["name"]: p for p in body["node_pools"]}
    assert listed["m5.xlarge"]["nodes_freed"] == 19
    assert listed["m5.xlarge"]["monthly_cost_freed"] == pytest.approx(19 * 135.0)
    assert listed["r5.xlarge"]["nodes_freed"] is None
    assert listed["r5.xlarge"]["monthly_cost_freed"] is None
    assert listed["r5.xlarge"]["cannot_model"].startswith("91 pods running")
    assert listed["r5.xlarge"]["node_source"] == "kube-state-metrics"
    assert body["node_pools_total"] == {
        "pools": 2,
        "nodes": 108,
        "nodes_freed": 19,
        "monthly_cost_freed": pytest.approx(19 * 135.0),
        "unmodelled": 1,
    }

    page = client.get("/").content.decode()
    assert 'data-testid="pool-cannot-model"' in page
    assert "91 pods running on the pool fit none of its nodes" in page
    assert "-$" not in page.split('data-testid="node-pools"')[1].split("</table>")[0]
    assert 'data-testid="pools-freed-total"' in page and "$2,565" in page
    assert "HTTP 403 Forbidden" in page and "api-server" in page
    assert "Packed 4\xa0minutes ago" in page
    assert "last read 1\xa0minute ago" in page


def test_a_pool_the_recommendations_would_grow_frees_nothing(admin_user):
    cluster = make_cluster("prod")
    pool(cluster, "m5.xlarge", nodes_needed_now=50, nodes_needed_after=53)
    body = client_for(admin_user).get("/api/v1/rollups?by=cluster").json()
    (listed,) = body["node_pools"]
    assert (listed["nodes_freed"], listed["nodes_added"]) == (0, 3)
    assert listed["monthly_cost_freed"] == 0.0
