"""Real Celery workers for integration tests: `celery worker --pool solo` processes on a
private queue, using pytest-django's test database and the test Redis."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import connection

from tests.conftest import service_missing

ROOT = Path(__file__).resolve().parents[2]


def require_postgres_and_redis() -> None:
    """Skip (fail under CI=true) unless PostgreSQL and a reachable Redis are set."""
    if connection.vendor != "postgresql":
        service_missing("PostgreSQL (DATABASE_URL)")
    if not settings.REDIS_URL:
        service_missing("Redis (REDIS_URL)")
    try:
        import redis

        redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2).ping()
    except Exception:
        service_missing(f"Redis at {settings.REDIS_URL}")


def start_worker(
    queue: str, *, env: dict[str, str], hostname: str | None = None
) -> subprocess.Popen[bytes]:
    """A worker consuming ``queue`` (also its default queue: tests/integration/
    worker_app) on the test database; ``env`` adds settings."""
    db = connection.settings_dict
    full_env = {
        **os.environ,
        # The worker must use pytest-django's test database, not the configured one.
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/"
        f"{db['NAME']}",
        "REDIS_URL": settings.REDIS_URL,
        "SECRET_KEY": "integration-test-only",
        "VPAWEB_TEST_QUEUE": queue,
        **env,
    }
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "tests.integration.worker_app",
        "worker",
        "--pool",
        "solo",
        "--queues",
        queue,
        "--loglevel",
        "WARNING",
        "--without-heartbeat",
        "--without-gossip",
        "--without-mingle",
    ]
    if hostname:
        command += ["--hostname", hostname]
    return subprocess.Popen(
        command,
        cwd=ROOT,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def stop_worker(process: subprocess.Popen[bytes]) -> None:
    """Terminate a worker; print its output if it ended badly."""
    process.terminate()
    try:
        output, _ = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
    if process.returncode not in (0, -15):
        print(output.decode(errors="replace"))


@contextmanager
def two_workers_on_one_queue(env: dict[str, str]) -> Iterator[str]:
    """Two worker processes consuming one private queue (also their default queue,
    where their tasks queue what they queue): tasks run side by side. Yields it."""
    require_postgres_and_redis()
    queue = f"vpaweb-test-{uuid.uuid4().hex[:8]}"
    processes = [
        start_worker(queue, env=env, hostname=f"{uuid.uuid4().hex[:8]}@%h")
        for _ in range(2)
    ]
    try:
        yield queue
    finally:
        for process in processes:
            stop_worker(process)
