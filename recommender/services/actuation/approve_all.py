"""Deciding many changes at once: approving, rejecting (one reason, one snooze) or
withdrawing the approval of every open change of a workload, or of a namespace of a
cluster. Each one goes through the single decision (``approvals.approve_change``,
``reject_change``, ``withdraw_change``: its own compare-and-swap and audit event), so
a bulk decision is exactly the sum of single ones: a change someone else decided
meanwhile is skipped and counted, not forced."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth.models import User
from django.db.models import QuerySet

from recommender.errors import Conflict, InvalidInput, NotFound
from recommender.models import Cluster, ResizeChange, Workload
from recommender.services.actuation.approvals import (
    REJECTABLE,
    approve_change,
    reject_change,
    withdraw_change,
)

# One request approves at most this many changes (the rest stay proposed).
MAX_BULK = 1000


@dataclass
class BulkResult:
    """Which changes were approved, and which were skipped and why."""

    approved: list[int] = field(default_factory=list)
    skipped: dict[int, str] = field(default_factory=dict)


def proposed_changes(
    *,
    workload_id: int | None = None,
    cluster: str | None = None,
    namespace: str | None = None,
    statuses: Collection[str] = (ResizeChange.Status.PROPOSED,),
) -> QuerySet[ResizeChange]:
    """The changes in ``statuses`` (proposed by default) of a workload, or of a
    cluster's namespace, in the order a bulk decision takes them (NotFound,
    InvalidInput naming the field)."""
    changes = ResizeChange.objects.filter(status__in=list(statuses))
    if workload_id is not None:
        if not Workload.objects.filter(pk=workload_id).exists():
            raise NotFound(f"workload {workload_id} does not exist")
        changes = changes.filter(workload_id=workload_id)
    elif cluster and namespace:
        if not Cluster.objects.filter(name=cluster).exists():
            raise NotFound(f"cluster {cluster!r} does not exist")
        changes = changes.filter(
            workload__cluster__name=cluster, workload__namespace=namespace
        )
    else:
        raise InvalidInput(
            "name a workload, or a cluster and a namespace, to approve in bulk",
            field="workload",
        )
    return changes.order_by("-priority", "pk")


def approve_all(
    *,
    approved_by: User | None,
    now: datetime,
    workload_id: int | None = None,
    cluster: str | None = None,
    namespace: str | None = None,
    actor_label: str | None = None,
    change_ids: Collection[int] | None = None,
) -> BulkResult:
    """Approve every proposed change of a workload, or of a cluster's namespace; with
    ``change_ids`` only those of them (what the operator confirmed: a change proposed
    since is left alone, one decided since is skipped and counted)."""
    changes = proposed_changes(
        workload_id=workload_id, cluster=cluster, namespace=namespace
    )
    result = BulkResult()
    if change_ids is not None:
        changes = changes.filter(pk__in=change_ids)
    ids = list(changes.values_list("pk", flat=True))
    if change_ids is not None:
        for gone in sorted(set(change_ids) - set(ids)):
            result.skipped[gone] = f"change {gone} is no longer proposed in this scope"
    for change_id in ids[:MAX_BULK]:
        try:
            approve_change(
                change_id=change_id,
                approved_by=approved_by,
                now=now,
                actor_label=actor_label,
            )
        except Conflict as exc:
            result.skipped[change_id] = str(exc)
            continue
        result.approved.append(change_id)
    return result


@dataclass
class BulkDecision:
    """Which changes a bulk rejection or withdrawal decided, and which it skipped."""

    decided: list[int] = field(default_factory=list)
    skipped: dict[int, str] = field(default_factory=dict)


def _decide_all(
    ids: list[int], decide: Callable[[int], object], result: BulkDecision
) -> BulkDecision:
    for change_id in ids[:MAX_BULK]:
        try:
            decide(change_id)
        except Conflict as exc:
            result.skipped[change_id] = str(exc)
            continue
        result.decided.append(change_id)
    return result


def _scoped_ids(
    *,
    statuses: Collection[str],
    workload_id: int | None,
    cluster: str | None,
    namespace: str | None,
    change_ids: Collection[int] | None,
    result: BulkDecision,
) -> list[int]:
    changes = proposed_changes(
        workload_id=workload_id, cluster=cluster, namespace=namespace, statuses=statuses
    )
    if change_ids is not None:
        changes = changes.filter(pk__in=list(change_ids))
    ids = list(changes.values_list("pk", flat=True))
    if change_ids is not None:
        for gone in sorted(set(change_ids) - set(ids)):
            result.skipped[gone] = f"change {gone} can no longer be decided here"
    return ids


def reject_all(
    *,
    rejected_by: User | None,
    now: datetime,
    reason: str = "",
    snooze: str = ResizeChange.Snooze.UNTIL_CHANGED,
    workload_id: int | None = None,
    cluster: str | None = None,
    namespace: str | None = None,
    actor_label: str | None = None,
    change_ids: Collection[int] | None = None,
) -> BulkDecision:
    """Reject every open (proposed or approved, not applied) change of a workload or
    of a cluster's namespace, each with the same reason and snooze (one audit event
    each); with ``change_ids`` only those of them."""
    if snooze not in ResizeChange.Snooze.values:
        raise InvalidInput(
            f"snooze must be one of {', '.join(ResizeChange.Snooze.values)}",
            field="snooze",
        )
    result = BulkDecision()
    ids = _scoped_ids(
        statuses=REJECTABLE,
        workload_id=workload_id,
        cluster=cluster,
        namespace=namespace,
        change_ids=change_ids,
        result=result,
    )
    return _decide_all(
        ids,
        lambda change_id: reject_change(
            change_id=change_id,
            rejected_by=rejected_by,
            now=now,
            reason=reason,
            snooze=snooze,
            actor_label=actor_label,
        ),
        result,
    )


def withdraw_all(
    *,
    withdrawn_by: User | None,
    now: datetime,
    workload_id: int | None = None,
    cluster: str | None = None,
    namespace: str | None = None,
    actor_label: str | None = None,
    change_ids: Collection[int] | None = None,
) -> BulkDecision:
    """Withdraw every approval not yet applied of a workload or of a cluster's
    namespace (one ``change.withdraw`` audit event each)."""
    result = BulkDecision()
    ids = _scoped_ids(
        statuses=(ResizeChange.Status.APPROVED,),
        workload_id=workload_id,
        cluster=cluster,
        namespace=namespace,
        change_ids=change_ids,
        result=result,
    )
    return _decide_all(
        ids,
        lambda change_id: withdraw_change(
            change_id=change_id,
            withdrawn_by=withdrawn_by,
            now=now,
            actor_label=actor_label,
        ),
        result,
    )
