"""API test fixtures: people and tokens by role, a small cluster with history."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from recommender.models import ApiToken, Recommendation, Workload
from recommender.roles import Role
from recommender.services.access.tokens import create_token, revoke_token
from tests.factories import make_cluster, make_recommendation, make_user, make_workload


@pytest.fixture
def operator(db: Any):
    return make_user("olga", Role.OPERATOR)


@pytest.fixture
def viewer(db: Any):
    return make_user("victor", Role.VIEWER)


@pytest.fixture
def outsider(db: Any):
    """Signed in, but with no role."""
    return make_user("nobody", None)


def _token(name: str, scope: str, user: Any = None) -> str:
    _, key = create_token(name=name, scope=scope, created_by=user, now=timezone.now())
    return key


@pytest.fixture
def read_key(db: Any) -> str:
    return _token("ci-read", ApiToken.Scope.READ)


@pytest.fixture
def write_key(operator: Any) -> str:
    return _token("ci-write", ApiToken.Scope.WRITE, operator)


@pytest.fixture
def revoked_key(db: Any) -> str:
    key = _token("old", ApiToken.Scope.WRITE)
    token = ApiToken.objects.get(name="old")
    revoke_token(token_id=token.pk, revoked_by=None, now=timezone.now())
    return key


def token_client(key: str) -> Client:
    """A test client sending ``Authorization: Bearer <key>``."""
    return Client(HTTP_AUTHORIZATION=f"Bearer {key}")


@pytest.fixture
def read_client(read_key: str) -> Client:
    return token_client(read_key)


@pytest.fixture
def write_client(write_key: str) -> Client:
    return token_client(write_key)


@pytest.fixture
def session_client() -> Callable[[Any], Client]:
    def make(user: Any) -> Client:
        client = Client()
        client.force_login(user)
        return client

    return make


@pytest.fixture
def shop(db: Any) -> Workload:
    """prod/shop/Deployment/web: containers app (recommended) and sidecar (not yet)."""
    cluster = make_cluster("prod")
    workload = make_workload(
        cluster,
        "web",
        namespace="shop",
        containers={
            "app": {
                "request_cpu_millicores": 1000,
                "request_memory_bytes": 1024 * 2**20,
                "limit_cpu_millicores": 2000,
                "limit_memory_bytes": 2048 * 2**20,
            },
            "sidecar": {
                "request_cpu_millicores": 100,
                "request_memory_bytes": 64 * 2**20,
            },
        },
    )
    app = workload.containers.get(name="app")
    make_recommendation(
        app,
        cpu_millicores=400,
        memory_bytes=300 * 2**20,
        created_at=timezone.now() - timezone.timedelta(hours=2),
        explanation={"reason": "older"},
    )
    latest = make_recommendation(
        app, cpu_millicores=587, memory_bytes=250 * 2**20, explanation={"samples": 1440}
    )
    # Eight days of history: past the history gate (VPAWEB_MIN_HISTORY_HOURS).
    Recommendation.objects.filter(pk=latest.pk).update(confidence=8.0)
    return workload


@pytest.fixture
def sim_workload(db: Any) -> Workload:
    """A workload of the simulated fleet (it has usage history in its source)."""
    from recommender.services.connections import cluster_adapter_for

    cluster = make_cluster("sim-api")
    snapshot = cluster_adapter_for(cluster).discover()
    sim = next(w for w in snapshot.workloads if w.pods)
    return make_workload(cluster, sim.name, namespace=sim.namespace, kind=sim.kind)
