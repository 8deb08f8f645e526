"""Personas and a small fleet for dashboard tests."""

from __future__ import annotations

import pytest
from django.test import Client

from recommender.roles import Role
from tests.factories import make_cluster, make_recommendation, make_user, make_workload

MI = 2**20


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    # PBKDF2 costs ~0.2 s per user; tests don't need it.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def viewer(db):
    return make_user("vera", Role.VIEWER)


@pytest.fixture
def operator(db):
    return make_user("olga", Role.OPERATOR)


@pytest.fixture
def admin_user(db):
    return make_user("adam", Role.ADMIN)


@pytest.fixture
def outsider(db):
    return make_user("otto", None)


def client_for(user) -> Client:
    """A test client logged in as ``user``."""
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def viewer_client(viewer):
    return client_for(viewer)


@pytest.fixture
def operator_client(operator):
    return client_for(operator)


@pytest.fixture
def admin_client_(admin_user):
    return client_for(admin_user)


@pytest.fixture
def small_fleet(db):
    """Two clusters, four workloads: over-, under-provisioned, within bounds, no data."""
    prod, dev = make_cluster("prod"), make_cluster("dev")
    over = make_workload(
        prod,
        "checkout",
        containers={
            "app": {
                "request_cpu_millicores": 1000,
                "request_memory_bytes": 1024 * MI,
                "limit_cpu_millicores": 2000,
                "limit_memory_bytes": 2048 * MI,
            }
        },
    )
    make_recommendation(
        over.containers.get(),
        cpu_millicores=250,
        memory_bytes=300 * MI,
        explanation={"reason": None, "confidence": 3.5, "sample_count": 4000},
    )
    under = make_workload(
        prod,
        "payments",
        namespace="pay",
        containers={
            "app": {"request_cpu_millicores": 100, "request_memory_bytes": 128 * MI}
        },
    )
    make_recommendation(
        under.containers.get(), cpu_millicores=400, memory_bytes=512 * MI
    )
    within = make_workload(
        dev,
        "search",
        namespace="team",
        containers={
            "app": {"request_cpu_millicores": 250, "request_memory_bytes": 300 * MI}
        },
    )
    make_recommendation(
        within.containers.get(), cpu_millicores=250, memory_bytes=300 * MI
    )
    nodata = make_workload(dev, "batch", namespace="team", kind="CronJob")
    return {"over": over, "under": under, "within": within, "nodata": nodata}
