"""OOM kills (upstream ContainerState.RecordOOM): a bumped memory sample per kill.

Events are applied one at a time (they are few), in (timestamp, batch position) order,
to the series arrays (M,) and the memory histograms of an :class:`AggregateSet`.
Upstream source: model/container.go.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from .batch import IngestStats, OomBatch
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
            # Too old: upstream HEAD's staleness rule (issue #8548).
            dropped += 1
            continue
        used = max(
            float(batch.memory_request_bytes[i]), float(aggs.series_memory_peak[s])
        )
        scaled = used * p.oom_bump_ratio
        scaled = (
            0.0
            if scaled < 0
            else float(MAX_RESOURCE_AMOUNT)
            if scaled > MAX_RESOURCE_AMOUNT
            else math.trunc(scaled)
        )
        needed = max(used + min_bump, float(scaled))
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
