"""A replay's scores per container-day, as Google's Autopilot paper (EuroSys 2020)."""
# A sample is *scored* when a recommendation was in force when it was taken and it lies
# after its container's warm-up; a *container-day* (UTC day) counts when it has at least
# ``MIN_SAMPLES_PER_DAY`` scored samples. Per container-day, with usage as recorded:
#
# - relative slack = (the day's average target - the day's p95 usage) / average target,
#   for memory and CPU (p95: linear interpolation between order statistics, numpy's
#   default; the average is over the day's scored samples);
# - memory overrun: any sample above the memory target; also above the upper bound and
#   above ``OVERRUN_FACTOR`` x target;
# - CPU above-target share: the fraction of the day's samples above the CPU target;
# - changes: recompute moments of the day whose target (CPU or memory) differs from the
#   previous one; "big" when either moved by ``BIG_CHANGE_FRACTION`` or more; memory
#   changes alone.
#
# Arrays: samples (n,), container-days (D,) sorted by (container, day). Two baselines
# use the same scored samples: fixed limits (the operators' "manual" setting) and
# perfect hindsight (each day's own maximum as the target).

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .replay import Timeline, Trace
from .resources import CPU, MEMORY

DAY_S = 86400.0
# The Autopilot paper's threshold: half a day of 5-minute samples.
MIN_SAMPLES_PER_DAY = 144
OVERRUN_FACTOR = 1.2
BIG_CHANGE_FRACTION = 0.10
SLACK_PERCENTILE = 95.0


@dataclass(frozen=True)
class DayScores:
    """Per container-day metrics (D,); NaN where a signal or a target is missing."""

    container: np.ndarray  # int64
    day: np.ndarray  # int64, days since the Unix epoch (UTC)
    samples: np.ndarray  # int64, scored samples of the day
    memory_slack: np.ndarray
    cpu_slack: np.ndarray
    memory_over_target: np.ndarray  # bool
    memory_over_upper: np.ndarray  # bool
    memory_over_factor: np.ndarray  # bool
    cpu_above_share: np.ndarray
    changes: np.ndarray  # float (NaN for baselines without recomputes)
    big_changes: np.ndarray
    memory_changes: np.ndarray


def scored_mask(trace: Trace, *, warmup_s: float, start_s: float) -> np.ndarray:
    """Samples after their container's warm-up and at or after ``start_s``."""
    if not (warmup_s >= 0 and math.isfinite(warmup_s)):
        raise ValueError(f"warmup_s: must be a number of seconds >= 0, not {warmup_s}")
    first = trace.first_sample_s()[trace.container_index]
    mask = (trace.timestamp_s >= first + warmup_s) & (trace.timestamp_s >= start_s)
    return np.asarray(mask)


class DayGroups:
    """The scored samples grouped by (container, day), days with enough samples only;
    the usage percentiles of each day, computed once for every target scored on them."""

    def __init__(self, trace: Trace, scored: np.ndarray):
        self.idx = np.flatnonzero(scored)
        container = trace.container_index[self.idx]
        day = np.floor(trace.timestamp_s[self.idx] / DAY_S).astype(np.int64)
        self.day_lo = int(day.min()) if day.size else 0
        span = (int(day.max()) - self.day_lo + 1) if day.size else 1
        key = container * span + (day - self.day_lo)
        keys, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
        keep = counts >= MIN_SAMPLES_PER_DAY
        # Samples of kept days only; group numbers 0..D-1 in (container, day) order.
        new_number = np.cumsum(keep) - 1
        in_kept = keep[inverse]
        self.idx = self.idx[in_kept]
        self.group = new_number[inverse[in_kept]]
        self.keys = keys[keep]
        self.span = span
        self.count = counts[keep].astype(np.int64)
        self.size = int(keep.sum())
        self.trace = trace
        self.scored = scored
        self._p95: dict[str, np.ndarray] = {}

    def usage_p95(self, resource: str) -> np.ndarray:
        """The p95 of each day's usage samples of ``resource`` (D,)."""
        if resource not in self._p95:
            usage = (
                self.trace.cpu_cores if resource == CPU else self.trace.memory_bytes
            )[self.idx]
            ok = np.isfinite(usage)
            self._p95[resource] = _group_percentile(
                usage[ok], self.group[ok], self.size, SLACK_PERCENTILE
            )
        return self._p95[resource]

    def container(self) -> np.ndarray:
        return self.keys // self.span

    def day(self) -> np.ndarray:
        return self.keys % self.span + self.day_lo

    def group_of(self, container: np.ndarray, day: np.ndarray) -> np.ndarray:
        """The group of each (container, day), -1 where that day is not scored."""
        key = container * self.span + (day - self.day_lo)
        pos = np.searchsorted(self.keys, key)
        pos = np.minimum(pos, max(self.keys.size - 1, 0))
        ok = (
            (self.keys.size > 0)
            & (day >= self.day_lo)
            & (day < self.day_lo + self.span)
        )
        found = ok & (self.keys[pos] == key) if self.keys.size else ok
        return np.where(found, pos, -1)


def _group_percentile(
    values: np.ndarray, group: np.ndarray, size: int, q: float
) -> np.ndarray:
    """numpy's linear percentile of each group's values (NaN for an empty group)."""
    # By group, then value (the same sorted values as ``np.lexsort((values, group))``,
    # about twice as fast: a stable radix sort of the narrow group numbers).
    order = np.argsort(values)
    narrow = group[order].astype(np.min_scalar_type(max(size - 1, 0)))
    order = order[np.argsort(narrow, kind="stable")]
    v, g = values[order], group[order]
    counts = np.bincount(g, minlength=size)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    out = np.full(size, np.nan)
    has = counts > 0
    pos = (counts[has] - 1) * (q / 100.0)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, counts[has] - 1)
    t = pos - lo
    a = v[starts[has] + lo]
    b = v[starts[has] + hi]
    diff = b - a
    # numpy's _lerp: a + diff * t, or b - diff * (1 - t) from t >= 0.5 on.
    out[has] = np.where(t >= 0.5, b - diff * (1 - t), a + diff * t)
    return out


def _group_mean(values: np.ndarray, group: np.ndarray, size: int) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.bincount(group, weights=values, minlength=size) / np.bincount(
            group, minlength=size
        )


def _slack(days: DayGroups, resource: str, target: np.ndarray) -> np.ndarray:
    ok = np.isfinite(target)
    mean_target = _group_mean(target[ok], days.group[ok], days.size)
    p95 = days.usage_p95(resource)
    with np.errstate(invalid="ignore", divide="ignore"):
        slack = (mean_target - p95) / mean_target
    return np.where(mean_target > 0, slack, np.nan)


def _any(flags: np.ndarray, group: np.ndarray, size: int) -> np.ndarray:
    return np.bincount(group, weights=flags.astype(np.float64), minlength=size) > 0


def _score(
    trace: Trace,
    days: DayGroups,
    *,
    cpu_target_cores: np.ndarray,
    memory_target: np.ndarray,
    memory_upper: np.ndarray,
    changes: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
) -> DayScores:
    """Metrics of the kept days; targets are per sample, (n,)."""
    idx, group, size = days.idx, days.group, days.size
    mem = trace.memory_bytes[idx]
    cpu = trace.cpu_cores[idx]
    mt, mu, ct = memory_target[idx], memory_upper[idx], cpu_target_cores[idx]
    mem_ok = np.isfinite(mem) & np.isfinite(mt)
    cpu_ok = np.isfinite(cpu) & np.isfinite(ct)
    g_mem, g_cpu = group[mem_ok], group[cpu_ok]
    cpu_above = _group_mean((cpu[cpu_ok] > ct[cpu_ok]).astype(np.float64), g_cpu, size)
    nan = np.full(size, np.nan)
    return DayScores(
        container=days.container(),
        day=days.day(),
        samples=days.count,
        memory_slack=_slack(days, MEMORY, mt),
        cpu_slack=_slack(days, CPU, ct),
        memory_over_target=_any(mem[mem_ok] > mt[mem_ok], g_mem, size),
        memory_over_upper=_any(mem[mem_ok] > mu[mem_ok], g_mem, size),
        memory_over_factor=_any(mem[mem_ok] > OVERRUN_FACTOR * mt[mem_ok], g_mem, size),
        cpu_above_share=cpu_above,
        changes=nan if changes is None else changes[0],
        big_changes=nan if changes is None else changes[1],
        memory_changes=nan if changes is None else changes[2],
    )


def _change_counts(
    timeline: Timeline, days: DayGroups
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Target changes per kept day: any, >= BIG_CHANGE_FRACTION, memory only."""
    cpu = timeline.values[CPU, "target"][1:]  # (J, C), row j-1 = moment j
    mem = timeline.values[MEMORY, "target"][1:]
    out = [np.zeros(days.size) for _ in range(3)]
    if cpu.shape[0] < 2:
        return out[0], out[1], out[2]
    with np.errstate(invalid="ignore", divide="ignore"):
        both = np.isfinite(cpu[1:]) & np.isfinite(cpu[:-1])
        both &= np.isfinite(mem[1:]) & np.isfinite(mem[:-1])
        d_cpu = cpu[1:] != cpu[:-1]
        d_mem = mem[1:] != mem[:-1]
        big = (np.abs(cpu[1:] - cpu[:-1]) >= BIG_CHANGE_FRACTION * cpu[:-1]) | (
            np.abs(mem[1:] - mem[:-1]) >= BIG_CHANGE_FRACTION * mem[:-1]
        )
    moments = timeline.moments_s[1:]
    day = np.floor(moments / DAY_S).astype(np.int64)
    n_c = cpu.shape[1]
    for k, flags in enumerate(((d_cpu | d_mem) & both, big & both, d_mem & both)):
        j, c = np.nonzero(flags)
        g = days.group_of(c.astype(np.int64), day[j])
        g = g[g >= 0]
        out[k] = np.bincount(g, minlength=days.size).astype(np.float64)
    del n_c
    return out[0], out[1], out[2]


def day_groups(trace: Trace, *, warmup_s: float, start_s: float) -> DayGroups:
    """The container-days scored after ``start_s`` (the first recompute) and warm-up."""
    return DayGroups(trace, scored_mask(trace, warmup_s=warmup_s, start_s=start_s))


def score_timeline(trace: Trace, timeline: Timeline, days: DayGroups) -> DayScores:
    """A profile's replay, per container-day (``days``: from :func:`day_groups` with
    the timeline's first recompute moment)."""
    row = timeline.row_of(trace.timestamp_s)
    c = trace.container_index
    return _score(
        trace,
        days,
        cpu_target_cores=timeline.values[CPU, "target"][row, c] / 1000.0,
        memory_target=timeline.values[MEMORY, "target"][row, c],
        memory_upper=timeline.values[MEMORY, "upper"][row, c],
        changes=_change_counts(timeline, days),
    )


def score_limits(
    trace: Trace,
    *,
    cpu_limit_cores: np.ndarray,
    memory_limit_bytes: np.ndarray,
    days: DayGroups,
) -> DayScores:
    """Fixed per-container limits (C,) as the target and upper bound (NaN = none)."""
    c = trace.container_index
    memory = np.asarray(memory_limit_bytes, dtype=np.float64)[c]
    return _score(
        trace,
        days,
        cpu_target_cores=np.asarray(cpu_limit_cores, dtype=np.float64)[c],
        memory_target=memory,
        memory_upper=memory,
        changes=None,
    )


def score_hindsight(trace: Trace, days: DayGroups) -> DayScores:
    """Perfect hindsight: each container-day's own maximum usage as its target."""
    targets = []
    for usage in (trace.cpu_cores, trace.memory_bytes):
        peak = np.full(days.size, -np.inf)
        values = usage[days.idx]
        ok = np.isfinite(values)
        np.maximum.at(peak, days.group[ok], values[ok])
        per_sample = np.full(usage.shape, np.nan)
        per_sample[days.idx] = np.where(np.isinf(peak), np.nan, peak)[days.group]
        targets.append(per_sample)
    return _score(
        trace,
        days,
        cpu_target_cores=targets[0],
        memory_target=targets[1],
        memory_upper=targets[1],
        changes=None,
    )


def _pct(flags: np.ndarray) -> float:
    return float(100.0 * np.mean(flags)) if flags.size else math.nan


def _stat(values: np.ndarray, how: str) -> float:
    v = values[np.isfinite(values)]
    if not v.size:
        return math.nan
    if how == "mean":
        return float(np.mean(v))
    return float(np.percentile(v, {"median": 50.0, "p50": 50.0, "p99": 99.0}[how]))


def summarise(scores: DayScores) -> dict[str, Any]:
    """The table's row: means, medians and shares over the container-days."""
    has_memory = np.isfinite(scores.memory_slack)
    # Days with a target to judge (a "manual" row has none where no limit is known).
    judged = has_memory | np.isfinite(scores.cpu_slack)
    return {
        "container_days": int(judged.sum()),
        "memory_slack_mean": _stat(scores.memory_slack, "mean"),
        "memory_slack_median": _stat(scores.memory_slack, "median"),
        "cpu_slack_mean": _stat(scores.cpu_slack, "mean"),
        "cpu_slack_median": _stat(scores.cpu_slack, "median"),
        "memory_overrun_days_pct": _pct(scores.memory_over_target[has_memory]),
        "memory_over_upper_days_pct": _pct(scores.memory_over_upper[has_memory]),
        "memory_over_1_2_target_days_pct": _pct(scores.memory_over_factor[has_memory]),
        "cpu_above_target_pct": 100.0 * _stat(scores.cpu_above_share, "mean"),
        "changes_per_day_p50": _stat(scores.changes, "p50"),
        "changes_per_day_p99": _stat(scores.changes, "p99"),
        "big_changes_per_day_p50": _stat(scores.big_changes, "p50"),
        "big_changes_per_day_p99": _stat(scores.big_changes, "p99"),
        "days_without_memory_change_pct": (
            _pct(scores.memory_changes == 0)
            if np.isfinite(scores.memory_changes).all() and scores.day.size
            else math.nan
        ),
    }


# Upstream updater's --pod-update-threshold (``MinChangePriority``,
# ``pkg/updater/priority/update_priority_calculator.go``): a pod inside its
# bounds is updated only when the summed relative request/target difference reaches it.
UPDATER_MIN_CHANGE = 0.10


def updater_proposals(timeline: Timeline) -> np.ndarray:
    """How many resizes upstream's updater would have proposed per container (C,).

    The rule (upstream's ``update_priority_calculator.go``, per container rather than
    summed over a pod's
    containers, and without the 12 h pod-age wait): the first recommendation becomes
    the request (admission); at every later recompute, a resize is proposed when the
    request lies outside [lower, upper] for CPU or memory, or when
    ``|req - target| / max(req, 1)`` summed over CPU (millicores) and memory
    (millibytes) is at least ``UPDATER_MIN_CHANGE``; a proposal sets the request to
    the target.
    """
    target_c = timeline.values[CPU, "target"]
    target_m = timeline.values[MEMORY, "target"]
    lower_c = timeline.values[CPU, "lower"]
    lower_m = timeline.values[MEMORY, "lower"]
    upper_c = timeline.values[CPU, "upper"]
    upper_m = timeline.values[MEMORY, "upper"]
    c = target_c.shape[1]
    req_c = np.full(c, np.nan)
    req_m = np.full(c, np.nan)
    count = np.zeros(c, dtype=np.int64)
    with np.errstate(invalid="ignore"):
        for j in range(1, target_c.shape[0]):
            tc, tm = target_c[j], target_m[j]
            has = np.isfinite(tc) & np.isfinite(tm)
            first = has & np.isnan(req_c)
            base_c = np.maximum(req_c, 1.0)
            base_m = np.maximum(req_m * 1000.0, 1.0)
            diff = np.abs(base_c - tc) / base_c + np.abs(base_m - tm * 1000.0) / base_m
            outside = (
                (req_c < lower_c[j])
                | (req_c > upper_c[j])
                | (req_m < lower_m[j])
                | (req_m > upper_m[j])
            )
            propose = (
                has & ~first & (outside | (diff >= UPDATER_MIN_CHANGE)) & (diff > 0)
            )
            count += propose
            take = first | propose
            req_c = np.where(take, tc, req_c)
            req_m = np.where(take, tm, req_m)
    return count
