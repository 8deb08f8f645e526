"""Budgets of expensive requests belong to the person behind a request, not to one of
their tokens; a refused request takes nothing from the minute's budget; one process
runs only a share of its threads' worth of them; one person holds a bounded number of
tokens."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from recommender.api import whatif_views
from recommender.errors import InvalidInput
from recommender.models import Workload
from recommender.roles import Role
from recommender.services.access import budgets, heavy_jobs
from recommender.services.access.tokens import create_token
from tests.api.conftest import token_client
from tests.factories import make_user
from tests.web.conftest import client_for

BODY = {"profile": "vpa", "days": 0.5}
NOW_S = 1e9 + 1


@pytest.fixture
def one_minute(monkeypatch: Any) -> None:
    """One budget window for the whole test, whatever the clock says."""
    monkeypatch.setattr(whatif_views, "time", SimpleNamespace(time=lambda: NOW_S))


def _post(client: Client, workload: Workload) -> Any:
    return client.post(
        f"/api/v1/workloads/{workload.pk}/what-if",
        json.dumps(BODY),
        content_type="application/json",
    )


def _clients_of(user: Any, count: int) -> list[Client]:
    keys = [
        create_token(
            name=f"{user.username}-{index}",
            scope="read",
            created_by=user,
            now=timezone.now(),
        )[1]
        for index in range(count)
    ]
    return [token_client(key) for key in keys]


def test_every_token_and_the_session_of_one_person_share_one_budget(
    sim_workload: Workload, settings: Any, one_minute: None
) -> None:
    settings.HEAVY_JOBS_PER_MINUTE = 3
    viewer = make_user("vera", Role.VIEWER)
    clients = [*_clients_of(viewer, 4), client_for(viewer)]

    statuses = [_post(client, sim_workload).status_code for client in clients]

    assert statuses == [200, 200, 200, 429, 429]
    # Someone else has a budget of their own.
    other = _clients_of(make_user("otto", Role.VIEWER), 1)[0]
    assert _post(other, sim_workload).status_code == 200


def test_jobs_at_once_are_per_person_and_refusals_cost_nothing(
    sim_workload: Workload, settings: Any, one_minute: None
) -> None:
    settings.HEAVY_JOBS_PER_MINUTE = 2
    settings.HEAVY_JOBS_RUNNING = 1
    viewer = make_user("vera", Role.VIEWER)
    clients = _clients_of(viewer, 3)
    heavy_jobs.take_slot(who=f"user-{viewer.pk}", now_s=NOW_S)  # one running

    for client in clients * 3:
        refused = _post(client, sim_workload)
        assert refused.status_code == 429
        assert "at once" in refused.json()["error"]["message"]
    heavy_jobs.give_slot_back(who=f"user-{viewer.pk}")

    # The one taken above and nine refusals: the minute still has one left.
    assert _post(clients[0], sim_workload).status_code == 200
    assert _post(clients[1], sim_workload).status_code == 429


def test_heavy_work_holds_at_most_its_share_of_the_threads(
    sim_workload: Workload, settings: Any, one_minute: None, caplog: Any
) -> None:
    settings.REQUEST_THREADS = 8
    settings.HEAVY_SYNC_SHARE = 0.25
    assert heavy_jobs.heavy_threads() == 2
    viewer = make_user("vera", Role.VIEWER)
    client = _clients_of(viewer, 1)[0]
    held = [heavy_jobs._hold_heavy_thread() for _ in range(2)]
    try:
        assert held == [True, True]
        busy = _post(client, sim_workload)
        assert busy.status_code == 503
        assert busy.json()["error"]["code"] == "busy"
        assert int(busy["Retry-After"]) >= 1
        # One warning line, not a server error per refused request.
        assert not [r for r in caplog.records if r.levelname == "ERROR"]
        assert any("busy" in r.getMessage() for r in caplog.records)
        # Refused before any budget was taken.
        assert budgets.used(key=f"heavy-user-{viewer.pk}", period_s=60, now=NOW_S) == 0
    finally:
        for _ in held:
            heavy_jobs._release_heavy_thread()
    assert _post(client, sim_workload).status_code == 200
    assert heavy_jobs._hold_heavy_thread()
    heavy_jobs._release_heavy_thread()


def test_one_person_holds_a_bounded_number_of_tokens(db: Any, settings: Any) -> None:
    settings.API_TOKENS_PER_USER = 2
    viewer = make_user("vera", Role.VIEWER)
    _clients_of(viewer, 2)

    with pytest.raises(InvalidInput, match="VPAWEB_API_TOKENS_PER_USER"):
        create_token(name="third", scope="read", created_by=viewer, now=timezone.now())
    page = client_for(viewer).post("/tokens/", {"name": "third", "scope": "read"})
    assert "VPAWEB_API_TOKENS_PER_USER" in page.content.decode()

    # Command-line tokens (no owner) are not counted against anyone.
    for index in range(3):
        create_token(
            name=f"cli{index}", scope="read", created_by=None, now=timezone.now()
        )
