"""The safety state is visible everywhere: the kill switch and paused clusters in the
header of every page, on the overview (with a badge on the paused cluster's row) and in
the API's cluster objects."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from recommender.models import Cluster
from recommender.services.actuation import control
from tests.factories import make_cluster, make_workload

PAGES = ["/", "/workloads/", "/rollups/", "/changes/", "/audit/", "/runs/", "/tokens/"]


@pytest.fixture
def fleet(db):
    prod = make_cluster("prod")
    make_cluster("staging")
    workload = make_workload(prod, "api", namespace="shop")
    return prod, workload


def stop_writes(reason: str = "incident 42") -> None:
    control.set_kill_switch(stopped=True, actor=None, now=timezone.now(), reason=reason)


def pause(name: str) -> None:
    control.set_cluster_paused(
        cluster=Cluster.objects.get(name=name),
        paused=True,
        actor=None,
        now=timezone.now(),
    )


def test_every_page_says_nothing_while_writes_are_allowed(viewer_client, fleet):
    _, workload = fleet
    for path in [*PAGES, f"/workloads/{workload.pk}/"]:
        body = viewer_client.get(path).content.decode()
        assert 'data-testid="safety-banner"' not in body, path


def test_every_pages_header_names_the_kill_switch_and_paused_clusters(
    viewer_client, fleet
):
    _, workload = fleet
    stop_writes()
    pause("prod")
    for path in [*PAGES, f"/workloads/{workload.pk}/"]:
        response = viewer_client.get(path)
        assert response.status_code == 200, path
        body = response.content.decode()
        banner = body[body.index('data-testid="safety-banner"') :]
        banner = banner[: banner.index("</div>")]
        assert "Every cluster write is stopped" in banner, path
        assert "incident 42" in banner, path
        assert "Updates paused</strong> on prod" in banner, path
        assert "staging" not in banner, path


def test_the_header_shows_a_pause_alone_and_dry_run(viewer_client, fleet, settings):
    pause("prod")
    body = viewer_client.get("/workloads/").content.decode()
    assert 'data-testid="safety-paused"' in body
    assert 'data-testid="safety-kill-switch"' not in body
    settings.UPDATER_DRY_RUN = True
    assert 'data-testid="safety-dry-run"' in viewer_client.get("/").content.decode()


def test_the_login_page_reads_no_safety_state(client, fleet, django_assert_num_queries):
    stop_writes()
    with django_assert_num_queries(0):
        response = client.get("/login/")
    assert response.status_code == 200
    assert "safety-banner" not in response.content.decode()


def test_the_overview_names_the_switches_and_marks_the_paused_cluster(
    viewer_client, fleet
):
    body = viewer_client.get("/").content.decode()
    assert "the kill switch is off and no cluster is paused" in body
    assert 'data-testid="cluster-paused"' not in body

    stop_writes()
    pause("prod")
    body = viewer_client.get("/").content.decode()
    panel = body[body.index('data-testid="overview-safety"') :]
    panel = panel[: panel.index("</section>")]
    assert "Every cluster write is stopped" in panel and "incident 42" in panel
    assert "Updates paused" in panel and "<strong>prod</strong>" in panel
    row = body[body.index('data-testid="cluster-paused"') - 300 :]
    assert ">prod</a>" in row[:400]
    # The live fragment (htmx polling) carries it too.
    fragment = viewer_client.get("/", HTTP_HX_REQUEST="true").content.decode()
    assert 'data-testid="overview-safety"' in fragment and "incident 42" in fragment


def test_api_cluster_objects_say_what_blocks_writes(fleet, settings):
    from tests.api.conftest import _token, token_client

    client: Client = token_client(_token("reader", "read"))
    by_name = {c["name"]: c for c in client.get("/api/v1/clusters/").json()["results"]}
    assert by_name["prod"]["updates_paused"] is False
    assert by_name["prod"]["write_block_reason"] is None

    pause("prod")
    by_name = {c["name"]: c for c in client.get("/api/v1/clusters/").json()["results"]}
    assert by_name["prod"]["updates_paused"] is True
    assert by_name["prod"]["write_block_reason"] == "updates of cluster prod are paused"
    assert by_name["staging"]["write_block_reason"] is None

    stop_writes("maintenance")
    detail = client.get("/api/v1/clusters/staging/").json()
    assert detail["write_block_reason"] == (
        "the actuation kill switch is on (maintenance)"
    )
    settings.UPDATER_KILL_SWITCH = True
    detail = client.get("/api/v1/clusters/staging/").json()
    assert "VPAWEB_UPDATER_KILL_SWITCH" in detail["write_block_reason"]


def test_the_cluster_list_reads_the_kill_switch_once(fleet):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.api.conftest import _token, token_client

    client = token_client(_token("reader", "read"))
    for index in range(8):
        make_cluster(f"extra{index}")
    stop_writes()
    with CaptureQueriesContext(connection) as queries:
        results = client.get("/api/v1/clusters/?limit=50").json()["results"]
    assert len(results) == 10
    assert all(r["write_block_reason"] for r in results)
    reads = [q for q in queries if "actuationcontrol" in q["sql"].lower()]
    assert len(reads) == 1
