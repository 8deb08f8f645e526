"""Admission of expensive requests: namespace comparisons and what-if replays."""
# A replay reads days of history and recomputes every hour of it: seconds of CPU each.
# So, per person (a user, whichever of their tokens or their session asks; a token made
# on the command line on its own) and shared by every process (the cache: Redis in
# production):
#
# - at most ``VPAWEB_HEAVY_JOBS_RUNNING`` at once (a counter taken when one starts and
#   given back when it ends; it expires after the task time limit, so a killed worker
#   cannot hold a slot for good);
# - at most ``VPAWEB_HEAVY_JOBS_PER_MINUTE`` started a minute (``budgets.take``, the
#   API rate's mechanism), counted only for jobs that start: one refused for another
#   limit takes nothing from it;
# - a background comparison identical to one queued, running or done within the hour
#   (same parameters) is not run again: its id is answered.
#
# A refusal is ``Throttled`` (429 with Retry-After in the API, a message on the page);
# while the cache is away none is admitted and none is followed: ``SourceUnavailable``
# (503). A background job the broker refuses holds neither its slot nor its dedupe
# entry (``start_background``).
# Background comparisons also run on a Celery queue of their own (``HEAVY_QUEUE``), so
# the control loops' queue never waits behind them. One run in a request (``slot``)
# also holds one of this process's few heavy threads (a quarter of its request
# threads, ``GUNICORN_THREADS``, at least one), taken without waiting: past them the
# request is ``Busy`` (503) at once, so however many people ask, the other threads stay
# free for /healthz and the pages.

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache
from kombu.exceptions import OperationalError as KombuError
from redis.exceptions import RedisError

from recommender.errors import Busy, SourceUnavailable, Throttled
from recommender.services.access import budgets

logger = logging.getLogger(__name__)

RUNNING_KEY = "vpaweb:heavy:running:"
SAME_KEY = "vpaweb:heavy:same:"
# How soon a request refused for want of a heavy thread may try again (seconds).
BUSY_RETRY_AFTER_S = 5.0

# This process's heavy threads: a semaphore whose size is read from the settings at
# each use (a lock and a count), so a changed setting holds at once.
_heavy_threads_lock = threading.Lock()
_heavy_threads_held = 0


def heavy_threads() -> int:
    """How many request threads of this process may run heavy work at once."""
    return max(1, int(settings.REQUEST_THREADS * settings.HEAVY_SYNC_SHARE))


def _hold_heavy_thread() -> bool:
    global _heavy_threads_held
    with _heavy_threads_lock:
        if _heavy_threads_held >= heavy_threads():
            return False
        _heavy_threads_held += 1
        return True


def _release_heavy_thread() -> None:
    global _heavy_threads_held
    with _heavy_threads_lock:
        _heavy_threads_held = max(0, _heavy_threads_held - 1)


def _same_key(kind: str, params: dict[str, Any]) -> str:
    text = json.dumps([kind, params], sort_keys=True, default=str)
    return f"{SAME_KEY}{hashlib.sha256(text.encode()).hexdigest()}"


def _running_key(who: str) -> str:
    return f"{RUNNING_KEY}{who}"


@contextmanager
def cache_needed() -> Iterator[None]:
    """Turn the cache's failure inside the block into ``SourceUnavailable``: the
    budgets, progress and answers of comparisons and what-ifs live in the cache."""
    try:
        yield
    except RedisError as exc:
        raise SourceUnavailable(
            "comparisons and what-ifs keep their budgets, progress and answers in "
            f"the cache, and the cache (Redis) is away; try again later ({exc})"
        ) from None


def take_slot(*, who: str, now_s: float) -> None:
    """Count one job of ``who`` ("user-7", "token-3") as started; Throttled past a
    budget, SourceUnavailable while the cache is away."""
    with cache_needed():
        _take_slot(who=who, now_s=now_s)


def _take_slot(*, who: str, now_s: float) -> None:
    # The running slot first: a job refused for it takes nothing from the minute's
    # budget (20 at once would otherwise spend the minute while 2 ran).
    key = _running_key(who)
    running = 0
    for _ in range(3):  # the counter may expire between add and incr
        cache.add(key, 0, timeout=settings.CELERY_TASK_TIME_LIMIT)
        try:
            running = cache.incr(key)
            break
        except ValueError:
            continue
    if running > settings.HEAVY_JOBS_RUNNING:
        give_slot_back(who=who)
        raise Throttled(
            f"at most {settings.HEAVY_JOBS_RUNNING} comparisons and what-ifs at once "
            "per user (VPAWEB_HEAVY_JOBS_RUNNING); wait for one to finish",
            retry_after_s=5.0,
        )
    taken = budgets.take(
        key=f"heavy-{who}",
        limit=settings.HEAVY_JOBS_PER_MINUTE,
        period_s=60,
        now=now_s,
    )
    if not taken.is_allowed:
        give_slot_back(who=who)
        raise Throttled(
            f"at most {settings.HEAVY_JOBS_PER_MINUTE} comparisons and what-ifs a "
            "minute per user (VPAWEB_HEAVY_JOBS_PER_MINUTE); try again in "
            f"{max(1, round(taken.retry_after_s))} s",
            retry_after_s=taken.retry_after_s,
        )


def give_slot_back(*, who: str) -> None:
    """One expensive job of ``who`` ended (never below zero)."""
    try:
        if cache.decr(_running_key(who)) < 0:
            cache.set(_running_key(who), 0, timeout=settings.CELERY_TASK_TIME_LIMIT)
    except ValueError:
        pass  # expired: nothing to give back


@contextmanager
def slot(*, who: str, now_s: float) -> Iterator[None]:
    """Run a synchronous expensive request on one of this process's heavy threads
    (``Busy`` when none is free; no budget is taken then) and within the user's
    budgets."""
    if not _hold_heavy_thread():
        raise Busy(
            f"this server already runs {heavy_threads()} comparisons and what-ifs, "
            "as many as it may at once beside its other requests "
            "(a quarter of GUNICORN_THREADS); try again in "
            f"{BUSY_RETRY_AFTER_S:g} s",
            retry_after_s=BUSY_RETRY_AFTER_S,
        )
    try:
        take_slot(who=who, now_s=now_s)
        try:
            yield
        finally:
            give_slot_back(who=who)
    finally:
        _release_heavy_thread()


@dataclass(frozen=True)
class Admitted:
    """A background job to follow: new (queue it) or the same one already there."""

    token: str
    is_new: bool


def admit_background(
    *, kind: str, params: dict[str, Any], who: str, token: str, now_s: float
) -> Admitted:
    """Admit a background job under ``token`` unless an identical one exists (its
    token is answered then, at no cost); Throttled past the user's budgets.

    The slot taken here is given back by the job when it ends
    (``give_slot_back``)."""
    same = _same_key(kind, params)
    with cache_needed():
        existing = cache.get(same)
    if existing is not None:
        logger.info("%s %s: identical to job %s", kind, params, existing)
        return Admitted(token=str(existing), is_new=False)
    take_slot(who=who, now_s=now_s)
    with cache_needed():
        if not cache.add(same, token, timeout=3600):  # the same request, a moment ago
            give_slot_back(who=who)
            return Admitted(token=str(cache.get(same) or token), is_new=False)
    return Admitted(token=token, is_new=True)


def forget_background(*, kind: str, params: dict[str, Any]) -> None:
    """A failed job is not answered to identical requests: they run it again."""
    cache.delete(_same_key(kind, params))


def start_background(
    *,
    kind: str,
    params: dict[str, Any],
    who: str,
    new_token: Callable[[], str],
    send: Callable[[str], object],
    now_s: float,
) -> str:
    """Admit a background job (``admit_background``, under a token from
    ``new_token``) and, if it is new, queue it (``send(token)``: the task's
    ``delay``); the token to follow. Throttled past ``who``'s budgets;
    SourceUnavailable while the cache or the broker is away: a job the broker refused
    is forgotten (an identical request tries again) and its slot is given back."""
    with cache_needed():
        token = new_token()
    admitted = admit_background(
        kind=kind, params=params, who=who, token=token, now_s=now_s
    )
    if admitted.is_new:
        try:
            send(admitted.token)
        except (KombuError, RedisError) as exc:
            logger.warning("background %s not queued: %s", kind, exc)
            try:
                forget_background(kind=kind, params=params)
                give_slot_back(who=who)
            except RedisError:  # the cache is away too: both expire by themselves
                logger.warning("background %s: slot and entry left to expire", kind)
            raise SourceUnavailable(
                "comparisons and what-ifs cannot be queued while the broker (Redis) "
                f"is away; try again later ({exc})"
            ) from None
    return admitted.token
