"""Run progress on the overview (and its live refresh) and the runs page: filters,
pagination, phase timings, counts and errors in full."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from recommender.models import Cluster, RefreshRun
from recommender.services.refresh.backfill import backfill_cluster
from tests.factories import make_cluster
from tests.web.test_queries import RUNS_PAGE_QUERIES

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
PROGRESS = re.compile(r'<progress class="run-progress" max="1" value="([0-9.]+)"')


def _run(cluster=None, **fields) -> RefreshRun:
    fields.setdefault("status", RefreshRun.Status.SUCCEEDED)
    fields.setdefault("started_at", NOW)
    if fields["status"] != RefreshRun.Status.RUNNING:
        fields.setdefault("finished_at", fields["started_at"] + timedelta(seconds=3))
    return RefreshRun.objects.create(cluster=cluster, **fields)


def test_overview_shows_a_progress_bar_for_running_runs(viewer_client):
    cluster = make_cluster("prod")
    _run(cluster, kind="backfill", shard="shop", status="running", progress=0.4)
    _run(cluster, started_at=NOW - timedelta(minutes=5))

    body = viewer_client.get("/").content.decode()

    assert PROGRESS.findall(body) == ["0.400"]  # only the running run has a bar
    assert 'aria-label="backfill of shop: 40% done"' in body
    assert 'backfill <span class="muted">namespace shop</span>' in body
    assert 'data-refreshing="true"' in body
    # Polls every 5 s, only while visible (static/js/htmx-filters.js; no eval).
    assert 'hx-trigger="every 5s" data-poll-visible' in body
    assert 'href="/runs/"' in body


def test_the_live_fragment_follows_a_real_backfill(viewer_client, settings):
    """The overview's htmx fragment, fetched while manage.py backfill's service runs,
    shows its progress after each committed day, then the finished run."""
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 4
    cluster = Cluster.objects.create(name="sim-b", kind=Cluster.Kind.SIMULATED)
    seen = []

    def on_progress(run):
        body = viewer_client.get("/", HTTP_HX_REQUEST="true").content.decode()
        seen.append(
            (
                PROGRESS.findall(body),
                'data-refreshing="true"' in body,
                "run-succeeded" in body,
            )
        )

    run = backfill_cluster(
        cluster_id=cluster.pk, now=NOW, days=2, on_progress=on_progress
    )

    assert run.status == RefreshRun.Status.SUCCEEDED
    # After day 1 of 2: half done and polling fast; after day 2 still running until
    # the run is marked finished, which the last report shows.
    assert seen[0] == (["0.500"], True, False)
    assert seen[1] == (["1.000"], True, False)
    assert seen[-1] == ([], False, True)
    runs_page = viewer_client.get("/runs/?kind=backfill").content.decode()
    assert "steps_done" in runs_page and "samples" in runs_page


def test_runs_page_shows_phases_counts_and_the_whole_error(viewer_client):
    cluster = make_cluster("prod")
    error = "ingest failed: " + "x" * 400 + " THE END"
    _run(
        cluster,
        status="failed",
        error=error,
        timings={"discovery_s": 0.25, "ingest_s": 12.5, "total_s": 13.0},
        counts={"workloads": 7, "samples": 1234},
    )

    body = viewer_client.get("/runs/").content.decode()

    assert error in body  # in full, not truncated
    assert "<dt>discovery</dt><dd>250 ms</dd>" in body
    assert "<dt>ingest</dt><dd>12.5 s</dd>" in body
    assert body.index("<dt>ingest</dt>") < body.index("<dt>total</dt><dd>13.0 s</dd>")
    assert "<dt>samples</dt><dd>1234</dd>" in body
    assert 'data-running="false"' in body
    assert 'hx-trigger="every 5s' not in body  # nothing running: no polling


def test_runs_page_filters_by_cluster_kind_and_status(viewer_client):
    prod, dev = make_cluster("prod"), make_cluster("dev")
    _run(prod, kind="refresh", counts={"tag": "a"})
    _run(prod, kind="backfill", shard="shop", counts={"tag": "b"})
    _run(dev, kind="refresh", status="failed", error="boom", counts={"tag": "c"})
    _run(None, kind="expire", counts={"tag": "d"})

    def tags(query: str) -> list[str]:
        body = viewer_client.get(f"/runs/?{query}").content.decode()
        return re.findall(r"<dt>tag</dt><dd>(\w)</dd>", body)

    assert sorted(tags("")) == ["a", "b", "c", "d"]
    assert sorted(tags("cluster=prod")) == ["a", "b"]
    assert tags("kind=backfill") == ["b"]
    assert tags("status=failed") == ["c"]
    assert tags("kind=expire") == ["d"]
    assert tags("cluster=prod&kind=refresh&status=succeeded") == ["a"]
    assert tags("cluster=nowhere") == []
    # Unknown kinds or statuses are ignored, as on the other list pages.
    assert sorted(tags("kind=bogus&status=bogus")) == ["a", "b", "c", "d"]
    empty = viewer_client.get("/runs/?cluster=nowhere").content.decode()
    assert "No run matches these filters." in empty


def test_runs_page_is_paginated_newest_first(viewer_client):
    cluster = make_cluster("prod")
    for i in range(53):
        _run(cluster, started_at=NOW + timedelta(minutes=i), counts={"n": i})

    first = viewer_client.get("/runs/?cluster=prod").content.decode()
    second = viewer_client.get("/runs/?cluster=prod&page=2").content.decode()

    numbers = [int(n) for n in re.findall(r"<dt>n</dt><dd>(\d+)</dd>", first)]
    assert numbers == list(range(52, 2, -1))
    assert re.findall(r"<dt>n</dt><dd>(\d+)</dd>", second) == ["2", "1", "0"]
    assert "Page 1 of 2" in first
    assert 'href="?cluster=prod&amp;page=2"' in first


def test_runs_table_polls_while_a_run_is_running(viewer_client):
    _run(make_cluster("prod"), kind="backfill", status="running", progress=0.25)

    fragment = viewer_client.get("/runs/?kind=backfill", HTTP_HX_REQUEST="true")

    body = fragment.content.decode()
    assert "<html" not in body
    assert 'data-running="true"' in body
    assert 'hx-get="/runs/?kind=backfill"' in body
    assert PROGRESS.findall(body) == ["0.250"]


def test_runs_page_needs_the_viewer_role(client, outsider):
    response = client.get("/runs/")
    assert response.status_code == 302 and "/login/" in response.headers["Location"]
    client.force_login(outsider)
    assert client.get("/runs/").status_code == 403


def test_runs_page_has_bounded_queries(viewer_client, django_assert_max_num_queries):
    def grow(start: int, count: int) -> None:
        cluster = make_cluster(f"c{start}")
        for i in range(start, start + count):
            _run(
                cluster,
                status="running" if i % 4 == 0 else "succeeded",
                timings={"ingest_s": 1.0, "total_s": 2.0},
                counts={"samples": i},
            )

    grow(0, 3)
    with CaptureQueriesContext(connection) as small:
        viewer_client.get("/runs/")
    grow(100, 30)

    with django_assert_max_num_queries(RUNS_PAGE_QUERIES):
        response = viewer_client.get("/runs/?status=running")

    assert response.status_code == 200
    with CaptureQueriesContext(connection) as big:
        viewer_client.get("/runs/")
    assert len(big) == len(small)


def test_the_runs_page_shows_each_growing_table_with_its_oldest_row(viewer_client):
    from tests.factories import make_recommendation, make_workload

    container = make_workload(make_cluster("prod")).containers.get()
    make_recommendation(container, created_at=datetime(2026, 3, 4, 5, 6, tzinfo=UTC))

    body = viewer_client.get("/runs/").content.decode()

    assert '<h2 id="storage">Storage</h2>' in body
    assert "<code>recommender_recommendation</code>" in body
    assert "2026-03-04 05:06" in body
    assert "90 days" in body
    # The polled fragment does not read the tables again.
    fragment = viewer_client.get("/runs/", HTTP_HX_REQUEST="true").content.decode()
    assert "Storage" not in fragment
