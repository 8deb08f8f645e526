"""Self-healing after an upsize: an eviction whose replacement cannot be scheduled is
reverted to the previous requests, once, by the same writer.

``decide`` records the revert: the webhook then admits the workload's new pods with the
change's ``resources_before`` while the recommendation stays within the change's band
(``readmodels.reverts``), and the updater proposes nothing within it. ``evict_stuck``
then evicts the replacement stuck Pending, once, after every live webhook process has
loaded the revert (the handshake); its controller recreates it with the previous
requests. The change fails saying what was reverted; no pod is evicted twice for it."""
# Why evict the stuck replacement rather than resize it: it has no node, so there is no
# kubelet to resize it, and a Pending pod is evicted without any PDB check (k8s-wire
# eviction/15-16: 201 while disruptionsAllowed is 0). The original pod is gone already
# (evicted once by the change); the replacement is evicted once by its revert.

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from recommender.cluster.base import PodInfo
from recommender.cluster.writer import ClusterWriter
from recommender.engine.quantity import humanize_cpu, humanize_memory
from recommender.models import Cluster, ResizeChange
from recommender.services.actuation import control, permissions, workflow
from recommender.services.readmodels import webhook_acks as acks
from recommender.services.readmodels.generation import note_admission_changes

logger = logging.getLogger(__name__)

S = ResizeChange.Status
# How a reverted change's error goes on after its unschedulable part.
REVERTED = "reverted to the previous requests"


def requests_text(resources: Mapping[str, Any]) -> str:
    """``app cpu 100m memory 64Mi`` from ResizeChange's shape."""
    parts = []
    for name, values in sorted(resources.items()):
        requests = values.get("requests") or {}
        amounts = []
        if requests.get("cpu") is not None:
            amounts.append(f"cpu {humanize_cpu(int(requests['cpu']))}")
        if requests.get("memory") is not None:
            amounts.append(f"memory {humanize_memory(int(requests['memory']))}")
        parts.append(f"{name} {' '.join(amounts)}")
    return ", ".join(parts)


def decide(
    change: ResizeChange, replacement: PodInfo, *, stuck: str, now: datetime
) -> bool:
    """Record the revert of ``change`` (its replacement ``replacement`` cannot be
    scheduled: ``stuck`` says why) and journal the workload for the webhook, in one
    transaction; False when it was recorded already (only once)."""
    error = (
        f"{stuck}; {REVERTED} ({requests_text(change.resources_before)}): new pods "
        "are admitted with them until the recommendation changes; "
        f"{replacement.name} is evicted once the webhook has loaded them"
    )
    with transaction.atomic():
        won = ResizeChange.objects.filter(
            pk=change.pk, status=S.APPLYING, reverted_at__isnull=True
        ).update(reverted_at=now, revert_pod=replacement.name, error=error)
        if not won:
            return False
        # The webhook reloads the workload (and the handshake waits for that).
        note_admission_changes(
            cluster_id=change.workload.cluster_id, workload_ids=[change.workload_id]
        )
    change.reverted_at, change.revert_pod, change.error = now, replacement.name, error
    logger.warning(
        "change %s: replacement %s of %s cannot be scheduled; reverting to %s",
        change.pk,
        replacement.name,
        change.pod,
        requests_text(change.resources_before),
    )
    return True


def evict_stuck(
    changes: Iterable[ResizeChange],
    *,
    pods: Mapping[int, list[PodInfo]],
    writer: ClusterWriter,
    cluster: Cluster,
    now: datetime,
) -> tuple[int, int]:
    """Evict the stuck replacement of each reverted change, once, when the webhook
    has loaded the revert and the eviction path is open; the change then fails
    saying so. Returns (evicted, failed: the changes it finished)."""
    reverting = [c for c in changes if c.reverted_at and not c.revert_evicted_at]
    if not reverting:
        return 0, 0
    waiting_for = acks.not_loaded(
        cluster_id=cluster.pk,
        workload_ids={c.workload_id for c in reverting},
        now=timezone.now(),  # wall-clock: the processes' heartbeats are
    )
    evicted = failed = 0
    for change in reverting:
        blocked = waiting_for.get(change.workload_id) or permissions.path_block_reason(
            cluster, permissions.EVICTION, now=now
        )
        if blocked:
            continue
        pod = next(
            (
                p
                for p in pods.get(change.workload_id, ())
                if p.name == change.revert_pod
            ),
            None,
        )
        # Once: the compare-and-swap under the acting predicate (Off, a pause or
        # the kill switch stop it as every write) is taken before the request.
        won = (
            ResizeChange.objects.filter(
                pk=change.pk, status=S.APPLYING, revert_evicted_at__isnull=True
            )
            .filter(control.acting_q("workload__"))
            .update(revert_evicted_at=now)
        )
        if not won:
            continue
        if pod is None:
            outcome = f"{change.revert_pod} was gone already"
        else:
            result = writer.evict_pod(namespace=pod.namespace, name=pod.name)
            permissions.record_write_result(
                cluster, permissions.EVICTION, result, now=now
            )
            outcome = (
                f"{pod.name} evicted to be recreated with them"
                if result.ok or result.status == 404
                else f"{pod.name} could not be evicted: HTTP {result.status} "
                f"{result.message}"
            )
            evicted += int(result.ok)
        error = change.error.split("; " + REVERTED)[0]
        error += (
            f"; {REVERTED} ({requests_text(change.resources_before)}): new pods are "
            f"admitted with them until the recommendation changes; {outcome}"
        )
        failed += workflow.try_transition(
            change,
            to=S.FAILED,
            allowed_from=(S.APPLYING,),
            now=now,
            note=error,
            error=error,
        )
    return evicted, failed
