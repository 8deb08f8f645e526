"""The embedded scheduler: the periodic tasks of the beat schedule, in one loop.

Used by ``manage.py run_scheduler`` (in the foreground) and ``manage.py serve`` (in a
background thread) when no Celery beat runs. Without ``REDIS_URL`` the tasks run
in-process; with it, ``delay()`` hands them to the workers. A database connection a
restart broke is replaced before each task: the loop recovers by itself.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from django.db import close_old_connections, connection
from django.utils import timezone

from recommender.services.actuation import control
from recommender.tasks import expire_idle_aggregates as expire_idle_aggregates_task
from recommender.tasks import prune_history as prune_history_task
from recommender.tasks import refresh_all_clusters as refresh_all_clusters_task
from recommender.tasks import update_all_clusters as update_all_clusters_task

logger = logging.getLogger(__name__)

# Upstream garbage-collects idle aggregates hourly.
EXPIRE_INTERVAL_S = 3600.0
# History past its retention is pruned hourly, half an hour after the expiry (the beat
# schedule's minutes 7 and 37), each run within VPAWEB_RETENTION_BUDGET_S.
PRUNE_INTERVAL_S = 3600.0
PRUNE_OFFSET_S = 1800.0


def _replace_broken_connection() -> None:
    """Close this thread's connection if a database restart broke it (or it is past
    CONN_MAX_AGE); the next query opens a new one."""
    # Inside a caller's transaction (an embedding test's) the connection is not the
    # loop's to close: Django would close it for not being in autocommit.
    if not connection.in_atomic_block:
        close_old_connections()


def _dispatch(task: Any, what: str) -> None:
    """Run or queue ``task``; a failure is logged and the loop goes on (the next
    cycle starts from checkpoints)."""
    # The loop's connection lives as long as the process.
    _replace_broken_connection()
    try:
        task.delay()
    except Exception:
        logger.exception("scheduled %s failed", what)


def run_periodic(
    *, stop: threading.Event, interval_s: float, max_cycles: int | None = None
) -> int:
    """Refresh all clusters every ``interval_s`` until ``stop``; returns cycles run."""
    cycles = 0
    next_expire = time.monotonic() + EXPIRE_INTERVAL_S
    next_prune = time.monotonic() + PRUNE_OFFSET_S
    while not stop.is_set() and (max_cycles is None or cycles < max_cycles):
        started = time.monotonic()
        _dispatch(refresh_all_clusters_task, "refresh")
        # The updater runs after the refresh, on its fresh recommendations.
        _dispatch(update_all_clusters_task, "updater cycle")
        if started >= next_expire:
            next_expire = started + EXPIRE_INTERVAL_S
            _dispatch(expire_idle_aggregates_task, "expiry")
        if started >= next_prune:
            next_prune = started + PRUNE_INTERVAL_S
            # After the cycle's refresh, bounded by its budget: the next refresh
            # starts at most that much later.
            _dispatch(prune_history_task, "prune")
        cycles += 1
        elapsed = time.monotonic() - started
        logger.info("scheduler cycle %d took %.2fs", cycles, elapsed)
        if max_cycles is not None and cycles >= max_cycles:
            break
        # Sleep the rest of the interval, waking at once on stop.
        stop.wait(max(interval_s - elapsed, 0.0))
    # A graceful stop: another process may lead the updater at once.
    _replace_broken_connection()
    try:
        control.release_locks(now=timezone.now())
    except Exception:
        logger.exception("releasing the updater leases failed")
    return cycles
