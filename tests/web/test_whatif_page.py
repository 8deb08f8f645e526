"""The what-if page: form, side-by-side table, errors named in the form."""

from __future__ import annotations

import json

from django.test import Client

from recommender.services.connections import cluster_adapter_for
from tests.factories import make_cluster, make_workload


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
    assert response.status_code == 200
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
