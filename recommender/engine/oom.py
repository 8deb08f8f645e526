"""OOM kills (upstream ContainerState.RecordOOM): a bumped memory sample per kill.

Events are applied one at a time (they are few), in (timestamp, batch position) order,
to the series arrays (M,) and the memory histograms of an :class:`AggregateSet`.
Upstream source: model/container.go.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from .batch import IngestStats, OomBatch
from .config import memory_histogram_options
from .resources import MAX_RESOURCE_AMOUNT

if TYPE_CHECKING:
    from .aggregation import AggregateSet


def record_ooms(aggs: AggregateSet, sids: np.ndarray, batch: OomBatch) -> IngestStats:
    """Upstream ``RecordOOM`` of each event, in (timestamp, position) order.

    ``sids`` (S,) are the ids of the batch's series in ``aggs``.
    """
    p = aggs.profile
    window = p.memory_window_s
    min_bump = float(math.trunc(p.oom_min_bump_bytes))
    accepted = dropped = 0
    order = np.lexsort((np.arange(batch.timestamp_s.size), batch.timestamp_s))
    for i in order.tolist():
        s = int(sids[batch.series_index[i]])
        ts = float(batch.timestamp_s[i])
        last = aggs.series_last_memory_s[s]
        if last != -np.inf and ts < last - window:
            # Too old: upstream HEAD's staleness rule (kubernetes/autoscaler#8548).
            dropped += 1
            continue
        used = max(
            float(batch.memory_request_bytes[i]), float(aggs.series_memory_peak[s])
        )
        needed = oom_sample(used, ratio=p.oom_bump_ratio, min_bump_bytes=min_bump)
        add_memory_sample(aggs, s, ts, needed, is_oom=True)
        accepted += 1
    return IngestStats(oom_accepted=accepted, oom_dropped=dropped)


def add_memory_sample(
    aggs: AggregateSet, s: int, ts: float, usage: float, *, is_oom: bool
) -> None:
    """Upstream ``addMemorySample`` of one valid sample of series ``s``."""
    row = np.array([aggs.series_row[s]])
    hist = aggs.memory
    aggs.series_last_memory_s[s] = ts
    if math.isnan(aggs.series_window_end_s[s]):
        aggs.series_window_end_s[s] = ts
    end = float(aggs.series_window_end_s[s])
    add_new = False
    if ts < end:
        old = max(float(aggs.series_memory_peak[s]), float(aggs.series_oom_peak[s]))
        if old != 0 and usage > old:
            f = hist.decay_factors(row, np.array([end]))
            hist.subtract_step(row, hist.options.find_bucket(np.array([old])), 1.0 * f)
            add_new = True
    else:
        window = aggs.profile.memory_window_s
        end = end + (math.floor((ts - end) / window) * window + window)
        aggs.series_window_end_s[s] = end
        aggs.series_memory_peak[s] = 0.0
        aggs.series_oom_peak[s] = 0.0
        add_new = True
    if add_new:
        f = hist.decay_factors(row, np.array([end]))
        hist.add_step(row, hist.options.find_bucket(np.array([usage])), 1.0 * f)
        if is_oom:
            aggs.series_oom_peak[s] = usage
        else:
            aggs.series_memory_peak[s] = usage


def oom_sample(used: float, *, ratio: float, min_bump_bytes: float) -> float:
    """The memory sample ``RecordOOM`` adds for a kill: ``max(used + minBump, used *
    ratio)`` with Go's truncations, where ``used`` is the larger of the memory
    request at the kill and the window's peak."""
    scaled = used * ratio
    scaled = (
        0.0
        if scaled < 0
        else float(MAX_RESOURCE_AMOUNT)
        if scaled > MAX_RESOURCE_AMOUNT
        else math.trunc(scaled)
    )
    return max(used + float(math.trunc(min_bump_bytes)), float(scaled))


# Where the memory target was read, relative to the kills' samples (``oom_effect``).
OOM_SETS_TARGET = "at"  # the percentile was read among the kills' samples
OOM_ABOVE_TARGET = "below"  # the samples lie above the value read: they lift it
OOM_BELOW_TARGET = "above"  # usage above the samples sets the value read


def oom_effect(
    requests: list[int],
    *,
    ratio: float,
    min_bump_bytes: float,
    target: dict[str, Any] | None,
) -> dict[str, Any] | None:
    """How OOM kills bear on a memory target (JSON-safe), or None without kills.

    ``requests`` are the memory requests at the kills (the usage, for an eviction);
    ``target`` is the explanation's memory ``target`` (``raw``: the end of the
    histogram bucket the percentile was read in). Each kill's sample is at least
    ``oom_sample`` of its request; ``effect`` compares the bucket read with the samples'
    buckets (None when the target's raw value is unknown).
    """
    if not requests:
        return None
    # At least: a window peak above the request gives a larger sample.
    samples = sorted(
        int(oom_sample(float(r), ratio=ratio, min_bump_bytes=min_bump_bytes))
        for r in requests
    )
    low, high = samples[0], samples[-1]
    effect = None
    raw = None if target is None else target.get("raw")
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        options = memory_histogram_options()
        starts = options.bucket_start

        def bucket_end(value: float) -> float:
            b = options.find_bucket_scalar(value) + 1
            return float(starts[b]) if b < len(starts) else math.inf

        # The value read is the end of its bucket: at or past the end of the lowest
        # sample's bucket and at most the end of the highest's means "among them".
        if raw > bucket_end(high):
            effect = OOM_BELOW_TARGET
        elif raw >= bucket_end(low):
            effect = OOM_SETS_TARGET
        else:
            effect = OOM_ABOVE_TARGET
    return {
        "count": len(requests),
        "largest_request_bytes": max(requests),
        "sample_low_bytes": low,
        "sample_high_bytes": high,
        "bump_ratio": ratio,
        "min_bump_bytes": math.trunc(min_bump_bytes),
        "effect": effect,
    }
