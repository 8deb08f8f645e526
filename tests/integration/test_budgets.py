"""Budgets are atomic across processes: clients in several processes at once, on one
Redis, get exactly the budget through (services/access/budgets.py, api/auth.py)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time

import pytest
from django.conf import settings

from tests.conftest import service_missing
from tests.integration.workers import ROOT

pytestmark = pytest.mark.integration

PROCESSES = 4
ATTEMPTS = 150
BUDGET = 200  # a day's budget: one window for the whole test


def require_redis() -> None:
    if not settings.REDIS_URL:
        service_missing("Redis (REDIS_URL)")
    try:
        import redis

        redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2).ping()
    except Exception:
        service_missing(f"Redis at {settings.REDIS_URL}")


def test_concurrent_clients_in_several_processes_get_at_most_the_budget():
    require_redis()
    token_id = random.randrange(10**8, 10**9)  # a budget no other run has touched
    start_at = time.time() + 4  # after every process has set Django up
    env = {
        **os.environ,
        "REDIS_URL": settings.REDIS_URL,
        "SECRET_KEY": "integration-test-only",
    }
    clients = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.integration.budget_client",
                f"{BUDGET}/day",
                str(token_id),
                str(ATTEMPTS),
                str(start_at),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(PROCESSES)
    ]
    outputs = [client.communicate(timeout=120) for client in clients]
    assert all(c.returncode == 0 for c in clients), [o[1][-500:] for o in outputs]
    allowed = [int(out.split()[-1]) for out, _ in outputs]
    windows = int(time.time() // 86400) - int(start_at // 86400) + 1
    # 600 attempts at once: exactly the budget passes (at most twice it, had the run
    # crossed midnight UTC into a second window).
    assert sum(allowed) <= BUDGET * windows, allowed
    if windows == 1:
        assert sum(allowed) == BUDGET, allowed
