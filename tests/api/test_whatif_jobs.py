"""A what-if past its synchronous budget (containers x days) answers 202 with a job;
polling the job gives the answer the request would have given, or its error."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from recommender.models import Workload

BODY = {"profile": "recurring-peaks", "days": 1}


@pytest.fixture(autouse=True)
def _tasks_in_process(monkeypatch):
    """The background run in-process, as without Redis (no worker runs in tests)."""
    from vpaweb.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)
    monkeypatch.setitem(app.conf, "task_eager_propagates", True)


@pytest.fixture
def frozen(monkeypatch):
    """One clock for the synchronous and the background run: the same history."""
    from datetime import UTC, datetime

    from django.utils import timezone

    now = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    monkeypatch.setattr(timezone, "now", lambda: now)


def _post(client: Client, workload: Workload, body: Any = BODY) -> Any:
    return client.post(
        f"/api/v1/workloads/{workload.pk}/what-if",
        json.dumps(body),
        content_type="application/json",
    )


def _same(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "timing_s"}


def test_within_the_budget_it_answers_at_once_past_it_a_job_with_the_same_answer(
    read_client: Client, sim_workload: Workload, settings, frozen
) -> None:
    settings.WHATIF_SYNC_CONTAINER_DAYS = 1.0  # one container, one day: within
    direct = _post(read_client, sim_workload)
    assert direct.status_code == 200, direct.content

    settings.WHATIF_SYNC_CONTAINER_DAYS = 0.5
    queued = _post(read_client, sim_workload)
    assert queued.status_code == 202, queued.content
    job = queued.json()
    assert job["state"] == "queued"
    assert queued["Location"] == job["url"] == f"/api/v1/what-if-jobs/{job['job']}"
    polled = read_client.get(queued["Location"])
    assert polled.status_code == 200, polled.content
    assert _same(polled.json()) == _same(direct.json())


def test_a_failed_job_answers_the_error_the_request_would_have(
    read_client: Client, shop: Workload, settings
) -> None:
    settings.WHATIF_SYNC_CONTAINER_DAYS = 0.1
    queued = _post(read_client, shop)  # not in the simulated fleet: no history
    assert queued.status_code == 202
    polled = read_client.get(queued["Location"])
    assert polled.status_code == 404
    error = polled.json()["error"]
    assert error["code"] == "not_found" and "shop" in error["message"]


def test_an_unknown_job_is_a_404_and_needs_credentials(
    read_client: Client, client: Client, db: Any
) -> None:
    response = read_client.get("/api/v1/what-if-jobs/0123abcd")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert client.get("/api/v1/what-if-jobs/0123abcd").status_code == 401


def test_identical_jobs_run_once_and_a_token_has_a_budget(
    read_client: Client, sim_workload: Workload, settings, monkeypatch
) -> None:
    from recommender import tasks

    queued: list[str] = []
    monkeypatch.setattr(
        tasks.what_if, "delay", lambda token, *a, **k: queued.append(token)
    )
    settings.WHATIF_SYNC_CONTAINER_DAYS = 0.1
    settings.HEAVY_JOBS_RUNNING = 2
    first = _post(read_client, sim_workload)
    again = _post(read_client, sim_workload)
    # The same request follows the same job: one task queued, still running.
    assert first.status_code == again.status_code == 202
    assert first["Location"] == again["Location"]
    assert len(queued) == 1
    polled = read_client.get(first["Location"])
    assert polled.status_code == 202 and polled.json()["state"] == "queued"
    # Two different ones are running (never finished here): a third is refused.
    assert _post(read_client, sim_workload, {**BODY, "days": 2}).status_code == 202
    refused = _post(read_client, sim_workload, {**BODY, "days": 3})
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "throttled"
    assert "at once" in refused.json()["error"]["message"]
    assert len(queued) == 2


def test_the_task_runs_on_the_heavy_queue_and_the_schema_documents_it(
    read_client: Client, settings
) -> None:
    from vpaweb.celery import app

    route = app.amqp.router.route({}, "recommender.tasks.what_if")
    assert route["queue"].name == settings.HEAVY_QUEUE
    schema = read_client.get("/api/v1/schema/?format=json").json()
    operation = schema["paths"]["/api/v1/workloads/{id}/what-if"]["post"]
    assert {"200", "202"} <= set(operation["responses"])
    assert "/api/v1/what-if-jobs/{job}" in schema["paths"]


def test_a_job_the_broker_refused_is_a_503_and_holds_nothing(
    read_client: Client, sim_workload: Workload, settings, monkeypatch
) -> None:
    from kombu.exceptions import OperationalError

    from recommender import tasks

    sent: list[str] = []

    def broker_away(token: str, *args: Any, **kwargs: Any) -> None:
        sent.append(token)
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379")

    monkeypatch.setattr(tasks.what_if, "delay", broker_away)
    settings.WHATIF_SYNC_CONTAINER_DAYS = 0.1
    settings.HEAVY_JOBS_RUNNING = 1
    refused = _post(read_client, sim_workload)
    assert refused.status_code == 503
    error = refused.json()["error"]
    assert error["code"] == "source_unavailable" and "Error 111" in error["message"]
    # Not followed by the identical request, and its slot was given back: the same
    # request is tried again (a second send), not answered with a job that never runs
    # nor refused as one too many at once.
    assert _post(read_client, sim_workload).status_code == 503
    assert len(sent) == 2
