"""Memory windows of series (upstream ContainerState.addMemorySample), vectorised.

Input: n memory samples already accepted (value >= 0, not before the series watermark),
sorted by series and, within a series, in application order: ``sid`` int64 (n,), ``t``
float64 (n,), ``v`` float64 (n,). Output: the histogram operations upstream would
perform (one add per window opening, one subtract + add per peak replacement, each at
the window end) and the new state of each series. Operations of one aggregate are then
replayed in upstream's order, vectorised across aggregates, by
:func:`replay_memory_ops`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .histogram import HistogramBatch

SUBTRACT = 0
ADD = 1


@dataclass(frozen=True)
class PeakOps:
    """Histogram operations, one per entry (m,)."""

    series: np.ndarray  # int64: series id
    position: np.ndarray  # int64: index of the causing sample in the input arrays
    kind: np.ndarray  # int8: SUBTRACT (applied first) or ADD
    value_bytes: np.ndarray  # float64
    time_s: np.ndarray  # float64: the window end, upstream's MeasureStart of the peak


def segmented_exclusive_max(
    v: np.ndarray, seg_start: np.ndarray, seg_len: np.ndarray, init: np.ndarray
) -> np.ndarray:
    """For each element, max(init of its segment, earlier elements of its segment)."""
    out = np.empty(v.size)
    if v.size == 0:
        return out
    cls = np.ceil(np.log2(np.maximum(seg_len, 1))).astype(np.int64)
    for c in np.unique(cls).tolist():
        segs = np.nonzero(cls == c)[0]
        lens = seg_len[segs]
        width = int(lens.max())
        k = segs.size
        mat = np.empty((k, width + 1))
        mat[:, 0] = init[segs]
        first = int(seg_start[segs[0]])
        contiguous = bool(np.all(lens == width)) and bool(
            np.all(np.diff(seg_start[segs]) == width)
        )
        if contiguous:  # common case: equal windows back to back (grid input)
            mat[:, 1:] = v[first : first + k * width].reshape(k, width)
            np.maximum.accumulate(mat, axis=1, out=mat)
            out[first : first + k * width] = mat[:, :-1].reshape(-1)
            continue
        offs = np.arange(width)
        inside = offs[None, :] < lens[:, None]
        pos = (seg_start[segs][:, None] + offs[None, :])[inside]
        mat[:, 1:] = -np.inf
        mat[:, 1:][inside] = v[pos]
        np.maximum.accumulate(mat, axis=1, out=mat)
        out[pos] = mat[:, :-1][inside]
    return out


def memory_peak_ops(
    sid: np.ndarray,
    t: np.ndarray,
    v: np.ndarray,
    *,
    window_s: float,
    window_end_s: np.ndarray,
    memory_peak: np.ndarray,
    oom_peak: np.ndarray,
) -> tuple[PeakOps, tuple[np.ndarray, ...]]:
    """Window peaks of accepted samples: (ops, (series, last_t, end, peak, oom))."""
    n = sid.size
    s_start = np.concatenate(([0], np.nonzero(sid[1:] != sid[:-1])[0] + 1))
    s_count = np.diff(np.concatenate((s_start, [n])))
    u_sid = sid[s_start]
    we0 = window_end_s[u_sid].copy()
    fresh = np.isnan(we0)
    we0[fresh] = t[s_start[fresh]]  # upstream: the first sample sets WindowEnd = ts
    we0_e = np.repeat(we0, s_count)
    # Window 0 = the window still open in the state; k >= 1 ends at
    # WindowEnd + k * interval.
    wid = np.floor((t - we0_e) / window_s) + 1
    wid[t < we0_e] = 0
    flag = np.empty(n, dtype=bool)
    flag[0] = True
    flag[1:] = (sid[1:] != sid[:-1]) | (wid[1:] != wid[:-1])
    seg_start = np.nonzero(flag)[0]
    seg_len = np.diff(np.concatenate((seg_start, [n])))
    seg_sid = sid[seg_start]
    seg_wid = wid[seg_start]
    seg_we0 = we0_e[seg_start]
    seg_end = np.where(seg_wid == 0, seg_we0, seg_we0 + seg_wid * window_s)
    state_old = np.maximum(memory_peak[seg_sid], oom_peak[seg_sid])
    is_open = seg_wid == 0
    init = np.where(is_open, state_old, -np.inf)
    # Quirk kept from upstream: a window whose first peak is 0 never takes a larger
    # peak.
    allowed = np.where(is_open, state_old != 0, v[seg_start] != 0)
    prev = segmented_exclusive_max(v, seg_start, seg_len, init)
    record = v > prev
    record &= np.repeat(allowed, seg_len) | (prev == -np.inf)
    rec = np.nonzero(record)[0]
    seg_of = np.repeat(np.arange(seg_start.size), seg_len)[rec] if rec.size else rec
    rec_prev = prev[rec]
    has_sub = rec_prev != -np.inf
    sub = rec[has_sub]
    ops = PeakOps(
        series=np.concatenate((sid[sub], sid[rec])).astype(np.int64),
        position=np.concatenate((sub, rec)).astype(np.int64),
        kind=np.concatenate(
            (np.full(sub.size, SUBTRACT, np.int8), np.full(rec.size, ADD, np.int8))
        ),
        value_bytes=np.concatenate((rec_prev[has_sub], v[rec])),
        time_s=np.concatenate((seg_end[seg_of[has_sub]], seg_end[seg_of])),
    )
    # New state from each series' last segment.
    last_seg = np.concatenate(
        (np.nonzero(seg_sid[1:] != seg_sid[:-1])[0], [seg_sid.size - 1])
    )
    last_elem = seg_start[last_seg] + seg_len[last_seg] - 1
    seg_max = np.maximum(prev[last_elem], v[last_elem])
    opening = v[seg_start[last_seg]]
    open_last = is_open[last_seg]
    old_peak = memory_peak[u_sid]
    old_oom = oom_peak[u_sid]
    replaced = allowed[last_seg] & (seg_max > init[last_seg])
    new_peak = np.where(
        open_last,
        np.where(replaced, seg_max, old_peak),
        np.where(opening == 0, 0.0, seg_max),
    )
    new_oom = np.where(open_last, old_oom, 0.0)
    state = (u_sid, t[last_elem], seg_end[last_seg], new_peak, new_oom)
    return ops, state


def replay_memory_ops(
    hist: HistogramBatch, rows: np.ndarray, order: np.ndarray, ops: PeakOps
) -> None:
    """Apply ops in (aggregate, order, subtract first) sequence, one step per row."""
    m = rows.size
    if m == 0:
        return
    idx = np.lexsort((ops.kind, order, rows))
    rows = rows[idx]
    kind = ops.kind[idx]
    times = ops.time_s[idx]
    buckets = hist.options.find_bucket(ops.value_bytes[idx])
    starts = np.concatenate(([0], np.nonzero(rows[1:] != rows[:-1])[0] + 1))
    step = np.arange(m) - np.repeat(starts, np.diff(np.concatenate((starts, [m]))))
    # Every step's factors at once, unless a step shifts a reference (then step by
    # step, as that changes the later steps' factors).
    settled = hist.settled_decay_factors(rows, times)
    if settled is not None:
        # Grouped by step, each step's subtractions before its additions: every step
        # is two slices (the rows of a step are distinct, so their order within it
        # does not matter).
        key = 2 * step + (kind == ADD)
        by_key = np.argsort(key, kind="stable")
        cuts = np.searchsorted(key[by_key], np.arange(2 * int(step.max()) + 3))
        rows, buckets, factors = rows[by_key], buckets[by_key], settled[by_key]
        for k in range(0, cuts.size - 2, 2):
            a, b, c = cuts[k], cuts[k + 1], cuts[k + 2]
            hist.subtract_step(rows[a:b], buckets[a:b], factors[a:b])
            hist.add_step(rows[b:c], buckets[b:c], factors[b:c])
        return
    by_step = np.argsort(step, kind="stable")
    bounds = np.searchsorted(step[by_step], np.arange(int(step.max()) + 2))
    for k in range(bounds.size - 1):
        sel = by_step[bounds[k] : bounds[k + 1]]
        r = rows[sel]
        w = 1.0 * hist.decay_factors(r, times[sel])
        is_add = kind[sel] == ADD
        sub = ~is_add
        hist.subtract_step(r[sub], buckets[sel][sub], w[sub])
        hist.add_step(r[is_add], buckets[sel][is_add], w[is_add])


def grid_memory_ops(
    ts: np.ndarray,
    mem: np.ndarray,
    valid: np.ndarray,
    sids: np.ndarray,
    *,
    window_s: float,
    window_end_s: np.ndarray,
    memory_peak: np.ndarray,
    oom_peak: np.ndarray,
) -> tuple[PeakOps, tuple[np.ndarray, ...]]:
    """:func:`memory_peak_ops` for a grid ``mem`` (S, T) at increasing ``ts`` (T,).

    Works on blocks of ``_GRID_BLOCK_ROWS`` series, each window number at once (the
    windows of a series are consecutive column ranges, counted from its window end),
    so temporaries stay small. ``position`` of the returned ops is the time-major
    application order ``column * S + series``; the ops come grouped by window number,
    not in that order (``replay_memory_ops`` sorts them).
    """
    n_s, n_t = mem.shape
    has_any = valid.any(axis=1)
    first_col = valid.argmax(axis=1)
    we0 = window_end_s[sids].copy()
    fresh = np.isnan(we0)
    we0[fresh] = ts[first_col[fresh]]
    state_old = np.maximum(memory_peak[sids], oom_peak[sids])
    parts: list[tuple[np.ndarray, ...]] = []
    new_end = window_end_s[sids].copy()
    new_peak = memory_peak[sids].copy()
    new_oom = oom_peak[sids].copy()
    last_t = np.full(n_s, np.nan)
    with_data = np.nonzero(has_any)[0]
    for b in range(0, with_data.size, _GRID_BLOCK_ROWS):
        g = with_data[b : b + _GRID_BLOCK_ROWS]
        w0 = we0[g]
        ok = valid[g]
        values = mem[g]
        # The window number of every cell: 0 before the series' window end (its open
        # window), then 1, 2, ... window_s apart.
        wid = np.floor((ts[None, :] - w0[:, None]) / window_s) + 1
        wid[ts[None, :] < w0[:, None]] = 0
        rows = np.arange(g.size)
        for k in np.unique(wid[ok]).tolist():
            cell = ok & (wid == k)
            present = cell.any(axis=1)
            # The window's samples of each series; every other cell -inf, so running
            # maxima start afresh in each window.
            x = np.where(cell, values, -np.inf)
            cm = np.maximum.accumulate(x, axis=1)
            prev = np.empty_like(x)
            prev[:, 0] = -np.inf
            prev[:, 1:] = cm[:, :-1]
            if k == 0:
                init = state_old[g]
                allowed = init != 0
                np.maximum(prev, init[:, None], out=prev)
                end = w0
            else:
                opening = x[rows, cell.argmax(axis=1)]
                allowed = opening != 0
                end = w0 + k * window_s
            record = x > prev
            record &= allowed[:, None] | (prev == -np.inf)
            r, c = np.nonzero(record)
            if r.size:
                pv = prev[r, c]
                order = c * n_s + g[r]
                sub = pv != -np.inf
                parts.append(
                    (
                        g[r[sub]],
                        order[sub],
                        np.full(int(sub.sum()), SUBTRACT),
                        pv[sub],
                        end[r[sub]],
                    )
                )
                parts.append((g[r], order, np.full(r.size, ADD), x[r, c], end[r]))
            # State after this window, for series that had samples in it.
            p = np.nonzero(present)[0]
            gp = g[p]
            top = cm[p, -1]
            new_end[gp] = end[p]
            if k == 0:
                repl = allowed[p] & (top > init[p])
                new_peak[gp] = np.where(repl, top, new_peak[gp])
            else:
                new_peak[gp] = np.where(opening[p] == 0, 0.0, top)
                new_oom[gp] = 0.0
            last_c = n_t - 1 - cell[p, ::-1].argmax(axis=1)
            last_t[gp] = ts[last_c]
    if parts:
        series_local = np.concatenate([q[0] for q in parts])
        ops = PeakOps(
            series=sids[series_local].astype(np.int64),
            position=np.concatenate([q[1] for q in parts]).astype(np.int64),
            kind=np.concatenate([q[2] for q in parts]).astype(np.int8),
            value_bytes=np.concatenate([q[3] for q in parts]).astype(np.float64),
            time_s=np.concatenate([q[4] for q in parts]).astype(np.float64),
        )
    else:
        empty = np.zeros(0, dtype=np.int64)
        ops = PeakOps(empty, empty, empty.astype(np.int8), np.zeros(0), np.zeros(0))
    touched = np.nonzero(has_any)[0]
    state = (
        sids[touched],
        last_t[touched],
        new_end[touched],
        new_peak[touched],
        new_oom[touched],
    )
    return ops, state


# Series per block of grid_memory_ops: its temporaries are a few (block, T) arrays.
_GRID_BLOCK_ROWS = 2048
