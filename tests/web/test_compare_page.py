"""The namespace comparison page: profile A vs B over every workload of a namespace."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
from django.test import Client

from recommender.engine import get_profile
from recommender.services.connections import cluster_adapter_for
from recommender.services.replay.namespace_compare import compare_namespace
from recommender.services.replay.replay import (
    compare_workloads,
    load_cluster_history,
    run_replay,
)
from recommender.services.replay.whatif import WARMUP_S
from tests.factories import make_cluster, make_workload

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _tasks_in_process(monkeypatch):
    """The background run in-process, as without Redis (no worker runs in tests)."""
    from vpaweb.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)
    monkeypatch.setitem(app.conf, "task_eager_propagates", True)


def _sim_namespace():
    cluster = make_cluster("sim-compare")
    workloads = cluster_adapter_for(cluster).discover().workloads
    sim = next(w for w in workloads if w.pods)
    for w in workloads:
        if w.namespace == sim.namespace:
            make_workload(cluster, w.name, namespace=w.namespace, kind=w.kind)
    return cluster, sim.namespace


def test_the_service_gives_the_replays_totals_and_worst_first_workloads(db) -> None:
    cluster, namespace = _sim_namespace()
    result = compare_namespace(
        cluster_id=cluster.pk,
        namespace=namespace,
        profile_a="vpa",
        profile_b="vpa",
        overrides_b={"margin_fraction": 0.0},
        days=2,
        worst=3,
        now=NOW,
    )
    # The same numbers as replaying the namespace directly, as `manage.py replay
    # --worst` does.
    loaded = load_cluster_history(
        cluster_name=cluster.name,
        namespace=namespace,
        workload=None,
        days=2,
        now_s=NOW.timestamp(),
    )
    b = get_profile("vpa").with_overrides(
        margin_fraction=0.0, name="vpa[margin_fraction=0.0]"
    )
    report = run_replay(loaded, [get_profile("vpa"), b], warmup_s=WARMUP_S)
    expected = compare_workloads(loaded, report, warmup_s=WARMUP_S)
    assert [r["role"] for r in result["rows"]] == ["a", "b"]
    for got, want in zip(result["rows"], report.rows, strict=True):
        assert got["profile"] == want["profile"]
        assert got["container_days"] == want["container_days"]
        assert math.isclose(got["memory_slack_mean"], want["memory_slack_mean"])
    assert result["workload_count"] == len(expected)
    assert [w["workload"] for w in result["worst"]] == [
        w["workload"] for w in expected[:3]
    ]
    # No margin: B leaves less slack than A on every workload with scored days.
    assert (
        result["rows"][1]["memory_slack_mean"] < result["rows"][0]["memory_slack_mean"]
    )


def test_the_page_shows_totals_and_the_worst_workloads(viewer_client: Client) -> None:
    cluster, namespace = _sim_namespace()
    empty = viewer_client.get(f"/clusters/{cluster.pk}/compare").content.decode()
    assert f'<option value="{namespace}"' in empty
    assert "compare-result" not in empty
    started = viewer_client.post(
        f"/clusters/{cluster.pk}/compare",
        {"namespace": namespace, "a": "vpa", "b": "adaptive-margin", "days": "2"},
    )
    # Queued as a background run (here in-process: no Redis), then followed by id.
    assert started.status_code == 302
    assert "run=" in started["Location"]
    response = viewer_client.get(started["Location"])
    assert response.status_code == 200
    page = response.content.decode()
    assert "A: vpa" in page and "B: adaptive-margin" in page
    assert 'data-testid="compare-worst-table"' in page
    worst = response.context["worst"]
    assert worst and all(w["workload"].startswith(f"{namespace}/") for w in worst)


def test_bad_input_is_named_on_the_page(viewer_client: Client) -> None:
    cluster, namespace = _sim_namespace()
    page = viewer_client.post(
        f"/clusters/{cluster.pk}/compare",
        {"namespace": namespace, "b": "vpa", "overrides_b": "margin_fraction=-1"},
    ).content.decode()
    assert "profile_overrides.margin_fraction" in page
    assert "compare-result" not in page
    page = viewer_client.post(
        f"/clusters/{cluster.pk}/compare",
        {"namespace": namespace, "b": "vpa", "worst": "0"},
    ).content.decode()
    assert "worst: must be a whole number" in page


def test_the_workload_page_links_to_its_namespace(viewer_client: Client) -> None:
    cluster, namespace = _sim_namespace()
    workload = cluster.workloads.first()
    page = viewer_client.get(f"/workloads/{workload.pk}/").content.decode()
    assert f'href="/clusters/{cluster.pk}/compare?namespace={namespace}"' in page


def test_an_unknown_cluster_is_a_404(viewer_client: Client) -> None:
    assert viewer_client.get("/clusters/999999/compare").status_code == 404


def test_a_running_comparison_reloads_and_an_unknown_one_is_said(
    viewer_client: Client,
) -> None:
    from django.core.cache import cache

    from recommender.services.replay.namespace_compare import new_token

    cluster, namespace = _sim_namespace()
    token = new_token()
    cache.set(f"vpaweb:compare:{token}", {"state": "running", "progress": 0.25})
    page = viewer_client.get(
        f"/clusters/{cluster.pk}/compare", {"namespace": namespace, "run": token}
    ).content.decode()
    assert 'http-equiv="refresh"' in page
    assert "25 % of the hourly recomputes" in page
    page = viewer_client.get(
        f"/clusters/{cluster.pk}/compare", {"namespace": namespace, "run": "gone"}
    ).content.decode()
    assert "has expired or is unknown" in page


QUERY = {"a": "vpa", "b": "adaptive-margin", "days": "2"}


def test_a_get_never_queues_a_comparison(viewer_client: Client, monkeypatch) -> None:
    from recommender import tasks

    queued: list[str] = []
    monkeypatch.setattr(
        tasks.compare_namespace, "delay", lambda token, *a, **k: queued.append(token)
    )
    cluster, namespace = _sim_namespace()
    page = viewer_client.get(
        f"/clusters/{cluster.pk}/compare", {"namespace": namespace, **QUERY}
    )
    # The form, filled from the link; nothing runs until it is POSTed.
    assert page.status_code == 200
    assert queued == []
    assert page.context["chosen"]["b"] == "adaptive-margin"


def test_starting_a_comparison_needs_the_csrf_token(viewer) -> None:
    cluster, namespace = _sim_namespace()
    client = Client(enforce_csrf_checks=True)
    client.force_login(viewer)
    response = client.post(
        f"/clusters/{cluster.pk}/compare", {"namespace": namespace, **QUERY}
    )
    assert response.status_code == 403


def test_identical_comparisons_run_once_and_a_user_has_a_budget(
    viewer_client: Client, monkeypatch, settings
) -> None:
    from recommender import tasks

    queued: list[str] = []
    monkeypatch.setattr(
        tasks.compare_namespace, "delay", lambda token, *a, **k: queued.append(token)
    )
    settings.HEAVY_JOBS_RUNNING = 2
    cluster, namespace = _sim_namespace()
    url = f"/clusters/{cluster.pk}/compare"
    first = viewer_client.post(url, {"namespace": namespace, **QUERY})
    again = viewer_client.post(url, {"namespace": namespace, **QUERY})
    # The same request follows the same run: one task queued.
    assert first["Location"] == again["Location"]
    assert len(queued) == 1
    # Two different ones are running (never finished here): a third is refused.
    second = viewer_client.post(url, {"namespace": namespace, **QUERY, "days": "1"})
    assert second.status_code == 302 and len(queued) == 2
    third = viewer_client.post(url, {"namespace": namespace, **QUERY, "days": "3"})
    assert third.status_code == 429
    assert "at most 2 comparisons and what-ifs at once" in third.content.decode()
    assert len(queued) == 2


def test_with_redis_away_the_page_says_so_with_a_503(
    viewer_client: Client, redis_away: None
) -> None:
    cluster, namespace = _sim_namespace()
    url = f"/clusters/{cluster.pk}/compare"
    # The form reads only the database: it is still there.
    assert viewer_client.get(url).status_code == 200
    # Starting one needs the cache (budgets, dedupe, progress): a clear 503, not a 500.
    started = viewer_client.post(url, {"namespace": namespace, **QUERY})
    assert started.status_code == 503
    page = started.content.decode()
    assert "the cache (Redis) is away" in page
    assert 'data-testid="compare-form"' in page
    # Following one reads its progress from the cache: the same.
    followed = viewer_client.get(url, {"namespace": namespace, "run": "0123abcd"})
    assert followed.status_code == 503
    assert "the cache (Redis) is away" in followed.content.decode()


def test_a_comparison_the_broker_refused_is_a_503_and_holds_nothing(
    viewer_client: Client, monkeypatch, settings
) -> None:
    from kombu.exceptions import OperationalError

    from recommender import tasks

    sent: list[str] = []

    def broker_away(token: str, *args, **kwargs) -> None:
        sent.append(token)
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379")

    monkeypatch.setattr(tasks.compare_namespace, "delay", broker_away)
    settings.HEAVY_JOBS_RUNNING = 1
    cluster, namespace = _sim_namespace()
    url = f"/clusters/{cluster.pk}/compare"
    refused = viewer_client.post(url, {"namespace": namespace, **QUERY})
    assert refused.status_code == 503
    assert "Error 111" in refused.content.decode()
    # Not followed by the identical request, and its slot was given back: the same
    # request is sent again (a second send), not answered with a run that never
    # runs nor refused as one too many at once.
    again = viewer_client.post(url, {"namespace": namespace, **QUERY})
    assert again.status_code == 503
    assert len(sent) == 2
