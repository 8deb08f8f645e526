"""Engine state a worker process keeps between cycles, checked against the stored
checkpoints every cycle.

Without it, every cycle decodes every checkpoint and reads again from the source the
minutes since each one's watermark (checkpoints are written every
``VPAWEB_CHECKPOINT_INTERVAL_S``, docs/refresh.md "How the cycle scales"): at 100,000
containers most of the ingest phase. Here each container's engine row as a window
left it is kept, with what it continues:

- ``version``: the ``Checkpoint.version`` its state started from (a write by this
  window moves it on by one, as the compare-and-swap does);
- ``fed_until_s``: every sample up to this grid time is in it.

The next window uses it only when the stored checkpoint still has that version and
histogram key and a state, and the kept state was fed neither past the window's end
nor from before its history: then it is the stored state plus the samples of
``(watermark, fed_until_s]``, which is exactly what a process without it would
rebuild by decoding and reading those minutes again (the engine's result does not
depend on where the sample stream is cut: ``tests/services/test_refresh_scale.py``
compares a warm and a cold process byte for byte). Any other write (another worker,
an expiry reset, an operator's profile edit) moves the version or the key, and the
row is read from the database as before.

A window takes its rows out of the keeping when it starts and puts them back only
once stored: a failed window (a source down, a lost compare-and-swap) leaves nothing
that could be half fed. Only sources that keep history use it (a live source's
samples depend on when they were observed, and its checkpoints are written every
cycle anyway). Memory: the rows of the containers this process refreshed last, about
3 KB each (0.3 GB at 100,000 containers).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from recommender.engine.aggregation import AggregateSet


@dataclass(frozen=True)
class Kept:
    """One container's engine row as a stored window left it."""

    aggregates: AggregateSet  # shared by the rows of that window's group
    row: int
    key_text: str
    version: int
    fed_until_s: float


_KEPT: dict[int, Kept] = {}  # by Checkpoint pk


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


def keep(rows: Iterable[tuple[int, Kept]]) -> None:
    """Keep these rows (by checkpoint pk) for the next window."""
    _KEPT.update(rows)


def forget_all() -> None:
    """Forget every kept row: the process starts cold, as after a restart."""
    _KEPT.clear()


def count() -> int:
    """How many rows are kept."""
    return len(_KEPT)
