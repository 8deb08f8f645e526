"""What may write, and who: the kill switch, per-cluster pause, dry run, and the one
updater per cluster."""
# Writes stop when any of these holds (``write_block_reason`` names which):
#
# - the cluster's actuation is not allowed (``Cluster.actuation_allowed``, off until an
#   admin allows it: ``set_actuation_allowed``, audited);
# - ``VPAWEB_UPDATER_KILL_SWITCH`` is set (a deploy-time stop);
# - the admin's actuation kill switch is on (``ActuationControl``, audited);
# - the cluster is paused (``Cluster.updates_paused``, audited);
# - ``VPAWEB_UPDATER_DRY_RUN`` is set: the updater proposes (and approves automatically)
#   but never writes.
#
# THE acting predicate (``acting_q``) says the same as a filter on rows, so it can be
# part of the compare-and-swap that starts a write (``apply.Applier``, ``approved →
# applying``): a vpaweb-owned policy in an acting mode
# (``models.policy.updater_policy_q``), the cluster's actuation allowed and not paused,
# both kill switches off.
# An operator's decision committed before that statement wins; the updater's earlier
# reads of the policy or the switches never do.
#
# One updater per cluster: a **database lease** (``UpdaterLock``). A worker takes it
# with a filtered ``update()`` that only matches a free, expired or already-held lock,
# so two workers can never both win; the holder renews it at the start and at the end of
# every cycle, so it lasts ``lock_ttl_s`` (one updater interval) past its last cycle. A
# gracefully stopped process releases its leases (``release_locks``: the embedded
# scheduler's loop, a Celery worker process's shutdown); a killed one's lease is taken
# over by the next cycle after it expired, or at once when its holder ran on this host
# and that process is gone (``holder_is_gone``). Every takeover is logged, and a cluster
# whose lease is free or expired shows "no leader since …" on the overview. The database
# was chosen over a Kubernetes ``Lease`` because it covers the simulated cluster too and
# needs no extra RBAC; see docs/updater.md.

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import BooleanField, Exists, Q, Value

from recommender.models import ActuationControl, Cluster, UpdaterLock
from recommender.models.actuation import kill_switch_reason as kill_switch_reason
from recommender.models.policy import updater_policy_q
from recommender.services.access.audit import Action, actor_label_of, record_audit
from recommender.services.readmodels.generation import mark_admission_data_changed

logger = logging.getLogger(__name__)

KILL_SWITCH_ACTION = Action.UPDATER_KILL_SWITCH
PAUSE_ACTION = Action.UPDATER_PAUSE
ACTUATION_ACTION = Action.CLUSTER_ACTUATION
# One identity per process: a Celery worker child, or the embedded scheduler.
PROCESS_IDENTITY = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def lock_ttl_s() -> float:
    """How long a lease lasts past its holder's last renewal: one updater interval
    (renewed at the start and the end of each cycle, so a live holder keeps it)."""
    return float(settings.UPDATER_INTERVAL_S)


def holder_is_gone(holder: str) -> bool:
    """Whether ``holder`` (a ``PROCESS_IDENTITY``) ran on this host in a process that
    no longer runs: a pid that is not alive, or this process's own pid under another
    identity (a restarted container reuses its pid). False when unsure."""
    parts = holder.split(":")
    if holder == PROCESS_IDENTITY or len(parts) != 3:
        return False
    if parts[0] != socket.gethostname():
        return False
    try:
        pid = int(parts[1])
    except ValueError:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # alive, another user's
    return False


def write_block_reason(cluster: Cluster) -> str | None:
    """Why the updater must not write to ``cluster`` now, or None."""
    return cluster_block_reason(cluster, kill_switch=kill_switch_reason())


def cluster_block_reason(cluster: Cluster, *, kill_switch: str | None) -> str | None:
    """``write_block_reason`` with the kill switch already read (a list of clusters
    reads it once)."""
    if not cluster.actuation_allowed:
        return (
            f"actuation is not allowed for cluster {cluster.name}: an admin allows "
            "it (docs/updater.md)"
        )
    if kill_switch:
        return kill_switch
    if cluster.updates_paused:
        return f"updates of cluster {cluster.name} are paused"
    if settings.UPDATER_DRY_RUN:
        return "dry run (VPAWEB_UPDATER_DRY_RUN): changes are proposed, never applied"
    return None


@dataclass(frozen=True)
class SafetyState:
    """The switches that stop cluster writes, as every page's header shows them."""

    kill_switch: str | None  # why every write is stopped, or None
    paused_clusters: tuple[str, ...]  # enabled clusters whose updates are paused
    dry_run: bool  # VPAWEB_UPDATER_DRY_RUN: proposals only, everywhere

    @property
    def is_restricted(self) -> bool:
        """True when some cluster write the updater would make is held back."""
        return bool(self.kill_switch or self.paused_clusters or self.dry_run)


def safety_state() -> SafetyState:
    """The kill switch, the paused clusters and dry run, read now in one query (every
    page's header reads it): the paused clusters' names and the ActuationControl row,
    as one UNION ALL."""
    # No ORDER BY inside a compound statement (SQLite refuses it): sorted below.
    paused = Cluster.objects.filter(is_enabled=True, updates_paused=True).order_by()
    paused = paused.values_list(
        "name", Value(False, output_field=BooleanField()), Value("")
    )
    switch = ActuationControl.objects.order_by().values_list(
        Value(""), "writes_stopped", "reason"
    )
    row: ActuationControl | None = None
    names: list[str] = []
    # (the stubs type a union of value lists as the first model's rows)
    rows = cast(Iterable[tuple[str, bool, str]], paused.union(switch, all=True))
    for name, writes_stopped, reason in rows:
        if name:
            names.append(name)
        elif row is None:
            row = ActuationControl(writes_stopped=writes_stopped, reason=reason)
    return SafetyState(
        kill_switch=kill_switch_reason(row),
        paused_clusters=tuple(sorted(names)),
        dry_run=bool(settings.UPDATER_DRY_RUN),
    )


def acting_q(workload_prefix: str = "") -> Q:
    """THE acting predicate as a filter, reached through ``workload_prefix``
    (``"workload__"`` from a ResizeChange): may the updater write for this workload
    now? The policy is vpaweb's and in an acting mode, the cluster's actuation is
    allowed, the cluster is not paused and no kill switch is on. Part of the
    compare-and-swap that moves a change to ``applying``, so a decision committed
    before it always wins."""
    if settings.UPDATER_KILL_SWITCH:
        return Q(pk__in=[])  # nothing acts
    return (
        updater_policy_q(workload_prefix)
        & Q(
            **{
                f"{workload_prefix}cluster__actuation_allowed": True,
                f"{workload_prefix}cluster__updates_paused": False,
            }
        )
        & ~Q(Exists(ActuationControl.objects.filter(writes_stopped=True)))
    )


def set_kill_switch(
    *, stopped: bool, actor: User | None, now: datetime, reason: str = ""
) -> ActuationControl:
    """Stop (or allow again) every cluster write; audited."""
    with transaction.atomic():
        control = ActuationControl.objects.select_for_update().first()
        if control is None:
            control = ActuationControl()
        before = control.writes_stopped
        control.writes_stopped = stopped
        control.reason = reason.strip()
        control.updated_at = now
        control.updated_by = actor
        control.save()
        label = actor_label_of(actor)
        record_audit(
            now=now,
            actor=actor,
            actor_label=label,
            action=KILL_SWITCH_ACTION,
            object_type="actuation_control",
            object_id=control.pk,
            before={"writes_stopped": before},
            after={"writes_stopped": stopped},
            message=f"{label} {'stopped' if stopped else 'allowed'} all cluster writes"
            + (f": {control.reason}" if control.reason else ""),
        )
    # The webhook leaves new pods alone while it is on: its processes reload now.
    mark_admission_data_changed()
    return control


def _set_cluster_flag(
    cluster: Cluster,
    *,
    flag: str,
    value: bool,
    action: Action,
    verb: str,
    actor: User | None,
    now: datetime,
    also: dict[str, Any] | None = None,
) -> Cluster:
    """Set one boolean of the cluster (and the ``also`` fields) in one update, with
    one audit event ``<actor> <verb> ... cluster <name>``."""
    with transaction.atomic():
        before = Cluster.objects.filter(pk=cluster.pk).values_list(flag, flat=True)[0]
        changes = {flag: value, **(also or {})}
        Cluster.objects.filter(pk=cluster.pk).update(**changes)
        for name, changed in changes.items():
            setattr(cluster, name, changed)
        label = actor_label_of(actor)
        record_audit(
            now=now,
            actor=actor,
            actor_label=label,
            action=action,
            object_type="cluster",
            object_id=cluster.pk,
            before={flag: before},
            after={flag: value},
            message=f"{label} {verb} cluster {cluster.name}",
        )
    return cluster


def set_cluster_paused(
    *, cluster: Cluster, paused: bool, actor: User | None, now: datetime
) -> Cluster:
    """Pause (or resume) the updater's writes to one cluster; audited."""
    return _set_cluster_flag(
        cluster,
        flag="updates_paused",
        value=paused,
        action=PAUSE_ACTION,
        verb=f"{'paused' if paused else 'resumed'} updates of",
        actor=actor,
        now=now,
    )


def set_actuation_allowed(
    *, cluster: Cluster, allowed: bool, actor: User | None, now: datetime
) -> Cluster:
    """Allow (or forbid) every write vpaweb makes to one cluster; audited. Allowing
    it asks the cluster's permissions again at the next updater cycle."""
    return _set_cluster_flag(
        cluster,
        flag="actuation_allowed",
        value=allowed,
        action=ACTUATION_ACTION,
        verb=f"{'allowed' if allowed else 'forbade'} writes to",
        actor=actor,
        now=now,
        # Forget what was known: permissions are asked again, stopped paths retried.
        also={"write_permissions": {}, "write_backoff": {}},
    )


def acquire_lock(
    *, cluster_id: int, holder: str, now: datetime, ttl_s: float | None = None
) -> bool:
    """Take or renew the cluster's updater lease; False when another holds it."""
    ttl = timedelta(seconds=ttl_s if ttl_s is not None else lock_ttl_s())
    if not UpdaterLock.objects.filter(cluster_id=cluster_id).exists():
        try:
            with transaction.atomic():
                UpdaterLock.objects.create(cluster_id=cluster_id)
        except IntegrityError:
            pass  # another worker created it first: compete below
    free = Q(holder="") | Q(expires_at__isnull=True) | Q(expires_at__lte=now)
    renewed = UpdaterLock.objects.filter(cluster_id=cluster_id, holder=holder).update(
        expires_at=now + ttl
    )
    if renewed:
        return True
    before = (
        UpdaterLock.objects.filter(cluster_id=cluster_id)
        .values_list("holder", "expires_at")
        .first()
    )
    previous, expired_at = before or ("", None)
    if previous and holder_is_gone(previous):
        free |= Q(holder=previous)  # its process is gone: no need to wait
    taken = (
        UpdaterLock.objects.filter(cluster_id=cluster_id)
        .filter(free)
        .update(holder=holder, acquired_at=now, expires_at=now + ttl)
    )
    if taken == 1 and previous:
        logger.warning(
            "cluster %s: updater lease taken over by %s from %s (%s)",
            cluster_id,
            holder,
            previous,
            "its process is gone"
            if expired_at is None or expired_at > now
            else f"expired at {expired_at.isoformat()}",
        )
    return taken == 1


def release_lock(*, cluster_id: int, holder: str, now: datetime) -> None:
    """Give the lease up (only its holder can); free since ``now``."""
    UpdaterLock.objects.filter(cluster_id=cluster_id, holder=holder).update(
        holder="", expires_at=now
    )


def release_locks(*, holder: str = PROCESS_IDENTITY, now: datetime) -> int:
    """Give up every lease ``holder`` has (a graceful stop); returns how many."""
    released = UpdaterLock.objects.filter(holder=holder).update(
        holder="", expires_at=now
    )
    if released:
        logger.info("released %d updater lease(s) held by %s", released, holder)
    return released


def leaderless_clusters(*, now: datetime) -> list[tuple[str, datetime]]:
    """(cluster name, since when) of every enabled cluster whose actuation is allowed
    and whose updater lease nobody holds now: released, or expired after a crash
    (one query; a cluster whose updater never ran is left out)."""
    rows = (
        UpdaterLock.objects.filter(
            cluster__is_enabled=True,
            cluster__actuation_allowed=True,
            expires_at__isnull=False,
            expires_at__lte=now,
        )
        .order_by("cluster__name")
        .values_list("cluster__name", "expires_at")
    )
    return [(name, since) for name, since in rows if since is not None]
