"""PATCH /policy: margins and factors bounded, large raises confirmed explicitly."""

from __future__ import annotations

import json
from typing import Any

from django.test import Client

from recommender.models import Policy, Workload


def _patch(client: Client, workload: Workload, body: dict[str, Any]) -> Any:
    return client.patch(
        f"/api/v1/workloads/{workload.pk}/policy",
        data=json.dumps(body),
        content_type="application/json",
    )


def test_a_margin_of_50_meaning_percent_is_refused_naming_the_field(
    write_client: Client, shop: Workload
) -> None:
    response = _patch(
        write_client, shop, {"profile_overrides": {"margin_fraction": 50}}
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert list(error["fields"]) == ["profile_overrides.margin_fraction"]
    assert "from 0 to 1" in error["fields"]["profile_overrides.margin_fraction"][0]
    assert not Policy.objects.filter(
        workload=shop, profile_overrides__has_key="margin_fraction"
    ).exists()


def test_a_large_raise_needs_confirm_large_increase(
    write_client: Client, shop: Workload
) -> None:
    body: dict[str, Any] = {
        "container_policies": [{"containerName": "app", "minAllowed": {"cpu": "2"}}]
    }
    refused = _patch(write_client, shop, body)
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "confirmation_required"
    assert error["fields"] == {"confirm_large_increase": ["app cpu 587m → 2 (3.4×)"]}
    assert "confirm_large_increase: true" in error["message"]

    saved = _patch(write_client, shop, {**body, "confirm_large_increase": True})
    assert saved.status_code == 200, saved.content
    assert "confirm_large_increase" not in saved.json()
    assert Policy.objects.get(workload=shop).container_policies[0]["minAllowed"] == {
        "cpu": "2"
    }
