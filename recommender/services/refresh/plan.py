"""What one ingestion window does (``WindowPlan``) and which checkpoints it writes.

A window is planned for one of three uses, each a named constructor: the minute cycle
(``WindowPlan.minute_cycle``), one day of a back-fill (``backfill_day``) and one chunk
of a first contact (``first_contact_chunk``). ``choose_checkpoints`` is the pure rule
of which checkpoints a window writes and in what order under the checkpoint budget
(upstream's ``--checkpoints-timeout``); the store step (``cycle.py``) only writes them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings

from recommender.cluster.base import OomKill
from recommender.services.refresh.ingest import STEP_S, Row

# How long a container met for the first time waits for its history to reach a source
# that keeps history (Prometheus: a new workload's first scrapes, a remote write behind)
# before a window without any of its samples moves its watermark. Until then each
# cycle reads its history again as a first contact does; after it, a container that
# still has none (a workload scaled to zero) costs a steady cycle nothing more.
HISTORY_WAIT_S = 900.0


@dataclass(frozen=True)
class CheckpointSchedule:
    """Which checkpoints a refresh writes (upstream: ``--checkpoints-timeout``).

    A checkpoint that changed materially (first contact, a new histogram key, no
    watermark yet, an OOM kill to store with it) is always written. Any other is
    written once it is ``interval_s`` old, oldest first, in bulk statements until
    ``timeout_s`` of the store phase has passed (the first statement of each group
    always runs). One not written keeps its watermark: the next cycle reads those
    samples again, so nothing is lost or counted twice.
    """

    interval_s: float
    timeout_s: float

    @classmethod
    def from_settings(cls) -> CheckpointSchedule:
        """VPAWEB_CHECKPOINT_INTERVAL_S and VPAWEB_CHECKPOINTS_TIMEOUT_S."""
        return cls(
            interval_s=float(settings.CHECKPOINT_INTERVAL_S),
            timeout_s=float(settings.CHECKPOINTS_TIMEOUT_S),
        )


@dataclass(frozen=True)
class WindowPlan:
    """One ingestion window: every discovered container from its watermark up to
    ``end``, committed at once. Build it with a named constructor."""

    # The window's end: its last grid time is the step at or before it.
    end: datetime
    # How far back from the cycle's ``now`` a first contact reads.
    history_s: float
    # The OOM kills the pod statuses report (discovery's snapshot).
    snapshot_kills: tuple[OomKill, ...] = ()
    # Recommend (and read the CFS counters for it), or only move checkpoints.
    recommend: bool = True
    # Pod names by workload id: the engine forgets every other pod's series.
    live_pods: Mapping[int, Collection[str]] | None = None
    # Which checkpoints to write; None: every one that is behind.
    checkpoints: CheckpointSchedule | None = None
    # Use and keep the engine rows of this process' earlier windows (warm_state.py).
    keeps_engine_rows: bool = False
    # Which workloads a fleet cuts into first-contact chunks: only those met for the
    # first time, or every one (a back-fill day).
    chunks_every_workload: bool = False
    # Usage may arrive this late: checkpoints hold only the samples up to ``end``
    # minus this, the next window reads the rest again (VPAWEB_LATE_SAMPLES_S).
    settle_s: float = 0.0
    # A container met for the first time that the source returned no sample of keeps
    # no watermark for this long after it was met (``HISTORY_WAIT_S``): its history,
    # arriving late, is read by a later cycle. 0: its watermark moves at once.
    history_wait_s: float = 0.0

    @classmethod
    def minute_cycle(
        cls,
        *,
        now: datetime,
        history_s: float,
        snapshot_kills: Sequence[OomKill],
        live_pods: Mapping[int, Collection[str]],
        source_keeps_history: bool,
        source_history_arrives_late: bool = False,
    ) -> WindowPlan:
        """The refresh cycle's window. A source that keeps history writes
        checkpoints on the schedule, settles late samples and keeps engine rows
        (unless it settles: those rows would hold the unsettled minutes); a live one
        writes every checkpoint (a live sample not stored now is lost)."""
        settle_s = float(settings.LATE_SAMPLES_S) if source_keeps_history else 0.0
        return cls(
            end=now,
            history_s=history_s,
            snapshot_kills=tuple(snapshot_kills),
            live_pods=live_pods,
            checkpoints=(
                CheckpointSchedule.from_settings() if source_keeps_history else None
            ),
            keeps_engine_rows=source_keeps_history and not settle_s,
            settle_s=settle_s,
            history_wait_s=HISTORY_WAIT_S if source_history_arrives_late else 0.0,
        )

    @classmethod
    def backfill_day(
        cls,
        *,
        end: datetime,
        history_s: float,
        snapshot_kills: Sequence[OomKill],
        is_last: bool,
    ) -> WindowPlan:
        """One committed day of a back-fill: every checkpoint written; recommends
        only on the last day, on the whole history, whose late samples settle as a
        minute cycle's do."""
        return cls(
            end=end,
            history_s=history_s,
            snapshot_kills=tuple(snapshot_kills),
            recommend=is_last,
            chunks_every_workload=True,
            settle_s=float(settings.LATE_SAMPLES_S) if is_last else 0.0,
        )

    def first_contact_chunk(
        self, snapshot_kills: Sequence[OomKill] | None = None
    ) -> WindowPlan:
        """This window for one chunk of workloads: it keeps no engine rows, so its
        memory stays that of one chunk (the next cycle decodes them once). With
        ``snapshot_kills``: the kills of the chunk's workloads only
        (``chunking.kills_by_part``)."""
        kills = self.snapshot_kills if snapshot_kills is None else tuple(snapshot_kills)
        return dataclasses.replace(self, keeps_engine_rows=False, snapshot_kills=kills)

    def with_kills(self, snapshot_kills: Sequence[OomKill]) -> WindowPlan:
        """This window with ``snapshot_kills`` only: a steady window's share of the
        pod statuses' kills (``chunking.kills_by_part``)."""
        return dataclasses.replace(self, snapshot_kills=tuple(snapshot_kills))

    @property
    def end_s(self) -> float:
        """The newest grid time read: the watermark after storing."""
        return math.floor(self.end.timestamp() / STEP_S) * STEP_S


@dataclass(frozen=True)
class CheckpointChoice:
    """The checkpoints of a group of rows a window writes."""

    # Written whatever the budget.
    now: list[Row]
    # Due on the schedule, oldest first, one statement each: written in this order
    # until the budget is spent, the first always.
    due: list[list[Row]]
    # How many were behind the window: those not written are deferred.
    behind: int


def choose_checkpoints(
    rows: Sequence[Row],
    *,
    end_at: datetime,
    now: datetime,
    schedule: CheckpointSchedule | None,
    batch: int,
    history_wait_s: float = 0.0,
) -> CheckpointChoice:
    """Which of ``rows``' checkpoints to write: without a schedule every one behind
    ``end_at``; with one, the material ones now and the due ones in batches. A row
    waiting for its history (``waits_for_history``) is not written: its watermark
    does not pass minutes its source returned nothing for."""
    behind = [
        r
        for r in rows
        if _is_behind(r, end_at) and not waits_for_history(r, now, history_wait_s)
    ]
    if schedule is None:
        return CheckpointChoice(now=behind, due=[], behind=len(behind))
    due_at = now.timestamp() - schedule.interval_s
    due = sorted(
        (
            r
            for r in behind
            if not _is_material(r) and r.checkpoint.updated_at.timestamp() <= due_at
        ),
        key=lambda r: r.checkpoint.updated_at,
    )
    return CheckpointChoice(
        now=[r for r in behind if _is_material(r)],
        due=[due[start : start + batch] for start in range(0, len(due), batch)],
        behind=len(behind),
    )


def waits_for_history(row: Row, now: datetime, history_wait_s: float) -> bool:
    """A container met for the first time (no watermark) that this window fed
    nothing, within ``history_wait_s`` of being met (its checkpoint row's creation:
    ``updated_at``, not moved until it is first written)."""
    checkpoint = row.checkpoint
    return (
        checkpoint.last_sample_at is None
        and not row.is_fed
        and (now - checkpoint.updated_at).total_seconds() < history_wait_s
    )


def _is_behind(row: Row, end_at: datetime) -> bool:
    """The row's checkpoint is behind this window (fed, new key, watermark behind)."""
    checkpoint = row.checkpoint
    return (
        row.is_fed
        or checkpoint.histogram_key != row.key_text
        or checkpoint.last_sample_at is None
        or checkpoint.last_sample_at < end_at
    )


def _is_material(row: Row) -> bool:
    """A change that must be stored now, whatever the schedule."""
    checkpoint = row.checkpoint
    return (
        row.is_rebuilt
        or bool(row.ooms)
        or checkpoint.histogram_key != row.key_text
        or checkpoint.last_sample_at is None
    )
