"""Expiry of idle aggregates (upstream garbage-collects them hourly): a checkpoint idle
for the profile's history is reset, judged row by row, a batch per histogram key."""

from __future__ import annotations

import logging
from datetime import datetime

from django.utils import timezone

from recommender.engine.aggregation import AggregateSet
from recommender.engine.profiles import Profile
from recommender.errors import InvalidInput
from recommender.models import (
    Checkpoint,
    RefreshRun,
)
from recommender.services.operations.runs import recorded_run
from recommender.services.policy.validation import profile_or_default
from recommender.services.readmodels.savings_trend import thin_snapshots
from recommender.services.refresh import ingest
from recommender.services.refresh.discovery import BATCH

logger = logging.getLogger(__name__)


def expire_idle_aggregates(*, now: datetime) -> RefreshRun:
    """Forget the state of aggregates idle for the profile's history (upstream: 8 days).

    The checkpoint row is reset, not deleted (empty state and key, no watermark; a
    compare-and-swap on its version), so a refresh running meanwhile always finds its
    row; the next refresh rebuilds the state from history. Recommendations are history
    and stay. Checkpoints are judged a chunk at a time as they are read: memory is
    bounded by ``BATCH`` per histogram key, not by the fleet.

    Each row is judged on its own: a checkpoint that cannot be read (a corrupt blob,
    e.g. of a deleted workload) is logged, counted in ``counts["failed"]`` and left
    as it is (the next refresh of a live container rebuilds it), and the job goes on.
    """
    if timezone.is_naive(now):
        raise InvalidInput("now must be timezone-aware", field="now")
    with recorded_run(kind=RefreshRun.Kind.EXPIRE) as recorder:
        # The savings trend is thinned on the same hourly schedule.
        recorder.counts = {**_expire_all(now=now), **thin_snapshots(now=now)}
    return recorder.run


def _expire_all(*, now: datetime) -> dict[str, int]:
    """Judge every written checkpoint, a batch per histogram key; return the counts
    (``failed``: checkpoints that could not be read)."""
    checked = expired = failed = 0
    checkpoints = (
        Checkpoint.objects.exclude(version=0)
        .exclude(histogram_key="")  # never written, or reset by an earlier expiry
        .select_related("container__workload__policy")
        .order_by("pk")
    )
    buffers: dict[str, tuple[Profile, list[Checkpoint]]] = {}
    for checkpoint in checkpoints.iterator(chunk_size=BATCH):
        profile = profile_or_default(checkpoint.container.workload)
        key_text = ingest.key_text(profile)
        # A checkpoint of other histogram settings is rebuilt by the next refresh
        # anyway.
        if checkpoint.histogram_key != key_text or not checkpoint.state:
            continue
        members = buffers.setdefault(key_text, (profile, []))[1]
        members.append(checkpoint)
        if len(members) >= BATCH:
            checked += len(members)
            batch_expired, batch_failed = _expire_batch(profile, members, now=now)
            expired, failed = expired + batch_expired, failed + batch_failed
            members.clear()
    for profile, members in buffers.values():
        if members:
            checked += len(members)
            batch_expired, batch_failed = _expire_batch(profile, members, now=now)
            expired, failed = expired + batch_expired, failed + batch_failed
    return {"checked": checked, "expired": expired, "failed": failed}


def _idle_flags(
    profile: Profile, batch: list[Checkpoint], *, now: datetime
) -> list[bool | None]:
    """Per checkpoint: idle or not, or None when it cannot be read. The batch is read
    at once; if that fails, row by row, so one bad row costs only itself."""
    now_s = now.timestamp()
    try:
        aggregates = AggregateSet.from_checkpoints(
            profile, [bytes(c.state) for c in batch]
        )
        return list(aggregates.is_expired(now_s=now_s).tolist())
    except Exception:  # a bad row: found and counted one by one below
        pass
    flags: list[bool | None] = []
    for checkpoint in batch:
        try:
            one = AggregateSet.from_checkpoints(profile, [bytes(checkpoint.state)])
            flags.append(bool(one.is_expired(now_s=now_s)[0]))
        except Exception as exc:  # one unreadable row never stops the job
            logger.warning(
                "expiry: cannot read the checkpoint of container %s (%s, version "
                "%s): %s: %s; left as it is",
                checkpoint.container_id,
                checkpoint.container,
                checkpoint.version,
                type(exc).__name__,
                exc,
            )
            flags.append(None)
    return flags


def _expire_batch(
    profile: Profile, batch: list[Checkpoint], *, now: datetime
) -> tuple[int, int]:
    """Reset the idle checkpoints of one batch of one key; return (expired, failed)."""
    flags = _idle_flags(profile, batch, now=now)
    expired = 0
    for checkpoint, gone in zip(batch, flags, strict=True):
        if not gone:
            continue
        # Only the version we judged: a refresh that just fed it keeps it, and a
        # refresh holding this version loses its compare-and-swap and skips the row.
        reset = Checkpoint.objects.filter(
            pk=checkpoint.pk, version=checkpoint.version
        ).update(
            histogram_key="",
            state=b"",
            last_sample_at=None,
            sample_count=0,
            version=checkpoint.version + 1,
            updated_at=now,
        )
        if reset:
            expired += 1
            logger.info(
                "expired the idle aggregate of container %s (%s)",
                checkpoint.container_id,
                checkpoint.container,
            )
    return expired, flags.count(None)


# --- recommendation -------------------------------------------------------------------
