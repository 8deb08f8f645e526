"""Loaded with ``-p tests.xdist_services`` (pyproject's addopts), before Django's
settings.

Under pytest-xdist each worker process gets Redis database ``N - i`` for
``REDIS_URL``'s ``N`` (worker ``gw<i>``), so two workers' brokers, caches and throttle
counters never meet; the Celery workers a test starts inherit it. PostgreSQL needs
nothing: pytest-django already gives each worker its own test database
(``test_<name>_gw<i>``)."""

from __future__ import annotations

import os
import re


def worker_redis_url(url: str, worker: str) -> str:
    """``url`` with its database number lowered by the worker's index."""
    match = re.fullmatch(r"(redis://[^/]+)/(\d+)", url)
    index = int(worker.removeprefix("gw")) if worker.startswith("gw") else 0
    if match is None or index == 0:
        return url
    database = int(match.group(2)) - index
    if database < 0:
        raise ValueError(
            f"REDIS_URL {url!r} leaves no database for xdist worker {worker}"
        )
    return f"{match.group(1)}/{database}"


_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _worker and os.environ.get("REDIS_URL"):
    os.environ["REDIS_URL"] = worker_redis_url(os.environ["REDIS_URL"], _worker)
