"""Request budgets shared by every process: "at most N per period", an atomic counter.

A budget is a counter per (key, window) in the cache: ``add`` creates it with an expiry
of one period (Redis ``SET NX EX``), ``incr`` counts a use (Redis ``INCR``, atomic), so
concurrent requests in any number of processes and hosts are counted exactly once each
and at most ``limit`` pass per window. With the embedded default the cache is locmem,
whose ``incr`` holds a lock: exact within the one process there is."""
# Windows are fixed (``now // period``): cheap and exact, at the price of a burst of up
# to twice the limit across a window's edge. The API's per-token and per-user rate
# (``api/auth.py``) and the per-user budget of comparisons and what-if
# (``services/access/heavy_jobs.py``) both take from here.

from __future__ import annotations

import math
from dataclasses import dataclass

from django.core.cache import cache

KEY_PREFIX = "vpaweb:budget:"


@dataclass(frozen=True)
class Taken:
    """The outcome of one ``take``."""

    is_allowed: bool
    used: int  # uses counted in this window, this one included
    retry_after_s: float  # until the window ends (0 when allowed)


def take(*, key: str, limit: int, period_s: float, now: float) -> Taken:
    """Count one use of ``key``'s budget of ``limit`` per ``period_s``; refused past it.

    ``now`` is a Unix time in seconds. A refused use is counted too (the counter only
    grows), so hammering a spent budget never frees it early.
    """
    if limit <= 0 or period_s <= 0:
        raise ValueError(f"limit and period_s must be positive, not {limit}/{period_s}")
    window = math.floor(now / period_s)
    counter = f"{KEY_PREFIX}{key}:{window}"
    ends_at = (window + 1) * period_s
    # The counter lives a little past its window, never less than the window itself.
    timeout = max(1, math.ceil(ends_at - now) + 1)
    used = 0
    for _ in range(3):  # the counter may expire between add and incr: create it again
        cache.add(counter, 0, timeout=timeout)
        try:
            used = cache.incr(counter)
            break
        except ValueError:
            continue
    else:
        raise RuntimeError(f"budget counter {counter} could not be counted")
    if used <= limit:
        return Taken(is_allowed=True, used=used, retry_after_s=0.0)
    return Taken(is_allowed=False, used=used, retry_after_s=max(0.0, ends_at - now))


def used(*, key: str, period_s: float, now: float) -> int:
    """Uses counted in ``key``'s current window (0 when none)."""
    window = math.floor(now / period_s)
    value = cache.get(f"{KEY_PREFIX}{key}:{window}")
    return int(value) if value is not None else 0
