"""Aggregates (AggregateContainerState) and series (ContainerState), vectorised.

Shapes: an :class:`AggregateSet` of N aggregates holds two :class:`HistogramBatch` (CPU
usage and memory peaks, axis 0 = aggregate, axis 1 = bucket) and per-aggregate arrays
(N,): first and last CPU sample time, CPU sample count, creation time. Its M series hold
arrays (M,): aggregate row, CPU watermark, memory watermark, memory window end, memory
peak and OOM peak."""
# Batches are applied in (timestamp, batch position) order, which feeds every series in
# time order and is the order in which upstream's real-time loop would have seen the
# samples. Upstream sources: model/container.go, model/aggregate_container_state.go,
# model/aggregations_config.go.

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import numpy as np

from .batch import IngestStats, OomBatch, SampleBatch, SampleGrid
from .config import MIN_SAMPLE_WEIGHT, cpu_histogram_options, memory_histogram_options
from .histogram import HistogramBatch
from .histogram_view import HistogramView, histogram_view
from .oom import record_ooms
from .profiles import Profile
from .series import PeakOps, grid_memory_ops, memory_peak_ops, replay_memory_ops

# Re-exported: callers import the batch types and histogram options from here too.
__all__ = [
    "AggregateSet",
    "HistogramView",
    "IngestStats",
    "OomBatch",
    "SampleBatch",
    "cpu_histogram_options",
    "memory_histogram_options",
]

# The per-series arrays (M,), in the order of the module docstring.
_SERIES_ARRAYS = (
    "series_row",
    "series_last_cpu_s",
    "series_last_memory_s",
    "series_window_end_s",
    "series_memory_peak",
    "series_oom_peak",
)
# A batch spanning more half-lives than this is applied in time slices, so that a
# decaying histogram's reference never needs to move in the middle of a vectorised
# addition.
_MAX_SPAN_HALF_LIVES = 99.0


def _first_per_row(
    rows: np.ndarray, first_s: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows (sorted) and the earliest given first-sample time of each."""
    touched, inverse = np.unique(rows, return_inverse=True)
    first = np.full(touched.size, np.inf)
    np.minimum.at(first, inverse.ravel(), first_s)
    return touched, first


class AggregateSet:
    """N aggregates and their series; see the module docstring for the arrays."""

    def __init__(self, profile: Profile, size: int = 0):
        if not isinstance(profile, Profile):
            raise ValueError("profile: must be a Profile")
        if size < 0:
            raise ValueError(f"size: must be >= 0, not {size!r}")
        self.profile = profile
        self.cpu = HistogramBatch(
            cpu_histogram_options(), size, profile.cpu_half_life_s
        )
        self.memory = HistogramBatch(
            memory_histogram_options(), size, profile.memory_half_life_s
        )
        self.first_sample_s = np.full(size, np.nan)
        self.last_sample_s_ = np.full(size, np.nan)
        self.total_samples = np.zeros(size, dtype=np.int64)
        self.creation_s = np.full(size, np.nan)
        self._series: dict[tuple[int, str], int] = {}
        self.series_row = np.zeros(0, dtype=np.int64)
        self.series_key: list[str] = []
        self.series_last_cpu_s = np.zeros(0)  # -inf = never (Go zero time)
        self.series_last_memory_s = np.zeros(0)  # -inf = never
        self.series_window_end_s = np.zeros(0)  # NaN = unset
        self.series_memory_peak = np.zeros(0)
        self.series_oom_peak = np.zeros(0)

    # ------------------------------------------------------------- construction
    @classmethod
    def empty(
        cls, profile: Profile, size: int, *, created_s: float | None = None
    ) -> AggregateSet:
        """``size`` empty aggregates (``created_s``: creation time, for expiry)."""
        out = cls(profile, size)
        if created_s is not None:
            out.creation_s[:] = float(created_s)
        return out

    @classmethod
    def from_checkpoints(
        cls, profile: Profile, blobs: Sequence[bytes | None]
    ) -> AggregateSet:
        """One row per compact checkpoint blob (None = a new empty aggregate)."""
        return cls.gather(profile, blobs)

    @classmethod
    def gather(
        cls,
        profile: Profile,
        sources: Sequence[tuple[AggregateSet, int] | bytes | None],
    ) -> AggregateSet:
        """One row per source: a copy of row ``r`` of the set ``s`` for ``(s, r)``
        (a set of the same histogram key), the state of a compact checkpoint blob, or
        a new empty aggregate for None. The series come in row order, each row's in
        its own order, as ``from_checkpoints`` of the rows' blobs would add them.
        """
        from .checkpoint import decode_row

        out = cls(profile, len(sources))
        by_set: dict[int, tuple[AggregateSet, list[int], list[int]]] = {}
        rows: list[int] = []
        keys: list[str] = []
        values: list[Sequence[float]] = []
        series_of: dict[int, dict[int, list[int]]] = {}
        for row, source in enumerate(sources):
            if source is None:
                continue
            if isinstance(source, tuple):
                other, other_row = source
                if other.profile.histogram_key != profile.histogram_key:
                    raise ValueError(f"sources[{row}]: a set of another histogram key")
                if id(other) not in by_set:
                    by_set[id(other)] = (other, [], [])
                    series_of[id(other)] = other._series_by_row()
                by_set[id(other)][1].append(row)
                by_set[id(other)][2].append(other_row)
                for sid in series_of[id(other)].get(other_row, []):
                    rows.append(row)
                    keys.append(other.series_key[sid])
                    values.append(
                        [getattr(other, name)[sid] for name in _SERIES_ARRAYS[1:]]
                    )
                continue
            try:
                row_keys, row_values = decode_row(out, row, source)
            except ValueError as exc:
                raise ValueError(f"blobs[{row}]: {exc}") from None
            rows += [row] * len(row_keys)
            keys += row_keys
            values += row_values
        for other, mine, theirs in by_set.values():
            out._copy_rows(other, np.array(mine), np.array(theirs))
        # The series of every row in one go: adding them one at a time copied the
        # series arrays once per series (quadratic in the fleet).
        out.add_series_rows(np.array(rows, dtype=np.int64), keys, values)
        return out

    def _copy_rows(
        self, other: AggregateSet, rows: np.ndarray, theirs: np.ndarray
    ) -> None:
        """Rows ``theirs`` of ``other`` into rows ``rows`` (histograms and counters)."""
        for mine, source in ((self.cpu, other.cpu), (self.memory, other.memory)):
            for name in ("weight", "total", "min_bucket", "max_bucket", "reference_s"):
                getattr(mine, name)[rows] = getattr(source, name)[theirs]
        for name in ("first_sample_s", "last_sample_s_", "total_samples", "creation_s"):
            getattr(self, name)[rows] = getattr(other, name)[theirs]

    def to_checkpoints(self, rows: Sequence[int] | None = None) -> list[bytes]:
        """Compact versioned bytes per row (of ``rows`` only, in that order, when
        given): histograms and series state."""
        from .checkpoint import encode_row

        by_row = self._series_by_row()
        wanted = range(len(self)) if rows is None else rows
        return [encode_row(self, row, by_row.get(row, [])) for row in wanted]

    @classmethod
    def from_vpa_checkpoints(
        cls, profile: Profile, statuses: Sequence[dict[str, Any] | None]
    ) -> AggregateSet:
        """One row per upstream checkpoint ``status`` (version "v3"); None = empty."""
        from .checkpoint import load_vpa_status

        out = cls(profile, len(statuses))
        for row, status in enumerate(statuses):
            if status is not None:
                try:
                    load_vpa_status(out, row, status)
                except ValueError as exc:
                    raise ValueError(f"statuses[{row}]: {exc}") from None
        return out

    def to_vpa_checkpoint(self, row: int, *, now_s: float) -> dict[str, Any]:
        """Upstream checkpoint ``status`` (v3), the current window peaks removed."""
        from .checkpoint import vpa_status

        self._check_row(row)
        memory = self.memory.take([row])
        for s in self._series_by_row().get(row, []):
            end = self.series_window_end_s[s]
            # checkpoint_writer.go subtractCurrentContainerMemoryPeak
            if not math.isnan(end) and now_s < end:
                peak = max(self.series_memory_peak[s], self.series_oom_peak[s])
                one = np.array([0])
                factor = memory.decay_factors(one, np.array([end]))
                memory.subtract_step(
                    one, memory.options.find_bucket(np.array([peak])), 1.0 * factor
                )
        return vpa_status(self, row, self.cpu.take([row]), memory, now_s)

    def __len__(self) -> int:
        return len(self.total_samples)

    def append_empty(self, count: int, *, created_s: float | None = None) -> range:
        """Add ``count`` empty aggregates at the end; returns their rows."""
        if count < 0:
            raise ValueError(f"count: must be >= 0, not {count!r}")
        start = len(self)
        self.cpu.append_empty(count)
        self.memory.append_empty(count)
        self.first_sample_s = np.concatenate(
            [self.first_sample_s, np.full(count, np.nan)]
        )
        self.last_sample_s_ = np.concatenate(
            [self.last_sample_s_, np.full(count, np.nan)]
        )
        self.total_samples = np.concatenate(
            [self.total_samples, np.zeros(count, dtype=np.int64)]
        )
        created = np.nan if created_s is None else float(created_s)
        self.creation_s = np.concatenate([self.creation_s, np.full(count, created)])
        return range(start, start + count)

    # ------------------------------------------------------------- reading
    def is_expired(self, *, now_s: float) -> np.ndarray:
        """Upstream ``isExpired``: idle for memory_window_s * memory_window_count."""
        age_limit = self.profile.memory_history_s
        has = self.total_samples > 0
        with np.errstate(invalid="ignore"):
            by_sample = (now_s - self.last_sample_s_) >= age_limit
            by_creation = (now_s - self.creation_s) >= age_limit
        return np.where(has, by_sample, by_creation & ~np.isnan(self.creation_s))

    def last_sample_s(self) -> np.ndarray:
        """Last CPU sample time of each aggregate (NaN if none)."""
        return self.last_sample_s_.copy()

    def sample_count(self) -> np.ndarray:
        """CPU sample count of each aggregate (upstream TotalSamplesCount)."""
        return self.total_samples.copy()

    def cpu_histogram(self, row: int, *, now_s: float) -> HistogramView:
        """CPU usage histogram of ``row`` (cores), weights relative to ``now_s``."""
        return self._view(self.cpu, row, now_s)

    def memory_histogram(self, row: int, *, now_s: float) -> HistogramView:
        """Memory peaks histogram of ``row`` (bytes), weights relative to ``now_s``."""
        return self._view(self.memory, row, now_s)

    def _view(self, hist: HistogramBatch, row: int, now_s: float) -> HistogramView:
        self._check_row(row)
        return histogram_view(hist, row, now_s)

    def _check_row(self, row: int) -> None:
        if not 0 <= int(row) < len(self):
            raise ValueError(f"row: {row!r} is not in [0, {len(self)})")

    def _series_by_row(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for s, r in enumerate(self.series_row.tolist()):
            out.setdefault(r, []).append(s)
        return out

    # ------------------------------------------------------------- series
    def add_series(self, row: int, key: str) -> int:
        """Id of the series ``key`` of aggregate ``row``, created if new."""
        return int(self._resolve_series(np.array([row]), [key])[0])

    def add_series_rows(
        self,
        rows: np.ndarray,
        keys: Sequence[str],
        values: Sequence[Sequence[float]],
    ) -> np.ndarray:
        """Series ``keys`` of aggregates ``rows`` (created if new), set to ``values``
        (each: CPU watermark, memory watermark, window end, memory peak, OOM peak, the
        checkpoint's order); their ids. One copy of the series arrays for all."""
        ids = self._resolve_series(rows, keys)
        if ids.size:
            table = np.array(values, dtype=np.float64).reshape(ids.size, 5)
            for column, name in enumerate(_SERIES_ARRAYS[1:]):
                getattr(self, name)[ids] = table[:, column]
        return ids

    def _resolve_series(self, rows: np.ndarray, keys: Sequence[str]) -> np.ndarray:
        if rows.size and (rows.min() < 0 or rows.max() >= len(self)):
            raise ValueError(f"series_aggregate: rows must be in [0, {len(self)})")
        ids = np.empty(rows.size, dtype=np.int64)
        new_rows: list[int] = []
        for i, (row, key) in enumerate(zip(rows.tolist(), keys, strict=True)):
            if not isinstance(key, str):
                raise ValueError(f"series_keys: key {i} must be a string")
            sid = self._series.get((row, key))
            if sid is None:
                sid = len(self.series_key)
                self._series[(row, key)] = sid
                self.series_key.append(key)
                new_rows.append(row)
            ids[i] = sid
        if new_rows:
            k = len(new_rows)
            self.series_row = np.concatenate(
                [self.series_row, np.array(new_rows, dtype=np.int64)]
            )
            self.series_last_cpu_s = np.concatenate(
                [self.series_last_cpu_s, np.full(k, -np.inf)]
            )
            self.series_last_memory_s = np.concatenate(
                [self.series_last_memory_s, np.full(k, -np.inf)]
            )
            self.series_window_end_s = np.concatenate(
                [self.series_window_end_s, np.full(k, np.nan)]
            )
            self.series_memory_peak = np.concatenate(
                [self.series_memory_peak, np.zeros(k)]
            )
            self.series_oom_peak = np.concatenate([self.series_oom_peak, np.zeros(k)])
        return ids

    def series_keys(self, row: int) -> list[str]:
        """Keys of the series of aggregate ``row``, oldest first."""
        self._check_row(row)
        return [
            k
            for k, r in zip(self.series_key, self.series_row.tolist(), strict=True)
            if r == row
        ]

    def prune_series(self, *, live_keys: Mapping[int, Collection[str]]) -> int:
        """Forget the series of each given row whose key is not live; returns how many.

        Upstream's DeleteRemovedPods: a pod that is gone loses its ContainerState (CPU
        watermark, memory window and its peak) while the aggregate keeps every sample
        already in its histograms. A key that comes back starts a new series, as a new
        ContainerState would. Rows missing from ``live_keys`` keep all their series.
        """
        for row, keys in live_keys.items():
            if not 0 <= int(row) < len(self):
                raise ValueError(f"live_keys: row {row!r} is not in [0, {len(self)})")
            if isinstance(keys, str):
                raise ValueError(f"live_keys[{row}]: must be a collection of keys")
        keep = [
            (live := live_keys.get(row)) is None or key in live
            for row, key in zip(self.series_row.tolist(), self.series_key, strict=True)
        ]
        return self._keep_series(np.array(keep, dtype=bool))

    def drop_series(self, row: int, keep: Collection[str]) -> int:
        """Forget the series of ``row`` whose key is not in ``keep`` (prune_series)."""
        return self.prune_series(live_keys={row: keep})

    def drop_series_idle_before(self, cutoff_s: float) -> int:
        """Forget every series without a CPU or memory sample at or after ``cutoff_s``.

        For callers that cannot list live pods: a series idle that long is taken as a
        pod that is gone (see prune_series for what is kept).
        """
        if math.isnan(cutoff_s):
            raise ValueError("cutoff_s: must be a number")
        last_s = np.maximum(self.series_last_cpu_s, self.series_last_memory_s)
        return self._keep_series(last_s >= cutoff_s)

    def _keep_series(self, keep: np.ndarray) -> int:
        """Keep the series where ``keep`` (M,) is true, renumbered in order."""
        dropped = int(keep.size - np.count_nonzero(keep))
        if dropped == 0:
            return 0
        for name in _SERIES_ARRAYS:
            setattr(self, name, getattr(self, name)[keep])
        self.series_key = list(itertools.compress(self.series_key, keep.tolist()))
        self._series = {
            (row, key): sid
            for sid, (row, key) in enumerate(
                zip(self.series_row.tolist(), self.series_key, strict=True)
            )
        }
        return dropped

    # ------------------------------------------------------------- ingestion
    def add_samples(self, batch: SampleBatch) -> IngestStats:
        """Feed usage samples (upstream ContainerState.AddSample for CPU and memory)."""
        if not isinstance(batch, SampleBatch):
            raise ValueError("batch: must be a SampleBatch")
        sids = self._resolve_series(batch.series_aggregate, batch.series_keys)
        if batch.timestamp_s.size == 0:
            return IngestStats()
        span_limit = _MAX_SPAN_HALF_LIVES * min(
            self.profile.cpu_half_life_s, self.profile.memory_half_life_s
        )
        t_min, t_max = float(batch.timestamp_s.min()), float(batch.timestamp_s.max())
        if t_max - t_min > span_limit:
            # Rare: apply in time slices, which is the same order.
            stats = IngestStats()
            edges = np.arange(t_min, t_max + span_limit, span_limit)
            for lo, hi in itertools.pairwise(edges):
                sel = (batch.timestamp_s >= lo) & (
                    (batch.timestamp_s < hi) | (hi >= t_max)
                )
                stats = stats + self._add_flat(sids, batch, np.nonzero(sel)[0])
            return stats
        grid = batch.grid
        if grid is not None and grid.timestamp_s.size > 0:
            ts = grid.timestamp_s
            if np.all(ts[1:] > ts[:-1]) and np.unique(sids).size == sids.size:
                return self._add_grid(sids, grid)
        return self._add_flat(sids, batch, None)

    def _add_grid(self, sids: np.ndarray, grid: SampleGrid) -> IngestStats:
        ts = grid.timestamp_s
        n_s, n_t = grid.cpu_cores.shape
        rows_s = self.series_row[sids]
        # ---- CPU: accept value >= 0 strictly after the series watermark (timestamps
        # unique).
        cpu = grid.cpu_cores
        start = np.searchsorted(ts, self.series_last_cpu_s[sids], side="right")
        present = ~np.isnan(cpu)
        valid = cpu >= 0
        if start.any():
            valid &= np.arange(n_t)[None, :] >= start[:, None]
        cpu_accepted = valid.sum(axis=1)
        stats_cpu_dropped = int(present.sum()) - int(cpu_accepted.sum())
        has = cpu_accepted > 0
        first_col = np.where(has, valid.argmax(axis=1), 0)
        last_col = np.where(has, n_t - 1 - valid[:, ::-1].argmax(axis=1), 0)
        touched, touched_first = _first_per_row(rows_s[has], ts[first_col[has]])
        all_valid = bool(has.all()) and int(cpu_accepted.sum()) == cpu.size
        if np.unique(rows_s).size == n_s:
            # One series per row: series-major order is time order within each row.
            if all_valid:
                rows_e, values, tidx = rows_s[:, None], cpu, np.arange(n_t)[None, :]
            else:
                rows_e = np.repeat(rows_s, cpu_accepted)
                values = cpu[valid]
                tidx = np.broadcast_to(np.arange(n_t), cpu.shape)[valid]
        else:
            # Time-major order interleaves the series of an aggregate as upstream.
            if all_valid:
                rows_e, values, tidx = rows_s[None, :], cpu.T, np.arange(n_t)[:, None]
            else:
                vt = valid.T
                rows_e = np.broadcast_to(rows_s[None, :], vt.shape)[vt]
                values = cpu.T[vt]
                tidx = np.broadcast_to(np.arange(n_t)[:, None], vt.shape)[vt]
        self.cpu.add_decaying(
            rows_e,
            values,
            MIN_SAMPLE_WEIGHT,
            tidx,
            ts,
            touched=touched,
            touched_first_s=touched_first,
        )
        del rows_e, values, tidx
        self._update_cpu_stats(
            sids[has],
            rows_s[has],
            ts[first_col[has]],
            ts[last_col[has]],
            cpu_accepted[has],
        )
        # ---- memory: accept value >= 0 at or after the series watermark.
        mem = grid.memory_bytes
        mstart = np.searchsorted(ts, self.series_last_memory_s[sids], side="left")
        present = ~np.isnan(mem)
        mvalid = mem >= 0
        if mstart.any():
            mvalid &= np.arange(n_t)[None, :] >= mstart[:, None]
        m_acc = int(mvalid.sum())
        m_drop = int(present.sum()) - m_acc
        if m_acc:
            ops, state = grid_memory_ops(
                ts,
                mem,
                mvalid,
                sids,
                window_s=self.profile.memory_window_s,
                window_end_s=self.series_window_end_s,
                memory_peak=self.series_memory_peak,
                oom_peak=self.series_oom_peak,
            )
            self._commit_memory(ops, state, ops.position)
        return IngestStats(
            int(cpu_accepted.sum()), stats_cpu_dropped, m_acc, m_drop, 0, 0
        )

    def _add_flat(
        self, sids_of_series: np.ndarray, batch: SampleBatch, subset: np.ndarray | None
    ) -> IngestStats:
        sid = sids_of_series[batch.series_index]
        t, cpu, mem = batch.timestamp_s, batch.cpu_cores, batch.memory_bytes
        pos = np.arange(t.size)
        if subset is not None:
            sid, t, cpu, mem, pos = (
                sid[subset],
                t[subset],
                cpu[subset],
                mem[subset],
                pos[subset],
            )
        if t.size == 0:
            return IngestStats()
        by_time = np.lexsort((pos, t))  # application order
        rank = np.empty_like(by_time)
        rank[by_time] = np.arange(by_time.size)
        by_series = np.lexsort((rank, sid))  # each series in application order
        # ---- CPU
        s_sid, s_t, s_cpu = sid[by_series], t[by_series], cpu[by_series]
        cand = (s_cpu >= 0) & (s_t > self.series_last_cpu_s[s_sid])
        ci = np.nonzero(cand)[0]
        dup = np.zeros(ci.size, dtype=bool)
        if ci.size > 1:
            dup[1:] = (s_sid[ci[1:]] == s_sid[ci[:-1]]) & (s_t[ci[1:]] == s_t[ci[:-1]])
        acc = ci[~dup]  # positions (series order) of accepted CPU samples
        cpu_drop = int(np.count_nonzero(~np.isnan(cpu))) - acc.size
        if acc.size:
            app = np.sort(rank[by_series[acc]])  # accepted, in application order
            a_t = t[by_time[app]]
            a_rows = self.series_row[sid[by_time[app]]]
            # a_t is in time order: its distinct times, and each one's, without a sort
            # (what np.unique(a_t, return_inverse=True) answers).
            new_time = np.empty(a_t.size, dtype=bool)
            new_time[0] = True
            np.not_equal(a_t[1:], a_t[:-1], out=new_time[1:])
            distinct, tidx = a_t[new_time], np.cumsum(new_time) - 1
            acc_sid = s_sid[acc]
            first_of_series = np.concatenate(([True], acc_sid[1:] != acc_sid[:-1]))
            touched, touched_first = _first_per_row(
                self.series_row[acc_sid[first_of_series]], s_t[acc[first_of_series]]
            )
            self.cpu.add_decaying(
                a_rows,
                cpu[by_time[app]],
                MIN_SAMPLE_WEIGHT,
                tidx.ravel(),
                distinct,
                touched=touched,
                touched_first_s=touched_first,
            )
            bounds = np.concatenate(
                ([0], np.nonzero(acc_sid[1:] != acc_sid[:-1])[0] + 1, [acc.size])
            )
            u_sid = acc_sid[bounds[:-1]]
            self._update_cpu_stats(
                u_sid,
                self.series_row[u_sid],
                s_t[acc[bounds[:-1]]],
                s_t[acc[bounds[1:] - 1]],
                np.diff(bounds),
            )
        # ---- memory
        s_mem = mem[by_series]
        mvalid = (s_mem >= 0) & (s_t >= self.series_last_memory_s[s_sid])
        mi = np.nonzero(mvalid)[0]
        m_drop = int(np.count_nonzero(~np.isnan(mem))) - mi.size
        m_rank = rank[by_series[mi]]
        self._apply_memory(s_sid[mi], s_t[mi], s_mem[mi], lambda pos: m_rank[pos])
        return IngestStats(acc.size, cpu_drop, mi.size, m_drop, 0, 0)

    def _update_cpu_stats(
        self,
        sids: np.ndarray,
        rows: np.ndarray,
        first_s: np.ndarray,
        last_s: np.ndarray,
        counts: np.ndarray,
    ) -> None:
        """Aggregate first/last sample and count (one entry per series; rows repeat)."""
        if sids.size == 0:
            return
        self.series_last_cpu_s[sids] = last_s
        cur_first = self.first_sample_s
        cur_last = self.last_sample_s_
        np.fmin.at(cur_first, rows, first_s)
        np.fmax.at(cur_last, rows, last_s)
        np.add.at(self.total_samples, rows, counts.astype(np.int64))

    def _apply_memory(
        self,
        sid: np.ndarray,
        t: np.ndarray,
        v: np.ndarray,
        order_of: Callable[[np.ndarray], np.ndarray],
    ) -> None:
        """Memory samples by (series, order) -> window peaks -> histogram."""
        if sid.size == 0:
            return
        ops, state = memory_peak_ops(
            sid,
            t,
            v,
            window_s=self.profile.memory_window_s,
            window_end_s=self.series_window_end_s,
            memory_peak=self.series_memory_peak,
            oom_peak=self.series_oom_peak,
        )
        self._commit_memory(ops, state, order_of(ops.position))

    def _commit_memory(
        self, ops: PeakOps, state: tuple[np.ndarray, ...], order: np.ndarray
    ) -> None:
        u_sid, last_t, window_end, mem_peak, oom_peak = state
        self.series_last_memory_s[u_sid] = last_t
        self.series_window_end_s[u_sid] = window_end
        self.series_memory_peak[u_sid] = mem_peak
        self.series_oom_peak[u_sid] = oom_peak
        replay_memory_ops(self.memory, self.series_row[ops.series], order, ops)

    def record_ooms(self, batch: OomBatch) -> IngestStats:
        """Upstream ``RecordOOM`` of each event, in (timestamp, position) order."""
        if not isinstance(batch, OomBatch):
            raise ValueError("batch: must be an OomBatch")
        sids = self._resolve_series(batch.series_aggregate, batch.series_keys)
        return record_ooms(self, sids, batch)
