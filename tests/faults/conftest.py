"""Fixtures of the fault suite: the servers it may stop and restart, real workers."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import InterfaceError, OperationalError, connection

from tests.conftest import service_missing
from tests.faults import services
from tests.integration.workers import start_worker, stop_worker


def _own(name: str) -> Any:
    server = services.RUNNING.get(name)
    if server is None:
        service_missing(
            f"the fault suite's own {name} (run it with `make test-faults`)"
        )
    return server


@pytest.fixture
def own_postgres(transactional_db) -> services.OwnPostgres:
    """The suite's PostgreSQL (the test database lives on it): stop it, restart it."""
    server = _own("postgres")
    assert connection.settings_dict["PORT"] in (server.port, str(server.port))
    return server


@pytest.fixture
def own_redis() -> Iterator[services.OwnRedis]:
    """The suite's Redis (broker, results, cache); running again after the test."""
    server = _own("redis")
    yield server
    if server.process is None:
        server.start()


@pytest.fixture
def workers(own_postgres, own_redis) -> Iterator[Callable[..., Any]]:
    """Start real `celery worker --pool solo` processes on a private queue:
    ``workers(env)`` returns (queue, process); all are stopped after the test.

    A whole-cluster refresh does its own first contact here: the faults are injected
    into that one run (the fan-out of first contacts to shard tasks and a killed
    shard: tests/integration/test_first_contact_shards.py)."""
    queue = f"vpaweb-faults-{uuid.uuid4().hex[:8]}"
    started = []

    def start(env: dict[str, str]) -> tuple[str, Any]:
        env = {"VPAWEB_FIRST_CONTACT_BY_SHARD": "0", **env}
        process = start_worker(queue, env=env, hostname=f"{uuid.uuid4().hex[:8]}@%h")
        started.append(process)
        return queue, process

    yield start
    for process in started:
        if process.poll() is None:
            stop_worker(process)


def poll(condition: Callable[[], Any], *, what: str, timeout_s: float = 120.0) -> Any:
    """Poll ``condition`` until it returns something true, through database outages
    (the test's own connection is reopened); fail naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = condition()
        except (OperationalError, InterfaceError):
            connection.close()
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(0.2)
