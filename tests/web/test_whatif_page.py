"""The what-if page: form, side-by-side table, errors named in the form."""

from __future__ import annotations

import json

from django.test import Client

from recommender.services.connections import cluster_adapter_for
from tests.factories import make_cluster, make_workload, utilization_hpa


def _sim_workload():
    cluster = make_cluster("sim-web")
    sim = next(w for w in cluster_adapter_for(cluster).discover().workloads if w.pods)
    return make_workload(cluster, sim.name, namespace=sim.namespace, kind=sim.kind)


def test_the_workload_page_links_to_it(viewer_client: Client) -> None:
    workload = _sim_workload()
    page = viewer_client.get(f"/workloads/{workload.pk}/").content.decode()
    assert f'href="/workloads/{workload.pk}/what-if"' in page


def test_the_form_replays_both_profiles_side_by_side(viewer_client: Client) -> None:
    workload = _sim_workload()
    response = viewer_client.post(
        f"/workloads/{workload.pk}/what-if",
        {"profile": "recurring-peaks", "days": "2", "overrides": "margin_fraction=0.3"},
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "candidate: recurring-peaks[margin_fraction=0.3]" in page
    assert "current: vpa" in page
    assert "resizes the updater would have proposed" in page
    data = response.context["charts"]
    name = response.context["result"]["containers"][0]["name"]
    assert data[name]["labels"] == ["vpa", "recurring-peaks[margin_fraction=0.3]"]
    # The chart data travels as JSON, never as inline script.
    assert 'id="what-if-data" type="application/json"' in page
    assert json.loads(json.dumps(data))


def test_bad_overrides_and_days_are_named(viewer_client: Client) -> None:
    workload = _sim_workload()
    page = viewer_client.post(
        f"/workloads/{workload.pk}/what-if",
        {"profile": "vpa", "days": "2", "overrides": "margin_fraction=-1"},
    ).content.decode()
    assert "profile_overrides.margin_fraction" in page
    assert "what-if-result" not in page
    page = viewer_client.post(
        f"/workloads/{workload.pk}/what-if", {"profile": "vpa", "days": "99"}
    ).content.decode()
    assert "days: must be a number of days" in page


def test_an_unknown_workload_is_a_404(viewer_client: Client) -> None:
    assert viewer_client.get("/workloads/999999/what-if").status_code == 404


def test_an_unreadable_cluster_is_said_on_the_page(viewer_client: Client) -> None:
    cluster = make_cluster("k-broken", kind="kubernetes", context="no-such-context")
    workload = make_workload(cluster, "b", namespace="a")
    response = viewer_client.post(
        f"/workloads/{workload.pk}/what-if", {"profile": "vpa", "days": "1"}
    )
    # Said on the form with the API's status for it (503 source_unavailable).
    assert response.status_code == 503
    assert (
        "cannot load context &#x27;no-such-context&#x27;" in response.content.decode()
    )


def test_a_get_only_fills_the_form_and_a_minute_has_a_budget(
    viewer_client: Client, settings
) -> None:
    workload = _sim_workload()
    url = f"/workloads/{workload.pk}/what-if"
    shown = viewer_client.get(url, {"profile": "vpa", "days": "0.5"})
    assert shown.status_code == 200 and "result" not in shown.context
    settings.HEAVY_JOBS_PER_MINUTE = 1
    first = viewer_client.post(url, {"profile": "vpa", "days": "0.5"})
    assert first.status_code == 200 and "result" in first.context
    refused = viewer_client.post(url, {"profile": "vpa", "days": "0.5"})
    assert refused.status_code == 429
    assert "VPAWEB_HEAVY_JOBS_PER_MINUTE" in refused.content.decode()


def test_past_the_budget_it_runs_in_the_background_and_the_page_follows_it(
    viewer_client: Client, settings, monkeypatch
) -> None:
    from recommender import tasks

    settings.WHATIF_SYNC_CONTAINER_DAYS = 0.5
    queued: list[tuple] = []
    monkeypatch.setattr(tasks.what_if, "delay", lambda *a, **k: queued.append((a, k)))
    workload = _sim_workload()
    form = {"profile": "recurring-peaks", "days": "1", "overrides": ""}
    url = f"/workloads/{workload.pk}/what-if"
    posted = viewer_client.post(url, form)
    assert posted.status_code == 302 and "run=" in posted["Location"]
    # Queued, not yet run: the page says so and reloads.
    waiting = viewer_client.get(posted["Location"])
    assert waiting.context["running"] == {"state": "queued"}
    assert 'http-equiv="refresh"' in waiting.content.decode()
    # The identical request follows the same run: one task.
    assert viewer_client.post(url, form)["Location"] == posted["Location"]
    assert len(queued) == 1
    # The worker's run (here in-process) leaves the answer the page then shows.
    args, kwargs = queued[0]
    tasks.what_if.apply(args=args, kwargs=kwargs).get()
    done = viewer_client.get(posted["Location"])
    assert done.status_code == 200
    assert done.context["result"]["candidate"]["profile"] == "recurring-peaks"
    assert "what-if-result" in done.content.decode()


def test_the_page_shows_the_replicas_an_hpa_would_have_run(
    viewer_client: Client,
) -> None:
    workload = _sim_workload()
    workload.hpa_conflicts = [
        utilization_hpa("web-hpa", target=70, min_replicas=2, max_replicas=10)
    ]
    workload.save(update_fields=["hpa_conflicts"])
    response = viewer_client.post(
        f"/workloads/{workload.pk}/what-if", {"profile": "vpa", "days": "1"}
    )
    page = response.content.decode()
    assert "Replicas the HPA would have run" in page
    assert "web-hpa: cpu at 70 %, 2–10" in page
    (row,) = response.context["result"]["hpa_replicas"]
    assert f"{row['seen']['mean']} (max {row['seen']['max']})" in page


def test_with_redis_away_the_page_says_so_with_a_503(
    viewer_client: Client, redis_away: None, settings
) -> None:
    workload = _sim_workload()
    url = f"/workloads/{workload.pk}/what-if"
    assert viewer_client.get(url).status_code == 200
    for budget in (1000.0, 0.1):  # answered in the request; queued in the background
        settings.WHATIF_SYNC_CONTAINER_DAYS = budget
        response = viewer_client.post(url, {"profile": "vpa", "days": "1"})
        assert response.status_code == 503, budget
        assert "the cache (Redis) is away" in response.content.decode()
    followed = viewer_client.get(url, {"profile": "vpa", "run": "0123abcd"})
    assert followed.status_code == 503
    assert "the cache (Redis) is away" in followed.content.decode()
