"""Pytest fixtures around the fake API server; test modules import the ones they use."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from recommender.cluster.kube_client import KubeClientSettings
from recommender.cluster.kubernetes import KubernetesAdapter
from tests.k8s_fake.server import FakeApiServer, load_fixtures, write_kubeconfig

# Small pages (the fixtures have 12 pods) and short waits keep the tests fast while
# still exercising pagination, retries and timeouts.
FAST = KubeClientSettings(
    connect_timeout_s=1.0,
    read_timeout_s=0.3,
    retries=2,
    backoff_s=0.01,
    max_backoff_s=0.05,
    page_size=3,
)


@pytest.fixture
def api_server() -> Iterator[FakeApiServer]:
    """The fake API server holding every fixture object."""
    server = FakeApiServer(load_fixtures()).start()
    yield server
    server.stop()


@pytest.fixture
def kubeconfig(api_server: FakeApiServer, tmp_path: Path) -> Path:
    """A kubeconfig whose context ``fake`` points at ``api_server``."""
    return write_kubeconfig(
        tmp_path / "kubeconfig", {"fake": api_server}, current="fake"
    )


@pytest.fixture
def sleeps() -> list[float]:
    """Backoff waits the adapter asked for (recorded instead of slept)."""
    return []


@pytest.fixture
def adapter(kubeconfig: Path, sleeps: list[float]) -> Iterator[KubernetesAdapter]:
    """An adapter reading ``api_server`` through the official client."""
    adapter = KubernetesAdapter(
        cluster_name="fake",
        context="fake",
        kubeconfig=str(kubeconfig),
        settings=FAST,
        sleep=sleeps.append,
    )
    yield adapter
    adapter.close()
