"""The cache (Redis) away: liveness unchanged, readiness names it (degraded, still
serving: pages and the API read the database), and what needs it (the budgets of
comparisons and what-ifs, their progress and answers) answers a clear 503 instead of a
server error."""

from __future__ import annotations

import json
from typing import Any

from django.test import Client

from recommender.models import Workload


def test_with_the_cache_up_readiness_says_so(client: Client, settings, db) -> None:
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"  # the tests' cache is in memory
    body = client.get("/readyz").json()
    assert body == {"status": "ok", "checks": {"database": "ok", "cache": "ok"}}


def test_with_the_cache_away_readiness_names_it_and_liveness_is_unchanged(
    client: Client, redis_away: None, db: Any
) -> None:
    assert client.get("/healthz").status_code == 200
    ready = client.get("/readyz")
    assert ready.status_code == 200  # pages and the API still answer
    body = ready.json()
    assert body["status"] == "degraded"
    assert body["checks"]["database"] == "ok"
    assert "ConnectionError" in body["checks"]["cache"]


def test_with_the_cache_away_a_what_if_is_a_clear_503(
    read_client: Client, sim_workload: Workload, redis_away: None
) -> None:
    assert read_client.get("/api/v1/clusters/").status_code == 200
    response = read_client.post(
        f"/api/v1/workloads/{sim_workload.pk}/what-if",
        json.dumps({"profile": "vpa", "days": 1}),
        content_type="application/json",
    )
    assert response.status_code == 503, response.content
    error = response.json()["error"]
    assert error["code"] == "source_unavailable"
    assert "the cache (Redis) is away" in error["message"]


def test_with_the_cache_away_following_a_what_if_job_is_a_clear_503(
    read_client: Client, redis_away: None
) -> None:
    response = read_client.get("/api/v1/what-if-jobs/0123abcd")
    assert response.status_code == 503, response.content
    error = response.json()["error"]
    assert error["code"] == "source_unavailable"
    assert "the cache (Redis) is away" in error["message"]
