"""What-ifs too big for a request: their cost estimate and their background run.

A what-if's cost is estimated before it runs in container-days: the workload's
containers times the days of history replayed (``cost``). Up to
``VPAWEB_WHATIF_SYNC_CONTAINER_DAYS`` it is answered in the request; past it, it runs
on the heavy queue (``tasks.what_if``), started like a namespace comparison
(``heavy_jobs.start_background``: the user's budgets, an identical request follows
the same job). Its state and answer are kept in the cache under a token (``stored``):
queued, running, done (``result``: the synchronous answer) or failed (the error).
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.cache import cache

from recommender import errors
from recommender.models import Container
from recommender.services.access import heavy_jobs
from recommender.services.replay.whatif import parse_days, what_if

logger = logging.getLogger(__name__)

KIND = "whatif"
STORED_TTL_S = 3600
# A failed job's error, rebuilt from its code when the job is read.
ERRORS: dict[str, type[errors.VpawebError]] = {
    cls.code: cls
    for cls in (errors.NotFound, errors.InvalidInput, errors.SourceUnavailable)
}


def cost(*, workload_id: int, days: object) -> float:
    """The replay's estimated cost in container-days (InvalidInput for bad ``days``)."""
    containers = Container.objects.filter(workload_id=workload_id).count()
    return max(1, containers) * parse_days(days)


def runs_in_background(*, workload_id: int, days: object) -> bool:
    """Whether the what-if is past the synchronous budget."""
    budget = float(settings.WHATIF_SYNC_CONTAINER_DAYS)
    return cost(workload_id=workload_id, days=days) > budget


def _key(token: str) -> str:
    return f"vpaweb:whatif:{token}"


def new_token() -> str:
    """A fresh id for a background what-if, stored as queued."""
    token = uuid.uuid4().hex
    cache.set(_key(token), {"state": "queued"}, STORED_TTL_S)
    return token


def stored(token: str) -> dict[str, Any] | None:
    """A background what-if's state; None when unknown or expired; SourceUnavailable
    while the cache is away."""
    if not token.isalnum():
        return None
    with heavy_jobs.cache_needed():
        found: dict[str, Any] | None = cache.get(_key(token))
    return found


def failure(state: dict[str, Any]) -> errors.VpawebError | None:
    """A failed job's error, as the synchronous request would have raised it; None
    for an unexpected failure (a server error)."""
    cls = ERRORS.get(state.get("code", ""))
    if cls is None:
        return None
    error = cls(state.get("message", "the what-if failed"))
    error.fields = dict(state.get("fields") or {})
    return error


def run_stored(
    token: str, params: dict[str, Any], *, now: datetime, who: str | None = None
) -> None:
    """Run one what-if, keeping its state and answer in the cache under ``token``;
    then give ``who``'s slot back (``heavy_jobs.start_background`` took it)."""
    key = _key(token)
    try:
        cache.set(key, {"state": "running"}, STORED_TTL_S)
        result = what_if(**params, now=now)
    except errors.VpawebError as exc:
        state = {"code": exc.code, "message": exc.message, "fields": exc.fields}
        cache.set(key, {"state": "failed", **state}, STORED_TTL_S)
        heavy_jobs.forget_background(kind=KIND, params=params)
    except Exception:
        logger.exception("background what-if %s failed", token)
        message = "the what-if failed unexpectedly; it has been logged"
        cache.set(
            key, {"state": "failed", "code": "error", "message": message}, STORED_TTL_S
        )
        heavy_jobs.forget_background(kind=KIND, params=params)
        raise
    else:
        cache.set(key, {"state": "done", "result": result}, STORED_TTL_S)
    finally:
        if who is not None:
            heavy_jobs.give_slot_back(who=who)
