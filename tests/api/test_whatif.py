"""POST /api/v1/workloads/{id}/what-if: bodies, errors, and the answer's shape."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from recommender.models import Policy, Workload


def _post(client: Client, workload: Workload, body: Any) -> Any:
    return client.post(
        f"/api/v1/workloads/{workload.pk}/what-if",
        json.dumps(body),
        content_type="application/json",
    )


def test_a_read_token_gets_both_profiles_side_by_side(
    read_client: Client, sim_workload: Workload
) -> None:
    Policy.objects.filter(workload=sim_workload).update(profile="vpa")
    response = _post(
        read_client,
        sim_workload,
        {
            "profile": "recurring-peaks",
            "profile_overrides": {"margin_fraction": 0.3},
            "days": 2,
        },
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert [r["role"] for r in body["rows"]] == ["current", "candidate"]
    assert body["current"] == {"profile": "vpa", "overrides": {}}
    assert body["candidate"] == {
        "profile": "recurring-peaks",
        "overrides": {"margin_fraction": 0.3},
    }
    assert body["rows"][1]["profile"] == "recurring-peaks[margin_fraction=0.3]"
    assert body["rows"][0]["container_days"] >= 1
    assert body["days"] == 2
    assert "pod-update-threshold" in body["updater_rule"]
    chart = body["containers"][0]["chart"]
    assert len(chart["t"]) == len(chart["candidate"]["target_memory"])


def test_the_natural_key_route_answers_too(
    read_client: Client, sim_workload: Workload
) -> None:
    w = sim_workload
    response = read_client.post(
        f"/api/v1/clusters/{w.cluster.name}/namespaces/{w.namespace}/workloads/"
        f"{w.kind}/{w.name}/what-if",
        json.dumps({"profile": "vpa", "days": 1}),
        content_type="application/json",
    )
    assert response.status_code == 200, response.content


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "profile"),
        ({"profile": "nope"}, "profile"),
        (
            {"profile": "vpa", "profile_overrides": {"margin_fraction": "lots"}},
            "profile_overrides.margin_fraction",
        ),
        (
            {"profile": "vpa", "profile_overrides": {"bogus": 1}},
            "profile_overrides.bogus",
        ),
        ({"profile": "vpa", "profile_overrides": [1]}, "profile_overrides"),
        ({"profile": "vpa", "days": 0}, "days"),
        ({"profile": "vpa", "days": 30}, "days"),
        ({"profile": "vpa", "days": "week"}, "days"),
        ({"profile": "vpa", "every": "1h"}, "every"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(
    read_client: Client, sim_workload: Workload, body: Any, field: str
) -> None:
    response = _post(read_client, sim_workload, body)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert field in error["fields"], error


def test_a_workload_without_history_is_a_404(
    read_client: Client, shop: Workload
) -> None:
    # prod/shop/web is not part of the simulated fleet: its source has nothing. One
    # day of its containers is answered in the request (test_whatif_jobs.py: past it).
    response = _post(read_client, shop, {"profile": "vpa", "days": 1})
    assert response.status_code == 404
    assert "shop" in response.json()["error"]["message"]


def test_an_unknown_workload_is_a_404(read_client: Client, db: Any) -> None:
    response = read_client.post(
        "/api/v1/workloads/999999/what-if",
        json.dumps({"profile": "vpa"}),
        content_type="application/json",
    )
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_no_credentials_is_a_401(client: Client, sim_workload: Workload) -> None:
    assert _post(client, sim_workload, {"profile": "vpa"}).status_code == 401


def test_the_schema_documents_it(read_client: Client) -> None:
    schema = read_client.get("/api/v1/schema/?format=json").json()
    operation = schema["paths"]["/api/v1/workloads/{id}/what-if"]["post"]
    assert {"200", "400", "404"} <= set(operation["responses"])


def test_an_unreadable_cluster_is_a_503(read_client: Client, db: Any) -> None:
    from tests.factories import make_cluster, make_workload

    cluster = make_cluster("k-broken", kind="kubernetes", context="no-such-context")
    workload = make_workload(cluster, "b", namespace="a")
    response = _post(read_client, workload, {"profile": "vpa", "days": 1})
    assert response.status_code == 503
    assert "no-such-context" in response.json()["error"]["message"]


def test_a_token_has_a_budget_of_replays_a_minute_and_at_once(
    read_client: Client,
    read_key: str,
    sim_workload: Workload,
    settings: Any,
    monkeypatch,
) -> None:
    from types import SimpleNamespace

    from recommender.api import whatif_views
    from recommender.models import ApiToken
    from recommender.services.access import heavy_jobs
    from recommender.services.access.tokens import hash_key

    # One minute's window for the whole test, whatever the clock says.
    monkeypatch.setattr(whatif_views, "time", SimpleNamespace(time=lambda: 1e9 + 1))
    settings.HEAVY_JOBS_PER_MINUTE = 3
    settings.HEAVY_JOBS_RUNNING = 1
    body = {"profile": "vpa", "days": 0.5}
    who = f"token-{ApiToken.objects.get(key_hash=hash_key(read_key)).pk}"
    heavy_jobs.take_slot(who=who, now_s=0.0)  # one replay of this token running
    busy = _post(read_client, sim_workload, body)
    assert busy.status_code == 429
    assert busy.json()["error"]["code"] == "throttled"
    assert "at once" in busy.json()["error"]["message"]
    heavy_jobs.give_slot_back(who=who)
    # Three a minute; the one refused above took nothing from them.
    for _ in range(3):
        assert _post(read_client, sim_workload, body).status_code == 200
    refused = _post(read_client, sim_workload, body)
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) >= 1
    assert "a minute" in refused.json()["error"]["message"]
