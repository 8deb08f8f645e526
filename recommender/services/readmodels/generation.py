""" "The webhook's inputs changed": a generation number every webhook process watches.

Bumped after each refresh cycle and each policy change. It lives in the Django cache
(Redis when configured, so a separate ``webhook serve`` process sees it) and in this
process (so in-process callers, such as the simulated cluster, reload at once). Kept
apart from ``snapshot.py`` so the refresh and the policy services can import it without
import cycles.
"""

from __future__ import annotations

import itertools
import logging
import time

from django.core.cache import cache

logger = logging.getLogger(__name__)

GENERATION_KEY = "vpaweb:admission:generation"
_local = itertools.count(1)
local_generation = 0


def mark_admission_data_changed() -> None:
    """Tell every webhook process to reload its cache."""
    global local_generation
    local_generation = next(_local)
    try:
        cache.set(GENERATION_KEY, time.time_ns(), timeout=None)
    except Exception:  # the cache being down must not fail a refresh
        logger.warning("could not bump the admission cache generation", exc_info=True)


def shared_generation() -> tuple[int, int | None]:
    """(this process's generation, the cache's), compared by the snapshot holders."""
    try:
        value = cache.get(GENERATION_KEY)
    except Exception:
        value = None
    return local_generation, value if isinstance(value, int) else None
