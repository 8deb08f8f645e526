"""The workloads list filters by labels (Kubernetes syntax), finds namespace/name, and
"Sort by name" sorts by name."""

from __future__ import annotations

import pytest

from recommender.models import Workload
from tests.factories import make_cluster, make_workload


@pytest.fixture
def fleet(db):
    cluster = make_cluster("prod")
    for name, namespace, labels in (
        ("billing", "catalog", {"team": "payments"}),
        ("ledger", "catalog", {"team": "payments"}),
        ("search", "catalog", {"team": "discovery"}),
        ("zeta", "alpha", {}),
    ):
        workload = make_workload(cluster, name, namespace=namespace)
        Workload.objects.filter(pk=workload.pk).update(labels={"app": name, **labels})


def test_the_list_filters_by_labels_and_finds_namespace_slash_name(
    viewer_client, fleet
):
    page = viewer_client.get(
        "/workloads/", {"label_selector": "team=payments", "q": "catalog/"}
    ).content.decode()

    assert "/billing</a>" in page and "/ledger</a>" in page
    assert "/search</a>" not in page and "/zeta</a>" not in page


def test_a_bad_label_selector_is_said_and_not_applied(viewer_client, fleet):
    response = viewer_client.get("/workloads/", {"label_selector": "team in (a"})

    assert response.status_code == 400
    assert "/zeta</a>" in response.content.decode()


def test_sort_by_name_sorts_by_name(viewer_client, fleet):
    page = viewer_client.get("/workloads/", {"ordering": "name"}).content.decode()

    positions = [page.index(f"/{name}</a>") for name in ("billing", "ledger", "zeta")]
    # zeta's namespace (alpha) comes first by namespace; by name it comes last.
    assert positions == sorted(positions)
    assert '<option value="name" selected>name</option>' in page
