"""The updater's decisions, as upstream VPA's updater makes them (``pkg/updater/``).

Pure functions over pods (``PodInfo``) and capped recommendations: no database, no
cluster. ``proposals.py`` loads what they need and writes what they decide."""
# - ``pod_priority``: ``resourceDiff``, scale-up, outside-the-bounds and quick OOM
#   (upstream ``pkg/updater/priority/update_priority_calculator.go``,
#   ``priority_processor.go``);
# - ``admit``: the 12 h lifetime threshold, the 0.1 minimum change and the quick-OOM
#   rule;
# - ``eviction_requirements_pass``: ``updatePolicy.evictionRequirements``;
# - ``ReplicaGroup``: replica groups, ``minReplicas`` and the eviction tolerance
#   (``pkg/updater/restriction/pods_restriction_factory.go``);
# - ``in_place_progress``: following a resize's conditions and upstream's fallbacks to
#   eviction (``pkg/updater/restriction/pods_inplace_restriction.go``);
# - ``limit_range_refusals``: what LimitRanger would refuse in the changed pod.

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from recommender.cluster.base import PodInfo
from recommender.engine.capping import CappedRecommendation, LimitRangeItem
from recommender.engine.limit_ranger import (
    APP,
    INIT,
    SIDECAR,
    LimitedContainer,
    limit_ranger_problems,
)
from recommender.engine.quantity import humanize_cpu, humanize_memory
from recommender.engine.resources import CPU, MEMORY, RESOURCE_NAMES, Resources
from recommender.engine.update_band import MIN_CHANGE

OBSERVED_ANNOTATION = "vpaObservedContainers"
OOM_KILLED = "OOMKilled"
RESIZE_PENDING = "PodResizePending"
RESIZE_IN_PROGRESS = "PodResizeInProgress"
# Upstream's direct owners with a replica count (restriction/pods_restriction_factory).
REPLICATED_OWNERS = ("ReplicationController", "ReplicaSet", "StatefulSet")


@dataclass(frozen=True)
class UpdaterConfig:
    """Upstream's updater flags (``pkg/updater/config/config.go``) and the in-place
    timeouts (``pkg/updater/restriction/pods_inplace_restriction.go``)."""

    min_replicas: int = 2
    eviction_tolerance: float = 0.5
    evict_after_oom_s: float = 600.0
    lifetime_s: float = 12 * 3600.0
    min_change: float = MIN_CHANGE
    deferred_timeout_s: float = 300.0
    in_progress_timeout_s: float = 3600.0


@dataclass(frozen=True)
class PodPriority:
    """How much a pod needs an update (upstream's ``PodPriority``)."""

    outside_range: bool = False
    scale_up: bool = False
    resource_diff: float = 0.0
    quick_oom: bool = False
    # (container, resource, "below"|"above", request, bound) for each bound crossed.
    crossings: tuple[tuple[str, str, str, int | None, int | None], ...] = ()
    oom_containers: tuple[tuple[str, float], ...] = ()  # (container, seconds alive)

    def sort_key(self) -> tuple[bool, float]:
        """Scale-ups first, then the larger difference (``PodPriority.Less``)."""
        return (not self.scale_up, -self.resource_diff)

    @property
    def rank(self) -> float:
        """One number with the same order: scale-ups rank above 1,000,000."""
        return self.resource_diff + (1_000_000.0 if self.scale_up else 0.0)


def observed_containers(pod: PodInfo) -> set[str] | None:
    """Names from ``vpaObservedContainers``; None (every container) when absent."""
    raw = pod.annotations.get(OBSERVED_ANNOTATION)
    if raw is None:
        return None
    names = {part.strip() for part in raw.split(",") if part.strip()}
    return names or None


def pod_priority(
    pod: PodInfo,
    capped: Mapping[str, CappedRecommendation],
    *,
    now: datetime,
    evict_after_oom_s: float,
    off_containers: frozenset[str] = frozenset(),
) -> PodPriority:
    """``GetUpdatePriority`` for one pod and its capped recommendations."""
    observed = observed_containers(pod)
    total_rec = {r: 0 for r in RESOURCE_NAMES}
    total_req = {r: 0 for r in RESOURCE_NAMES}
    scale_up = outside = False
    crossings: list[tuple[str, str, str, int | None, int | None]] = []
    requests = {c.name: c.requests for c in pod.containers}
    for name, rec in capped.items():
        if name not in requests or (observed is not None and name not in observed):
            continue
        req = requests[name]
        for resource in RESOURCE_NAMES:
            target = rec.target.get(resource)
            if target is None:
                continue
            total_rec[resource] += target
            have = req.get(resource)
            if have is None:
                scale_up = outside = True
                crossings.append((name, resource, "missing", None, target))
                continue
            total_req[resource] += have
            if target > have:
                scale_up = True
            lower = rec.lower_bound.get(resource)
            upper = rec.upper_bound.get(resource)
            if lower is not None and have < lower:
                outside = True
                crossings.append((name, resource, "below", have, lower))
            elif upper is not None and have > upper:
                outside = True
                crossings.append((name, resource, "above", have, upper))
    diff = 0.0
    for resource in RESOURCE_NAMES:
        if total_rec[resource] == 0 and total_req[resource] == 0:
            continue
        base = max(total_req[resource], 1)
        diff += abs(base - total_rec[resource]) / base
    ooms: list[tuple[str, float]] = []
    for term in pod.last_terminations:
        if term.container in off_containers:
            continue
        if observed is not None and term.container not in observed:
            continue
        if term.reason != OOM_KILLED or term.started_at is None:
            continue
        if term.finished_at is None:
            continue
        alive = (term.finished_at - term.started_at).total_seconds()
        if alive < evict_after_oom_s:
            ooms.append((term.container, alive))
    return PodPriority(
        outside_range=outside,
        scale_up=scale_up,
        resource_diff=diff,
        quick_oom=bool(ooms),
        crossings=tuple(crossings),
        oom_containers=tuple(ooms),
    )


def admit(
    priority: PodPriority, pod: PodInfo, *, now: datetime, config: UpdaterConfig
) -> bool:
    """Whether the pod joins the update list (upstream's
    ``UpdatePriorityCalculator.AddPod``)."""
    if not priority.outside_range and not priority.quick_oom:
        if pod.start_time is None:
            return False
        if (now - pod.start_time).total_seconds() < config.lifetime_s:
            return False
        return priority.resource_diff >= config.min_change
    return not (priority.quick_oom and priority.resource_diff == 0)


def _amount(resource: str, amount: int | None) -> str:
    if amount is None:
        return "none"
    return humanize_cpu(amount) if resource == CPU else humanize_memory(amount)


def describe(
    priority: PodPriority, pod: PodInfo, *, now: datetime, oom_kills: int = 0
) -> str:
    """The reason for a change, in words."""
    parts: list[str] = []
    for container, resource, where, have, bound in priority.crossings:
        label = "CPU" if resource == CPU else resource
        if where == "missing":
            parts.append(
                f"container {container} has no {label} request "
                f"(recommended {_amount(resource, bound)})"
            )
        else:
            side = "lower" if where == "below" else "upper"
            parts.append(
                f"{label} request {_amount(resource, have)} of container "
                f"{container} is {where} the {side} bound {_amount(resource, bound)}"
            )
    for container, alive in priority.oom_containers:
        parts.append(
            f"container {container} was OOM-killed {alive / 60:.0f} min after it "
            "started"
        )
    if not parts:
        age_h = (now - pod.start_time).total_seconds() / 3600 if pod.start_time else 0.0
        parts.append(
            f"requests differ from the recommendation by "
            f"{priority.resource_diff * 100:.0f} % and the pod has run {age_h:.0f} h"
        )
    text = "; ".join(parts)
    if oom_kills and not priority.oom_containers:
        text += f" after {oom_kills} OOM kill{'s' if oom_kills != 1 else ''}"
    return text[:1].upper() + text[1:]


def eviction_requirements_pass(
    requirements: Sequence[Mapping[str, Any]],
    pod: PodInfo,
    capped: Mapping[str, CappedRecommendation],
) -> bool:
    """``updatePolicy.evictionRequirements`` (nil or empty admits every pod)."""
    if not requirements:
        return True
    requests = {c.name: c.requests for c in pod.containers}
    for name, rec in capped.items():
        req = requests.get(name)
        if req is None:
            continue
        if req.cpu_millicores is None or req.memory_bytes is None:
            return True
        if all(_requirement_holds(r, rec.target, req) for r in requirements):
            return True
    return False


def _requirement_holds(
    requirement: Mapping[str, Any], target: Resources, request: Resources
) -> bool:
    change = requirement.get("changeRequirement")
    for resource in requirement.get("resources") or ():
        if resource not in (CPU, MEMORY):
            continue
        want, have = target.get(resource), request.get(resource)
        if want is None or have is None:
            continue
        if change == "TargetHigherThanRequests" and want > have:
            return True
        if change == "TargetLowerThanRequests" and want < have:
            return True
    return False


@dataclass
class ReplicaGroup:
    """Pods of one controller, and how many of them may be disrupted (upstream's
    ``pods_restriction_factory.go``)."""

    configured: int
    tolerance: int
    running: int
    pending: int
    below_min: bool = False
    evicted: int = 0
    in_place: int = 0
    members: list[str] = field(default_factory=list)
    # A PodDisruptionBudget refused an eviction in this group during this cycle.
    budget_refused: bool = False

    def disruptable(self) -> bool:
        """``isPodDisruptable``: the second clause always allows one disruption."""
        disrupted = self.evicted + self.in_place
        if self.running - disrupted > self.configured - self.tolerance:
            return True
        return (
            self.configured == self.running
            and self.tolerance == 0
            and self.evicted == 0
            and self.in_place == 0
        )

    def can_evict(self, pod: PodInfo) -> bool:
        """``CanEvict``: Pending pods always; a below-min group never."""
        if pod.phase == "Pending":
            return True
        if self.below_min:
            return False
        return self.disruptable()

    def record(self, pod: PodInfo, *, in_place: bool) -> None:
        """Count a successful disruption of ``pod`` in this cycle."""
        if in_place:
            self.in_place += 1
        elif pod.phase != "Pending":
            self.evicted += 1


def group_key(pod: PodInfo, workload_key: tuple[str, str]) -> tuple[str, str, str]:
    """Pods are grouped by their controller (the workload when the pod names none)."""
    if pod.owner_kind and pod.owner_name:
        return (pod.namespace, pod.owner_kind, pod.owner_name)
    return (pod.namespace, *workload_key)


def below_min_replicas(replicas: int | None, min_replicas: int) -> str | None:
    """Why the updater never disrupts a workload's pods, or None: fewer replicas than
    ``min_replicas`` (upstream leaves such a replica group out)."""
    if replicas is None or replicas >= min_replicas:
        return None
    noun = "replica" if replicas == 1 else "replicas"
    return (
        f"{replicas} {noun}: below min_replicas {min_replicas}; "
        "the updater never disrupts it"
    )


def unscheduled(pod: PodInfo) -> bool:
    """Not scheduled yet (``PodScheduled`` False): upstream's pod lister skips it."""
    return any(c.type == "PodScheduled" and c.status == "False" for c in pod.conditions)


def build_group(
    pods: Sequence[PodInfo],
    *,
    owner_kind: str,
    replicas: int | None,
    min_replicas: int,
    tolerance_fraction: float,
) -> ReplicaGroup | None:
    """One replica group, or None when upstream leaves it out (too few pods, or a
    replicated owner without replicas)."""
    live = [p for p in pods if not p.deleting]
    if len(live) < min_replicas:
        return None
    if owner_kind in REPLICATED_OWNERS or owner_kind in ("Deployment",):
        if not replicas:
            return None
        configured = replicas
    elif owner_kind in ("DaemonSet", "Job", "CronJob"):
        # DaemonSet: status.numberReady (taken as its running pods); Job: live pods.
        configured = (
            len(live)
            if owner_kind != "DaemonSet"
            else sum(1 for p in live if p.phase == "Running")
        )
        if configured == 0:
            return None
    else:
        configured = 0  # upstream's quirk: any other owner kind counts 0
    pending = sum(1 for p in live if p.phase == "Pending")
    return ReplicaGroup(
        configured=configured,
        tolerance=int(configured * tolerance_fraction),
        running=len(live) - pending,
        pending=pending,
        members=[p.name for p in live],
    )


@dataclass(frozen=True)
class InPlaceProgress:
    """What a resize's conditions say: ``wait``, ``evict`` or ``done`` (none)."""

    action: str
    reason: str = ""
    pending_deferred: bool = False
    in_progress: bool = False


def in_place_progress(
    pod: PodInfo,
    *,
    now: datetime,
    pending_since: datetime | None,
    in_progress_since: datetime | None,
    config: UpdaterConfig,
) -> InPlaceProgress:
    """Follow ``PodResizePending``/``PodResizeInProgress`` (upstream's fallbacks in
    ``pods_inplace_restriction.go``)."""
    for condition in pod.conditions:
        if condition.status != "True":
            continue
        if condition.type == RESIZE_PENDING:
            if condition.reason == "Infeasible":
                return InPlaceProgress(
                    "evict", f"the resize is Infeasible: {condition.message}".strip()
                )
            if condition.reason == "Deferred":
                since = pending_since or now
                waited = (now - since).total_seconds()
                if waited > config.deferred_timeout_s:
                    return InPlaceProgress(
                        "evict",
                        f"the resize has been Deferred for {waited / 60:.0f} min",
                        pending_deferred=True,
                    )
                return InPlaceProgress(
                    "wait", "the resize is Deferred", pending_deferred=True
                )
            return InPlaceProgress(
                "evict", f"unknown resize condition reason {condition.reason!r}"
            )
        if condition.type == RESIZE_IN_PROGRESS:
            if condition.reason == "Error":
                return InPlaceProgress(
                    "evict", f"the resize failed: {condition.message}".strip()
                )
            if condition.reason:
                return InPlaceProgress(
                    "evict", f"unknown resize condition reason {condition.reason!r}"
                )
            since = in_progress_since or now
            waited = (now - since).total_seconds()
            if waited > config.in_progress_timeout_s:
                return InPlaceProgress(
                    "evict",
                    f"the resize has been in progress for {waited / 60:.0f} min",
                    in_progress=True,
                )
            return InPlaceProgress(
                "wait", "the resize is in progress", in_progress=True
            )
    return InPlaceProgress("done")


def limit_range_refusals(
    pod: PodInfo,
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    ranges: tuple[LimitRangeItem | None, LimitRangeItem | None],
) -> list[str]:
    """What LimitRanger (which validates resizes too, and evictions' replacement pods
    at creation) would refuse in the pod changed to ``after`` that it admits as it is:
    the webhook's rules (``engine/limit_ranger.py``). ``before``/``after`` are
    ``{container: {"requests": {...}, "limits": {...}}}`` as ResizeChange stores them.
    """

    def containers(changed: Mapping[str, Any]) -> list[LimitedContainer]:
        found = []
        for c in pod.containers:
            requests, limits = c.requests, c.limits
            if c.name in changed:
                requests = Resources(**_amounts(changed[c.name]["requests"]))
                limits = Resources(**_amounts(changed[c.name]["limits"]))
            kind = {"init": INIT, "sidecar": SIDECAR}.get(c.kind, APP)
            found.append(LimitedContainer(c.name, kind, requests, limits))
        return found

    was = limit_ranger_problems(containers(before), *ranges)
    now = limit_ranger_problems(containers(after), *ranges)
    return [message for key, message in now.items() if key not in was]


def _amounts(stored: Mapping[str, int]) -> dict[str, int | None]:
    return {"cpu_millicores": stored.get(CPU), "memory_bytes": stored.get(MEMORY)}


# The first Kubernetes minor whose API server and kubelet take a memory-limit decrease
# in place (1.35, in-place resize GA; the kubelet lowers the limit only when usage is
# below it, best effort). Before it the API server refuses one, and upstream's updater
# never sends it: InPlaceOrRecreate evicts instead.
MEMORY_LIMIT_DECREASE_MINOR = 35
_VERSION = re.compile(r"^v?(\d+)\.(\d+)")


def lowers_memory_limit(
    before: Mapping[str, Any], after: Mapping[str, Any]
) -> list[str]:
    """The containers whose memory limit the change lowers (ResizeChange shapes)."""
    lowered = []
    for name, values in after.items():
        new = (values.get("limits") or {}).get("memory")
        old = ((before.get(name) or {}).get("limits") or {}).get("memory")
        if new is not None and old is not None and int(new) < int(old):
            lowered.append(name)
    return lowered


def memory_limit_decrease_refusal(server_version: str) -> str:
    """Why a server of ``server_version`` (``gitVersion``) cannot lower a memory
    limit in place, or "" when it can (1.35+). An unknown version cannot."""
    found = _VERSION.match(server_version or "")
    if found is None:
        return "the API server's version is unknown"
    major, minor = int(found.group(1)), int(found.group(2))
    if (major, minor) >= (1, MEMORY_LIMIT_DECREASE_MINOR):
        return ""
    return (
        f"Kubernetes {server_version} does not lower a memory limit in place "
        f"(1.{MEMORY_LIMIT_DECREASE_MINOR}+ does)"
    )
