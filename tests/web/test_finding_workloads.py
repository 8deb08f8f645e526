"""Finding workloads on the dashboard: the list's label selector, its search and
sort, its CSV export, and the rollup rows that open the list they sum."""

from __future__ import annotations

import csv
import io
import re
from html import unescape

import pytest

from recommender.models import Workload
from tests.factories import make_cluster, make_workload

LABELS = {
    "pay-api": {"team": "payments", "tier": "web"},
    "pay-batch": {"team": "payments", "tier": "batch"},
    "shop": {"team": "shop"},
    "bare": {},
}


@pytest.fixture
def labelled(db):
    cluster = make_cluster("prod")
    for name, labels in LABELS.items():
        workload = make_workload(cluster, name, namespace="catalog")
        Workload.objects.filter(pk=workload.pk).update(labels=labels)


def _names(html: str) -> list[str]:
    return re.findall(r'<a href="/workloads/\d+/">catalog/([-a-z]+)</a>', html)


def test_the_list_is_narrowed_by_a_label_selector(viewer_client, labelled):
    page = viewer_client.get(
        "/workloads/", {"label_selector": "team=payments,tier!=batch"}
    )
    assert page.status_code == 200
    assert _names(page.content.decode()) == ["pay-api"]


def test_a_malformed_selector_is_a_400_that_says_so(viewer_client, labelled):
    page = viewer_client.get("/workloads/", {"label_selector": "team in payments"})
    html = unescape(page.content.decode())
    assert page.status_code == 400
    assert "label_selector:" in html and "'team in payments'" in html
    # The selector stays in its box, and the list is shown without it.
    assert 'value="team in payments"' in html
    assert len(_names(html)) == len(LABELS)


def _rollup_links(viewer_client, query: str) -> dict[str, str]:
    html = viewer_client.get(f"/rollups/?{query}").content.decode()
    rows = re.findall(
        r'data-group="([^"]*)">\s*<td><a href="([^"]+)" data-testid="rollup-link"', html
    )
    return {group: unescape(href) for group, href in rows}


def test_team_rollup_rows_link_to_the_list_of_their_workloads(viewer_client, labelled):
    links = _rollup_links(viewer_client, "by=label&key=team")
    assert set(links) == {"payments", "shop", ""}
    for group, expected in (
        ("payments", ["pay-api", "pay-batch"]),
        ("shop", ["shop"]),
        ("", ["bare"]),
    ):
        listed = viewer_client.get(links[group])
        assert listed.status_code == 200
        assert sorted(_names(listed.content.decode())) == expected


def test_rollup_links_keep_the_rollups_selector(viewer_client, labelled):
    links = _rollup_links(viewer_client, "by=namespace&label_selector=tier")
    listed = viewer_client.get(links["catalog"])
    assert sorted(_names(listed.content.decode())) == ["pay-api", "pay-batch"]


@pytest.fixture
def two_namespaces(db):
    cluster = make_cluster("prod")
    for namespace, name in (
        ("catalog", "billing"),
        ("catalog", "search"),
        ("billing", "api"),
        ("zeta", "alpha"),
    ):
        make_workload(cluster, name, namespace=namespace)


def _listed(html: str) -> list[str]:
    return re.findall(r'<a href="/workloads/\d+/">([-a-z]+/[-a-z]+)</a>', html)


@pytest.mark.parametrize(
    "q, expected",
    [
        ("catalog/billing", ["catalog/billing"]),
        ("log/bil", ["catalog/billing"]),
        ("catalog/", ["catalog/billing", "catalog/search"]),
        ("/api", ["billing/api"]),
        ("billing", ["billing/api", "catalog/billing"]),
        ("catalog/billing/x", []),
    ],
)
def test_search_finds_names_as_the_list_writes_them(
    viewer_client, two_namespaces, q, expected
):
    html = viewer_client.get("/workloads/", {"q": q}).content.decode()
    assert sorted(_listed(html)) == expected


def test_sort_by_name_sorts_by_the_workloads_name(viewer_client, two_namespaces):
    html = viewer_client.get("/workloads/").content.decode()
    assert '<option value="name">name</option>' in html
    by_name = viewer_client.get("/workloads/", {"ordering": "name"}).content.decode()
    assert [n.split("/")[1] for n in _listed(by_name)] == [
        "alpha",
        "api",
        "billing",
        "search",
    ]
    # The older spelling (sort=name) means the same.
    legacy = viewer_client.get("/workloads/", {"sort": "name"}).content.decode()
    assert _listed(legacy) == _listed(by_name)


def _export_names(viewer_client, list_html: str) -> list[str]:
    href = unescape(
        re.search(r'<a href="([^"]+)" download data-testid="export-csv"', list_html)[1]
    )
    answer = viewer_client.get(href)
    assert answer.status_code == 200
    assert answer["Content-Type"].startswith("text/csv")
    rows = list(
        csv.DictReader(io.StringIO(b"".join(answer.streaming_content).decode()))
    )
    names: list[str] = []
    for row in rows:  # one row per container
        name = f"{row['namespace']}/{row['workload']}"
        if not names or names[-1] != name:
            names.append(name)
    return names


@pytest.mark.parametrize(
    "query",
    [
        {},
        {"label_selector": "team=payments"},
        {"q": "catalog/pay", "ordering": "-name"},
        {"sort": "savings", "namespace": "catalog"},
        {"kind": "Deployment", "status": "no-data"},
    ],
)
def test_the_csv_export_holds_what_the_list_shows(viewer_client, labelled, query):
    cluster = Workload.objects.first().cluster
    gone = make_workload(cluster, "gone", namespace="catalog")
    Workload.objects.filter(pk=gone.pk).update(
        is_active=False, labels={"team": "payments"}
    )
    html = viewer_client.get("/workloads/", query).content.decode()
    listed = _listed(html)
    assert _export_names(viewer_client, html) == listed
