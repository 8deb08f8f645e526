"""PATCH /policy startup_boost: a factor or a quantity and a duration, canonical;
bad values are a 400 in the one error shape, naming the field, storing nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from django.test import Client

from recommender.models import Policy, Workload


def _patch(client: Client, workload: Workload, body: dict[str, Any]) -> Any:
    return client.patch(
        f"/api/v1/workloads/{workload.pk}/policy",
        data=json.dumps(body),
        content_type="application/json",
    )


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        ({"factor": 2, "duration": "5m"}, {"factor": 2.0, "duration_s": 300}),
        ({"quantity": "1000m", "duration_s": 90}, {"quantity": "1", "duration_s": 90}),
        ({}, {}),
    ],
)
def test_startup_boost_is_stored_canonical_and_shown(
    write_client: Client, shop: Workload, sent: dict[str, Any], stored: dict[str, Any]
) -> None:
    response = _patch(write_client, shop, {"startup_boost": sent})
    assert response.status_code == 200, response.content
    assert response.json()["startup_boost"] == stored
    assert Policy.objects.get(workload=shop).startup_boost == stored


@pytest.mark.parametrize(
    ("sent", "says"),
    [
        ({"factor": 0.5, "duration": "5m"}, "above 1"),
        ({"factor": 2, "quantity": "1", "duration": "5m"}, "exactly one"),
        ({"quantity": "lots", "duration": "5m"}, "lots"),
        ({"factor": 2, "duration": "soon"}, "duration"),
        ({"factor": 2, "duration": "48h"}, "24h"),
        ({"factor": 2, "burst": True}, "burst"),
        ("2x", "must be an object"),
    ],
)
def test_a_bad_startup_boost_is_a_400_naming_the_field(
    write_client: Client, shop: Workload, sent: object, says: str
) -> None:
    response = _patch(write_client, shop, {"startup_boost": sent})
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert list(error["fields"]) == ["startup_boost"]
    assert says in error["fields"]["startup_boost"][0]
    assert Policy.objects.filter(workload=shop).first() is None or (
        Policy.objects.get(workload=shop).startup_boost == {}
    )


def test_the_schema_describes_startup_boost(write_client: Client) -> None:
    schema = yaml.safe_load(write_client.get("/api/v1/schema/").content)
    boost = schema["components"]["schemas"]["StartupBoost"]["properties"]
    assert {"factor", "quantity", "duration", "duration_s"} <= set(boost)
