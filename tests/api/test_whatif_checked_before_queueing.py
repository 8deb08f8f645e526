"""A what-if past the synchronous budget is checked before it is queued: a request the
job would refuse is a 400 (or 404) at once, never a 202 whose job later answers 400."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client

from recommender.models import ApiToken, Workload
from recommender.services.access import heavy_jobs
from recommender.services.access.tokens import hash_key


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (
            {"profile": "vpa", "profile_overrides": {"no_such_field": 1}},
            "profile_overrides.no_such_field",
        ),
        (
            {"profile": "vpa", "profile_overrides": {"margin_fraction": -3}},
            "profile_overrides.margin_fraction",
        ),
    ],
)
def test_a_background_what_if_refuses_bad_input_before_queueing(
    read_client: Client,
    read_key: str,
    sim_workload: Workload,
    settings: Any,
    body: dict,
    field: str,
) -> None:
    settings.WHATIF_SYNC_CONTAINER_DAYS = 0  # every what-if in the background

    response = read_client.post(
        f"/api/v1/workloads/{sim_workload.pk}/what-if",
        json.dumps({**body, "days": 13.5}),
        content_type="application/json",
    )

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid" and field in error["fields"], error
    # Nothing was admitted: no slot of the requester held.
    token = ApiToken.objects.get(key_hash=hash_key(read_key))
    assert not cache.get(heavy_jobs._running_key(f"token-{token.pk}"))
