"""What the admission webhook needs to know, loaded once, looked up once per pod.

The webhook must answer in milliseconds and must not depend on the database being up at
the moment a pod is created. So it never queries the database on its hot path: an
``AdmissionSnapshot`` holds, for one cluster, every active workload keyed by
``(namespace, kind, name)`` with its mode, whether vpaweb may act on it, its container
policies and the latest recommendation of each container, plus the namespaces'
LimitRanges. One dict lookup per pod finds everything; the capping itself runs on the
pod as received (``decision.py``)."""
# ``SnapshotHolder`` keeps the current snapshot of a cluster in the process. It is
# reloaded after each refresh cycle and policy change (``generation.py``) and every
# ``WEBHOOK_RELOAD_S`` regardless. A snapshot older than ``WEBHOOK_MAX_SNAPSHOT_AGE_S``
# (the database unreachable that long) is not used: pods are admitted unchanged.

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from recommender.cluster.base import WorkloadKey
from recommender.engine.capping import LimitRangeItem
from recommender.models import Cluster, Policy, Workload
from recommender.services.advice.advise import AdviceInputs, load_advice_inputs
from recommender.services.advice.limits import item_from_dict
from recommender.services.readmodels.generation import shared_generation

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkloadEntry:
    """One workload as the webhook sees it."""

    workload_id: int
    namespace: str
    kind: str
    name: str
    mode: str  # Policy.Mode value (Off when the workload has no policy row)
    is_actionable: bool
    why_not: str  # why vpaweb does not act on it ("" when it does)
    last_seen_at: datetime
    inputs: AdviceInputs | None = None  # for actionable workloads only

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    @classmethod
    def of(cls, workload: Workload, policy: Policy | None) -> WorkloadEntry:
        """The entry of ``workload`` (its policy as loaded), without advice inputs."""
        ok, why_not = policy_is_actionable(policy)
        return cls(
            workload_id=workload.pk,
            namespace=workload.namespace,
            kind=workload.kind,
            name=workload.name,
            mode=policy.mode if policy is not None else Policy.Mode.OFF,
            is_actionable=ok,
            why_not=why_not,
            last_seen_at=workload.last_seen_at,
        )


@dataclass(frozen=True)
class AdmissionSnapshot:
    """Everything the webhook reads for one cluster, as of ``loaded_at``."""

    cluster_name: str
    loaded_at: datetime
    workloads: Mapping[WorkloadKey, WorkloadEntry]
    # namespace -> (combined Container item, combined Pod item)
    limit_ranges: Mapping[str, tuple[LimitRangeItem | None, LimitRangeItem | None]]
    load_seconds: float = 0.0


def policy_is_actionable(policy: Policy | None) -> tuple[bool, str]:
    """``Policy.is_actionable`` (the one actuation predicate), and why not in words."""
    if policy is not None and policy.is_actionable:
        return True, ""
    if policy is not None and policy.is_mirrored:
        return False, (
            f"its policy mirrors an upstream {policy.managed_by} (its own admission "
            "controller acts on it, not vpaweb)"
        )
    return False, "its mode is Off"


def _judged(policy: list[Any] | None) -> tuple[str, bool, str]:
    """(mode, actionable, why not) of a policy's (mode, source, vpa_object,
    vpa_object_mode), or of a workload without a policy (None): ``WorkloadEntry.of``'s
    answer, from columns."""
    row = (
        None
        if policy is None
        else Policy(
            mode=policy[0],
            source=policy[1],
            vpa_object=policy[2],
            vpa_object_mode=policy[3],
        )
    )
    ok, why_not = policy_is_actionable(row)
    return (row.mode if row is not None else Policy.Mode.OFF), ok, why_not


def load_snapshot(*, cluster: Cluster) -> AdmissionSnapshot:
    """Read one cluster's webhook inputs from the database (a constant number of
    queries)."""
    started = time.perf_counter()
    workloads: dict[WorkloadKey, WorkloadEntry] = {}
    actionable: dict[int, WorkloadEntry] = {}
    # Tuples, not model objects (a refresh reloads this every cycle: at 100,000
    # containers whole rows cost seconds); the policy is judged once per distinct
    # (mode, source, VPA object) by the one predicate, on an unsaved Policy.
    rows = Workload.objects.filter(cluster=cluster, is_active=True).values_list(
        "pk",
        "namespace",
        "kind",
        "name",
        "last_seen_at",
        "policy__pk",
        "policy__mode",
        "policy__source",
        "policy__vpa_object",
        "policy__vpa_object_mode",
    )
    limit_rows = cluster.limit_ranges.all()
    judged: dict[tuple[Any, ...], tuple[str, bool, str]] = {}
    for pk, namespace, kind, name, last_seen_at, policy_pk, *policy in rows.iterator(
        chunk_size=2000
    ):
        key = (policy_pk is None, *policy)
        if key not in judged:
            judged[key] = _judged(None if policy_pk is None else policy)
        mode, ok, why_not = judged[key]
        entry = WorkloadEntry(
            workload_id=pk,
            namespace=namespace,
            kind=kind,
            name=name,
            mode=mode,
            is_actionable=ok,
            why_not=why_not,
            last_seen_at=last_seen_at,
        )
        workloads[(namespace, kind, name)] = entry
        if entry.is_actionable:
            actionable[pk] = entry
    # The advice inputs (policies, latest recommendations, LimitRanges) of the
    # workloads the webhook patches, read the one way advice reads them. The static
    # coefficient is dropped: the webhook leaves a container without a
    # recommendation as it is.
    inputs = load_advice_inputs(
        cluster_id=cluster.pk,
        keys=[(e.namespace, e.kind, e.name) for e in actionable.values()],
    )
    for entry in actionable.values():
        key = (entry.namespace, entry.kind, entry.name)
        workloads[key] = replace(entry, inputs=replace(inputs[key], coefficient=None))
    limit_ranges = {
        row.namespace: (
            item_from_dict(row.container_item),
            item_from_dict(row.pod_item),
        )
        for row in limit_rows
    }
    return AdmissionSnapshot(
        cluster_name=cluster.name,
        loaded_at=timezone.now(),
        workloads=workloads,
        limit_ranges=limit_ranges,
        load_seconds=time.perf_counter() - started,
    )


class SnapshotHolder:
    """The current snapshot of one cluster in this process (thread-safe)."""

    def __init__(self, cluster_name: str) -> None:
        self.cluster_name = cluster_name
        self._snapshot: AdmissionSnapshot | None = None
        self._generation: tuple[int, int | None] | None = None
        self._stale = True
        self._lock = threading.Lock()
        self.last_error = ""

    def current(self) -> AdmissionSnapshot | None:
        """The snapshot as loaded (None before the first successful load)."""
        return self._snapshot

    def invalidate(self) -> None:
        """Reload on the next ``refresh_if_needed``."""
        self._stale = True

    def refresh(self) -> AdmissionSnapshot:
        """Load now from the database; on failure keep the previous snapshot."""
        with self._lock:
            generation = shared_generation()
            cluster = Cluster.objects.get(name=self.cluster_name)
            snapshot = load_snapshot(cluster=cluster)
            self._snapshot, self._generation, self._stale = snapshot, generation, False
            self.last_error = ""
            logger.info(
                "admission cache of cluster %s loaded: %d workloads (%d actionable) "
                "in %.3f s",
                self.cluster_name,
                len(snapshot.workloads),
                sum(1 for e in snapshot.workloads.values() if e.is_actionable),
                snapshot.load_seconds,
            )
            return snapshot

    def refresh_if_needed(self) -> None:
        """Reload when invalidated, when the generation moved, or when due."""
        snapshot = self._snapshot
        due = (
            snapshot is None
            or self._stale
            or (timezone.now() - snapshot.loaded_at).total_seconds()
            >= settings.WEBHOOK_RELOAD_S
        )
        try:
            if not due and shared_generation() == self._generation:
                return
            self.refresh()
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            if error == self.last_error:
                return  # retried every second: logged once per new error
            self.last_error = error
            logger.warning(
                "admission cache of cluster %s not reloaded: %s",
                self.cluster_name,
                self.last_error,
            )


_HOLDERS: dict[str, SnapshotHolder] = {}
_HOLDERS_LOCK = threading.Lock()


def holder_for(cluster_name: str) -> SnapshotHolder:
    """The process-wide holder of one cluster's snapshot."""
    with _HOLDERS_LOCK:
        holder = _HOLDERS.get(cluster_name)
        if holder is None:
            holder = _HOLDERS[cluster_name] = SnapshotHolder(cluster_name)
        return holder


def forget_holders() -> None:
    """Drop every holder (tests)."""
    with _HOLDERS_LOCK:
        _HOLDERS.clear()
