"""Personas and a small fleet for dashboard tests."""

from __future__ import annotations

import pytest
from django.test import Client

from recommender.roles import Role
from tests.factories import make_cluster, make_recommendation, make_user, make_workload

MI = 2**20


def engine_explanation(*, hours: int = 24) -> dict:
    """A real ``Explanation.to_dict()``: the engine fed 0.3 cores and 200 MB."""
    import numpy as np

    from recommender.engine import AggregateSet, SampleBatch, get_profile, recommend

    profile = get_profile("vpa")
    aggregates = AggregateSet.empty(profile, 1)
    times = 1.7e9 + np.arange(hours * 60) * 60.0
    aggregates.add_samples(
        SampleBatch.from_grid(
            series_aggregate=np.array([0]),
            series_keys=["pod-a"],
            timestamp_s=times,
            cpu_cores=np.full((1, times.size), 0.3),
            memory_bytes=np.full((1, times.size), 2e8),
        )
    )
    (result,) = recommend(aggregates, rows=[0], profile=profile, containers_in_pod=[1])
    return result.explanation.to_dict()


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
    """Two clusters, four workloads: over, under, within bounds, no data."""
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
        # 25 h of samples: past the history gate (24 h), so its patch is shown.
        explanation=engine_explanation(hours=25),
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
