"""The rollups page, the overview's failing clusters, a DaemonSet's replicas."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from recommender.models import RefreshRun, SavingsSnapshot, Workload
from tests.factories import make_cluster, make_recommendation, make_workload


@pytest.fixture
def labelled(small_fleet):
    Workload.objects.filter(pk=small_fleet["over"].pk).update(
        labels={"app": "checkout", "team": "storefront"}
    )
    Workload.objects.filter(pk=small_fleet["under"].pk).update(
        labels={"app": "payments", "team": "money"}
    )
    return small_fleet


def test_rollup_by_team_label(viewer_client, labelled):
    page = viewer_client.get("/rollups/?by=label&key=team")

    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-group="storefront"' in html
    assert 'data-group="money"' in html
    assert "(no team label)" in html
    rows = page.context["rollup"].groups
    assert rows[0].name == "storefront"  # largest savings first
    assert {g.name: g.workloads for g in rows} == {
        "storefront": 1,
        "money": 1,
        "": 2,
    }


@pytest.mark.parametrize("by", ["cluster", "namespace", "kind", "label"])
def test_every_grouping_renders(viewer_client, labelled, by):
    page = viewer_client.get(f"/rollups/?by={by}")
    assert page.status_code == 200
    assert page.context["rollup"].total.workloads == 4


def test_an_unknown_grouping_is_a_400_that_says_so(viewer_client, labelled):
    page = viewer_client.get("/rollups/?by=team")

    assert page.status_code == 400
    assert "&#x27;team&#x27; is not a rollup" in page.content.decode()
    assert "rollup" not in page.context or page.context.get("rollup") is None


def test_the_trend_chart_gets_its_data_from_a_json_script(viewer_client, labelled):
    cluster = labelled["over"].cluster
    hour = timezone.now().replace(minute=0, second=0, microsecond=0)
    SavingsSnapshot.objects.create(
        cluster=cluster, namespace="default", taken_at=hour, savings_monthly=12.5
    )

    html = viewer_client.get("/rollups/?by=cluster&days=7").content.decode()

    assert '<script src="/static/js/rollups.js"' in html
    start = html.index('<script id="trend-data" type="application/json">')
    data = json.loads(html[start:].split(">", 1)[1].split("</script>", 1)[0])
    assert data["savings"] == [12.5]
    assert data["resolution"] == "hour"
    # No inline script: the Content-Security-Policy allows none.
    assert "<script>" not in html


def test_the_overview_shows_a_failing_cluster_until_a_refresh_succeeds(
    viewer_client, small_fleet
):
    prod = small_fleet["over"].cluster
    since = timezone.now() - timedelta(minutes=30)
    for minutes in (0, 10, 20):
        RefreshRun.objects.create(
            cluster=prod,
            status=RefreshRun.Status.FAILED,
            started_at=since + timedelta(minutes=minutes),
            error=f"cannot list pods: HTTP 403 Forbidden ({minutes})",
        )

    html = viewer_client.get("/").content.decode()

    assert 'data-testid="failing-clusters"' in html
    assert "cannot list pods: HTTP 403 Forbidden (20)" in html
    assert "3 failed refreshes" in html
    assert html.count('data-testid="cluster-failing"') == 1

    RefreshRun.objects.create(
        cluster=prod, status=RefreshRun.Status.SUCCEEDED, started_at=timezone.now()
    )
    html = viewer_client.get("/").content.decode()
    assert 'data-testid="failing-clusters"' not in html
    assert 'data-testid="cluster-failing"' not in html


def test_a_daemon_set_shows_its_pods_per_node(viewer_client, db):
    cluster = make_cluster("prod")
    agent = make_workload(cluster, "agent", kind="DaemonSet", replicas=4)
    make_recommendation(agent.containers.get())

    html = viewer_client.get(f"/workloads/{agent.pk}/").content.decode()

    assert '<div class="value" data-testid="replicas">4</div>' in html
    assert "one pod per node it runs on" in html
    listed = viewer_client.get("/workloads/?sort=savings").context["page_obj"][0]
    one_pod = make_workload(cluster, "single", kind="Deployment", replicas=1)
    make_recommendation(one_pod.containers.get())
    single = viewer_client.get("/workloads/?q=single").context["page_obj"][0]
    assert listed.savings == pytest.approx(4 * single.savings)


def test_the_navigation_links_the_rollups(viewer_client, db):
    assert 'href="/rollups/"' in viewer_client.get("/").content.decode()
