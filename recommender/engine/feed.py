"""The one way samples and OOM kills enter the engine: in upstream's units, in time
order."""
# Two rules live here, for every caller (the offline CSV command, the refresh cycle's
# ingestion, back-fill and replay):
#
# * **Units.** Upstream keeps usage as integer ``ResourceAmount``s: CPU in whole
#   millicores, memory in whole bytes (model/types.go). Its Prometheus history truncates
#   ``rate() * 1000`` (``CPUAmountFromCores``) and the bytes
#   (``MemoryAmountFromBytes``); metrics-server reports millicores. The histograms then
#   receive ``float64(millicores) / 1000`` cores (``CoresFromCPUAmount``) and
#   ``float64(bytes)``. :func:`quantised_cpu_cores` and :func:`quantised_memory_bytes`
#   do exactly that, and :func:`feed` applies them to every sample, so a source may pass
#   fractional cores. A source that reads whole millicores hands over
#   :func:`cores_from_millicores`, which survives the truncation unchanged.
# * **Order.** Usage up to and including an OOM kill's time, then the kills of that
#   time, then the rest: upstream's one-event-at-a-time loop, where a kill is recorded
#   after the usage samples reported with it. The memory windows are order-dependent
#   (upstream's ``addMemorySample`` and ``RecordOOM`` in
#   ``pkg/recommender/model/container.go``), so the state does not depend on how the
#   caller splits its history into batches.
#
# Shapes: a :class:`SampleBatch` of n events (flat) or S series x T times (grid form,
# kept as a grid when cut); an :class:`OomBatch` of k events.

from __future__ import annotations

import numpy as np

from .aggregation import AggregateSet
from .batch import IngestStats, OomBatch, SampleBatch
from .resources import MAX_RESOURCE_AMOUNT

# model/types.go: CPUAmountFromCores multiplies cores by 1000 (millicores).
MILLICORES_PER_CORE = 1000.0


def _resource_amounts(values: np.ndarray) -> np.ndarray:
    """Go ``resourceAmountFromFloat`` as float64, keeping NaN (no sample) as NaN."""
    with np.errstate(invalid="ignore"):
        out = np.trunc(np.minimum(values, float(MAX_RESOURCE_AMOUNT)))
        return np.where(values < 0, 0.0, out)


def quantised_cpu_cores(cpu_cores: np.ndarray) -> np.ndarray:
    """``CoresFromCPUAmount(CPUAmountFromCores(c))``: whole millicores, as cores."""
    values = np.asarray(cpu_cores, dtype=np.float64)
    return _resource_amounts(values * MILLICORES_PER_CORE) / MILLICORES_PER_CORE


def quantised_memory_bytes(memory_bytes: np.ndarray) -> np.ndarray:
    """``BytesFromMemoryAmount(MemoryAmountFromBytes(b))``: whole bytes."""
    return _resource_amounts(np.asarray(memory_bytes, dtype=np.float64))


def cores_from_millicores(millicores: np.ndarray) -> np.ndarray:
    """Cores that :func:`quantised_cpu_cores` maps to exactly ``millicores / 1000``.

    ``m / 1000 * 1000`` falls one ulp below ``m`` for about 1 % of integers, and the
    truncation would then lose a millicore that metrics-server reported; those values
    are nudged up by one ulp (still within the same millicore).
    """
    m = np.asarray(millicores, dtype=np.float64)
    cores = m / MILLICORES_PER_CORE
    return np.where(cores * MILLICORES_PER_CORE < m, np.nextafter(cores, np.inf), cores)


def quantised(batch: SampleBatch) -> SampleBatch:
    """The batch with upstream's integer units (grid form kept)."""
    grid = batch.grid
    if grid is not None:
        return SampleBatch.from_grid(
            series_aggregate=batch.series_aggregate,
            series_keys=batch.series_keys,
            timestamp_s=grid.timestamp_s,
            cpu_cores=quantised_cpu_cores(grid.cpu_cores),
            memory_bytes=quantised_memory_bytes(grid.memory_bytes),
        )
    return SampleBatch(
        series_aggregate=batch.series_aggregate,
        series_keys=batch.series_keys,
        series_index=batch.series_index,
        timestamp_s=batch.timestamp_s,
        cpu_cores=quantised_cpu_cores(batch.cpu_cores),
        memory_bytes=quantised_memory_bytes(batch.memory_bytes),
    )


class _Cutter:
    """Cuts a (quantised) batch into consecutive time ranges ``(.., t]``."""

    def __init__(self, batch: SampleBatch):
        self.batch = batch
        grid = batch.grid
        if grid is not None and np.all(grid.timestamp_s[1:] > grid.timestamp_s[:-1]):
            self.times = grid.timestamp_s
            self.order: np.ndarray | None = None
        else:
            # Stable: equal times keep the batch's order, as the engine applies them.
            self.order = np.argsort(batch.timestamp_s, kind="stable")
            self.times = batch.timestamp_s[self.order]
        self.done = 0

    def index_after(self, moment_s: float) -> int:
        return int(np.searchsorted(self.times, moment_s, side="right"))

    def take(self, hi: int) -> SampleBatch | None:
        """The events from where the last cut ended up to position ``hi``."""
        lo, self.done = self.done, max(self.done, hi)
        if hi <= lo:
            return None
        b = self.batch
        if self.order is None:
            assert b.grid is not None
            return SampleBatch.from_grid(
                series_aggregate=b.series_aggregate,
                series_keys=b.series_keys,
                timestamp_s=b.grid.timestamp_s[lo:hi],
                cpu_cores=b.grid.cpu_cores[:, lo:hi],
                memory_bytes=b.grid.memory_bytes[:, lo:hi],
            )
        pick = self.order[lo:hi]
        return SampleBatch(
            series_aggregate=b.series_aggregate,
            series_keys=b.series_keys,
            series_index=b.series_index[pick],
            timestamp_s=b.timestamp_s[pick],
            cpu_cores=b.cpu_cores[pick],
            memory_bytes=b.memory_bytes[pick],
        )


def feed(
    aggregates: AggregateSet,
    samples: SampleBatch | None,
    ooms: OomBatch | None = None,
) -> IngestStats:
    """Add ``samples`` (quantised to upstream's units) and ``ooms`` in time order.

    Every OOM kill is recorded after the samples at or before its time and before the
    later ones; kills of one time go in their batch order.
    """
    if ooms is None or not ooms.timestamp_s.size:
        # Nothing to interleave: the engine applies a batch in time order itself.
        return (
            IngestStats()
            if samples is None
            else aggregates.add_samples(quantised(samples))
        )
    stats = IngestStats()
    cutter = _Cutter(quantised(samples)) if samples is not None else None
    # Kills of consecutive moments with no sample between them go in one batch: the
    # engine records a batch in (timestamp, position) order, which is theirs.
    moments = np.unique(ooms.timestamp_s).tolist()
    first = 0  # the first moment whose kills are not recorded yet
    for number, moment in enumerate(moments):
        if cutter is not None:
            part = cutter.take(cutter.index_after(moment))
            if part is not None:
                stats = stats + _record(aggregates, ooms, moments[first:number])
                first = number
                stats = stats + aggregates.add_samples(part)
    stats = stats + _record(aggregates, ooms, moments[first:])
    if cutter is not None:
        rest = cutter.take(cutter.times.size)
        if rest is not None:
            stats = stats + aggregates.add_samples(rest)
    return stats


def _record(
    aggregates: AggregateSet, ooms: OomBatch, moments: list[float]
) -> IngestStats:
    """The kills of ``moments`` (consecutive, increasing) in one batch."""
    if not moments:
        return IngestStats()
    pick = np.flatnonzero(
        (ooms.timestamp_s >= moments[0]) & (ooms.timestamp_s <= moments[-1])
    )
    return aggregates.record_ooms(
        OomBatch(
            series_aggregate=ooms.series_aggregate,
            series_keys=ooms.series_keys,
            series_index=ooms.series_index[pick],
            timestamp_s=ooms.timestamp_s[pick],
            memory_request_bytes=ooms.memory_request_bytes[pick],
        )
    )
