"""Engine state a worker process keeps between cycles, checked against the stored
checkpoints every cycle."""
# Without it, every cycle decodes every checkpoint and reads again from the source the
# minutes since each one's watermark (checkpoints are written every
# ``VPAWEB_CHECKPOINT_INTERVAL_S``, docs/refresh.md "How the cycle scales"): at 100,000
# containers most of the ingest phase. Here each container's engine row as a window
# left it is kept, with what it continues:
#
# - ``version``: the ``Checkpoint.version`` its state started from (a write by this
#   window moves it on by one, as the compare-and-swap does);
# - ``fed_until_s``: every sample up to this grid time is in it.
#
# The next window uses it only when the stored checkpoint still has that version and
# histogram key and a state, and the kept state was fed neither past the window's end
# nor from before its history: then it is the stored state plus the samples of
# ``(watermark, fed_until_s]``, which is exactly what a process without it would
# rebuild by decoding and reading those minutes again (the engine's result does not
# depend on where the sample stream is cut: ``tests/services/test_refresh_scale.py``
# compares a warm and a cold process byte for byte). Any other write (another worker,
# an expiry reset, an operator's profile edit) moves the version or the key, and the
# row is read from the database as before.
#
# A window takes its rows out of the keeping when it starts and puts them back only
# once stored: a failed window (a source down, a lost compare-and-swap) leaves nothing
# that could be half fed. Only sources that keep history use it (a live source's
# samples depend on when they were observed, and its checkpoints are written every
# cycle anyway). Memory: the rows of the containers this process refreshed last, about
# 3 KB each (0.3 GB at 100,000 containers).
#
# Rows are kept by scope, the (cluster, namespace) of the window that kept them
# (namespace None: the whole cluster). A window that keeps its rows first forgets
# those an earlier window of its scope kept and it did not take (a whole-cluster
# window: of every scope of its cluster): containers that vanished, or that no window
# of this process reads any more. Without that, such a row would stay for good and
# hold its whole window's engine state in memory (the rows of a window share it).
# Within ``one_pass`` (the windows of one refresh pass: a large cluster's steady
# windows, ``chunking.steady_windows``) that forgetting waits for the pass's end, so
# one window does not forget the rows another window of the pass just kept.

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime

from recommender.engine.aggregation import AggregateSet
from recommender.engine.usage_hours import HourlyUsage

# The window that kept a row: (cluster id, namespace), namespace None for the whole
# cluster.
Scope = tuple[int, str | None]


@dataclass(frozen=True)
class Kept:
    """One container's engine row as a stored window left it."""

    aggregates: AggregateSet  # shared by the rows of that window's group
    row: int
    key_text: str
    version: int
    fed_until_s: float
    scope: Scope
    # The usage hours of the samples fed since the stored watermark (keys: container
    # ids; shared by the window's rows): stored with the checkpoint when it is
    # written. None: nothing pending.
    usage: HourlyUsage | None = None


_KEPT: dict[int, Kept] = {}  # by Checkpoint pk
_BY_SCOPE: dict[Scope, set[int]] = {}  # the Checkpoint pks each scope kept last

# An OOM kill as its source reports it: (namespace, pod, container, occurred_at).
KillKey = tuple[str, str, str, datetime]
# By scope, the kills its last stored window was told of that are stored (OomKill
# rows, which nothing deletes but their container): the next window of the scope
# skips them without looking them up. A cluster whose snapshot reports days of
# kills (121,607 at 100,000 containers in the simulation) otherwise reads them all
# back every cycle to find the few new ones.
_STORED_KILLS: dict[Scope, frozenset[KillKey]] = {}


def take(
    checkpoint_pk: int,
    *,
    version: int,
    key_text: str,
    has_state: bool,
    watermark_s: float,
    oldest_s: float,
    end_s: float,
) -> Kept | None:
    """The kept row of a checkpoint if it continues the stored one, removed from the
    keeping either way (the window puts it back once stored)."""
    kept = _KEPT.pop(checkpoint_pk, None)
    if (
        kept is None
        or not has_state
        or kept.version != version
        or kept.key_text != key_text
        or not watermark_s <= kept.fed_until_s <= end_s
        or kept.fed_until_s < oldest_s
    ):
        return None
    return kept


# The rows kept by the windows of the running pass, by scope (None: no pass).
_PASS: ContextVar[dict[Scope, set[int]] | None] = ContextVar(
    "warm_state_pass", default=None
)


def keep(rows: Iterable[tuple[int, Kept]], *, scope: Scope) -> None:
    """Keep these rows (by checkpoint pk) for the next window, after forgetting the
    rows of ``scope`` (a whole cluster: of all its scopes) that this window did not
    take; within ``one_pass``, that forgetting is left to the pass's end."""
    kept_now = dict(rows)
    running = _PASS.get()
    if running is not None:
        running.setdefault(scope, set()).update(kept_now)
    else:
        _forget_untaken(scope, keeping=set())
    pks = _BY_SCOPE.setdefault(scope, set())
    for pk, kept in kept_now.items():
        _KEPT[pk] = kept
        pks.add(pk)


def _forget_untaken(scope: Scope, *, keeping: set[int]) -> None:
    """Forget the rows ``scope`` (a whole cluster: any of its scopes) kept and no
    window took since, but those in ``keeping``."""
    cluster_id, namespace = scope
    for old in [
        s for s in _BY_SCOPE if s == scope or (namespace is None and s[0] == cluster_id)
    ]:
        for pk in _BY_SCOPE.pop(old):
            held = _KEPT.get(pk)
            if pk not in keeping and held is not None and held.scope == old:
                del _KEPT[pk]


@contextlib.contextmanager
def one_pass(scope: Scope) -> Iterator[None]:
    """The block's windows are one pass over ``scope`` (a cluster or a shard): what
    ``scope`` kept before and none of them took is forgotten once the block ends."""
    running: dict[Scope, set[int]] = {}
    token = _PASS.set(running)
    try:
        yield
    finally:
        _PASS.reset(token)
    kept = set().union(*running.values())
    _forget_untaken(scope, keeping=kept)
    for window_scope, pks in running.items():
        _BY_SCOPE.setdefault(window_scope, set()).update(pks)


def stored_kills(scope: Scope) -> frozenset[KillKey]:
    """The kills the last stored window of ``scope`` knew to be stored."""
    return _STORED_KILLS.get(scope, frozenset())


def keep_stored_kills(keys: Iterable[KillKey], *, scope: Scope) -> None:
    """After a stored window: the kills it was told of that are stored now (those
    only, so the set follows what the source still reports)."""
    _STORED_KILLS[scope] = frozenset(keys)


def forget_all() -> None:
    """Forget every kept row and kill: the process starts cold, as after a
    restart."""
    _KEPT.clear()
    _BY_SCOPE.clear()
    _STORED_KILLS.clear()


def count() -> int:
    """How many rows are kept."""
    return len(_KEPT)
