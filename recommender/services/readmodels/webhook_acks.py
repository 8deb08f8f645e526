"""The handshake between the updater and the webhook processes.

Each ``webhook serve`` process acknowledges, per cluster it serves, how far it has
loaded the journal of webhook inputs (``AdmissionChange``: a workload's mode, policy,
recommendation): a ``WebhookAck`` row, written after each reload and as a heartbeat
every ``HEARTBEAT_S``, and shown in its ``/readyz``. The updater evicts or resizes a
workload's pod only when every live process serving the cluster (seen within
``LIVE_S``) has loaded that workload's latest journal row, so a replacement pod is
admitted with the policy and recommendation the change was made for; otherwise the
change waits (``WAITING``)."""
# Without Redis a process reloads every VPAWEB_WEBHOOK_RELOAD_S, so a change waits at
# most that long after its workload's inputs changed. A process that stops
# acknowledging (stopped, cut from the database) is not waited for after LIVE_S: a
# process without a database fails open on its own (VPAWEB_WEBHOOK_MAX_SNAPSHOT_AGE_S).
# A cluster with no live process (the simulated cluster admits in-process, from a cache
# refreshed before each pod; a webhook not installed) has nothing to wait for. The
# journal keeps an hour of rows: a workload whose inputs have not changed for longer
# has no row to wait for, and every process rebuilds its whole cache more often than
# that (``snapshot.FULL_REBUILD_EVERY_S``).

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Max

from recommender.models import AdmissionChange, WebhookAck

logger = logging.getLogger(__name__)

HEARTBEAT_S = 5.0
# A process not seen this long is not waited for (six missed heartbeats).
LIVE_S = 30.0
# Rows of processes gone this long are deleted by the next acknowledgement.
FORGET_AFTER = timedelta(hours=1)
WAITING = "waiting for the webhook to load the new policy"

PROCESS = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True)
class Loaded:
    """What a process has loaded of one cluster's journal."""

    after: int
    holes: tuple[tuple[int, int], ...]
    loaded_at: datetime


def acknowledge(
    *, cluster_id: int, loaded: Loaded, now: datetime, process: str = PROCESS
) -> None:
    """Store what this process has loaded of the cluster's journal, and that it is
    alive (``now``, wall-clock time)."""
    WebhookAck.objects.update_or_create(
        process=process,
        cluster_id=cluster_id,
        defaults={
            "journal_after": loaded.after,
            "journal_holes": [list(h) for h in loaded.holes],
            "loaded_at": loaded.loaded_at,
            "seen_at": now,
        },
    )
    WebhookAck.objects.filter(seen_at__lt=now - FORGET_AFTER).delete()


def live_acks(*, cluster_id: int, now: datetime) -> list[WebhookAck]:
    """The acknowledgements of the processes serving the cluster seen within
    ``LIVE_S`` of ``now`` (wall-clock time)."""
    return list(
        WebhookAck.objects.filter(
            cluster_id=cluster_id, seen_at__gte=now - timedelta(seconds=LIVE_S)
        ).order_by("process")
    )


def not_loaded(
    *, cluster_id: int, workload_ids: Iterable[int], now: datetime
) -> dict[int, str]:
    """Why each of ``workload_ids`` must wait (absent: it need not): the live
    processes that have not loaded its latest journal row. Two queries."""
    acks = live_acks(cluster_id=cluster_id, now=now)
    ids = set(workload_ids)
    if not acks or not ids:
        return {}
    latest = dict(
        AdmissionChange.objects.filter(cluster_id=cluster_id, workload_id__in=ids)
        .values_list("workload_id")
        .annotate(top=Max("pk"))
        .values_list("workload_id", "top")
    )
    waiting = {}
    for workload_id, journal_id in latest.items():
        behind = [a.process for a in acks if not a.has_loaded(journal_id)]
        if behind:
            waiting[workload_id] = (
                f"{WAITING} ({len(behind)} of {len(acks)} webhook processes have "
                f"not loaded journal row {journal_id}: {', '.join(behind[:3])})"
            )
    return waiting
