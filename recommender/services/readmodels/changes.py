"""The workloads whose read-model inputs a refresh changed: noted by its writers
(``note``), collected around the refresh by ``upkeep.kept_current`` (``collected``).

A writer notes the workloads whose containers (added, their kinds, requests or the
live pods' mean requests), latest recommendations, OOM kills, replicas, activity,
labels, running hours or prices it wrote; outside a collection a note does nothing.
The totals store recomputes only those (namespace_totals.store); its first store of
each hour and a process's first store of each cluster recompute every workload:
what changed outside a refresh (the Django admin, retention) shows within the hour,
another list price, label key or currency from the restart that brought it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from contextvars import ContextVar

_noted: ContextVar[set[int] | None] = ContextVar("readmodel_changes", default=None)


def note(workload_ids: Iterable[int]) -> None:
    """Note that these workloads' read-model inputs changed (while collecting)."""
    noted = _noted.get()
    if noted is not None:
        noted.update(workload_ids)


@contextlib.contextmanager
def collected() -> Iterator[set[int]]:
    """The workloads noted in the block (the set fills as the block runs)."""
    noted: set[int] = set()
    token = _noted.set(noted)
    try:
        yield noted
    finally:
        _noted.reset(token)
