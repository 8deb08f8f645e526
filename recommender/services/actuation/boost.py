"""The updater's half of the CPU startup boost: shrinking a boosted pod in place.

A pod carrying ``vpaweb.io/startup-boost`` (written by the webhook) is boosted while a
recorded container's CPU request is above the recorded one: no change is proposed for
it. Once its ``Ready`` condition has been True for the recorded duration, its boosted
containers are resized in place (``pods/<name>/resize`` through the one writer) to the
recorded request and limit, under the acting predicate and while the resize path is
allowed; never evicted (a refused shrink is retried next cycle), never a QoS change.
Each shrink is audited (``pod.unboost``) and counted (``vpaweb_startup_boosts_total``).
"""
# The spec shows a resize the API server took, the status what the kubelet runs; a
# shrink taken but not yet actuated still counts as boosted, so nothing is proposed
# against the boosted figures meanwhile (docs/updater.md "CPU startup boost").

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from recommender import metrics
from recommender.cluster.base import ContainerSpec, PodInfo
from recommender.cluster.writer import ClusterWriter, ContainerResize
from recommender.engine.quantity import format_cpu, parse_cpu_millicores
from recommender.engine.resources import Resources
from recommender.engine.startup_boost import BOOST_ANNOTATION
from recommender.models import AuditEvent, Cluster, Workload
from recommender.services.access.audit import record_audit
from recommender.services.actuation import control, permissions


class UpdaterContext(Protocol):
    """What this module reads of the updater's cycle (proposals.UpdaterContext,
    which imports this module)."""

    @property
    def cluster(self) -> Cluster: ...
    @property
    def now(self) -> datetime: ...
    @property
    def pods(self) -> Mapping[int, list[PodInfo]]: ...
    @property
    def by_id(self) -> Mapping[int, Workload]: ...


logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PodBoost:
    """A pod still boosted: the containers to shrink and when the boost ends (None
    while the pod is not Ready); no containers while a shrink is being actuated."""

    containers: tuple[ContainerResize, ...]
    ends_at: datetime | None


def _cpu(amounts: Any) -> int | None:
    if not isinstance(amounts, dict) or not isinstance(amounts.get("cpu"), str):
        return None
    try:
        return parse_cpu_millicores(amounts["cpu"])
    except ValueError:
        return None


def pod_boost(pod: PodInfo) -> PodBoost | None:
    """The pod's boost while it lasts; None when the pod was never boosted or is
    already back at its recorded requests (or the annotation is unreadable)."""
    text = pod.annotations.get(BOOST_ANNOTATION)
    if not text:
        return None
    try:
        recorded = json.loads(text)
        duration_s = int(recorded["duration_s"])
        containers = recorded["containers"]
    except (ValueError, TypeError, KeyError):
        return None
    if not isinstance(containers, dict):
        return None
    # The spec shows a resize the API server took; the status (``containers``) what
    # the kubelet runs: a shrink taken but not yet actuated is still a boost, so no
    # change is proposed against the boosted figures meanwhile.
    spec = {c.name: c for c in (pod.spec_containers or pod.containers)}
    running = {c.name: c for c in pod.containers}
    resizes = []
    shrinking = False
    for name, amounts in sorted(containers.items()):
        if not isinstance(amounts, dict):
            continue
        request = _cpu(amounts.get("requests"))
        if request is None or name not in spec:
            continue
        if (spec[name].requests.cpu_millicores or 0) <= request:
            runs = running.get(name)
            if runs is not None and (runs.requests.cpu_millicores or 0) > request:
                shrinking = True
            continue
        limit = _cpu(amounts.get("limits"))
        resizes.append(
            ContainerResize(
                name=name,
                requests=Resources(cpu_millicores=request),
                limits=Resources(cpu_millicores=limit)
                if limit is not None
                else Resources(),
            )
        )
    if not resizes:
        return PodBoost(containers=(), ends_at=None) if shrinking else None
    ready = next(
        (c for c in pod.conditions if c.type == "Ready" and c.status == "True"), None
    )
    ready_since = None if ready is None else ready.last_transition
    if not pod.conditions and pod.phase == "Running":
        # An adapter that reports no conditions (the simulated cluster): Running
        # since its start is the only readiness it has.
        ready_since = pod.start_time
    ends_at = (
        None if ready_since is None else ready_since + timedelta(seconds=duration_s)
    )
    return PodBoost(containers=tuple(resizes), ends_at=ends_at)


def requests_as_admitted(
    pod: PodInfo, containers: tuple[ContainerSpec, ...]
) -> dict[str, dict[str, int]]:
    """Each container's requests (``Resources.to_dict``), a boosted container's CPU as
    recorded before its boost: what a change's verification compares, so a replacement
    the webhook boosted still carries the change's requests."""
    have = {c.name: c.requests.to_dict() for c in containers}
    text = pod.annotations.get(BOOST_ANNOTATION)
    if not text:
        return have
    try:
        recorded = json.loads(text)["containers"]
    except (ValueError, TypeError, KeyError):
        return have
    if not isinstance(recorded, dict):
        return have
    for name, amounts in recorded.items():
        request = _cpu(amounts.get("requests")) if isinstance(amounts, dict) else None
        current = have.get(name)
        if (
            request is not None
            and current is not None
            and current.get("cpu", 0) >= request
        ):
            current["cpu"] = request
    return have


def is_boosted(pod: PodInfo) -> bool:
    """True while the pod carries a startup boost not yet shrunk."""
    return pod_boost(pod) is not None


def describe(containers: tuple[ContainerResize, ...]) -> str:
    """``app cpu 250m`` (limit 500m) per container."""
    parts = []
    for c in containers:
        text = f"{c.name} cpu {format_cpu(c.requests.cpu_millicores or 0)}"
        if c.limits.cpu_millicores is not None:
            text += f" (limit {format_cpu(c.limits.cpu_millicores)})"
        parts.append(text)
    return ", ".join(parts)


def unboost_pods(
    context: UpdaterContext, writer: ClusterWriter
) -> tuple[set[str], int]:
    """Shrink every boosted pod whose boost has ended: the pods shrunk (names) and
    how many shrinks the API server refused."""
    cluster, now = context.cluster, context.now
    shrunk: set[str] = set()  # "namespace/name"
    refused = 0
    for workload_id, pods in context.pods.items():
        for pod in pods:
            boost = pod_boost(pod)
            if (
                boost is None
                or not boost.containers
                or boost.ends_at is None
                or now < boost.ends_at
            ):
                continue
            if permissions.path_block_reason(cluster, permissions.RESIZE, now=now):
                return shrunk, refused
            # The acting predicate read now: Off or a pause committed since the
            # cycle loaded its workloads wins.
            if not Workload.objects.filter(pk=workload_id).filter(control.acting_q()):
                continue
            result = writer.resize_pod(
                namespace=pod.namespace, name=pod.name, containers=boost.containers
            )
            permissions.record_write_result(
                cluster, permissions.RESIZE, result, now=now
            )
            if not result.ok:
                refused += 1
                logger.warning(
                    "startup boost of pod %s/%s not shrunk (HTTP %s %s): retried "
                    "next cycle",
                    pod.namespace,
                    pod.name,
                    result.status,
                    result.reason,
                )
                continue
            shrunk.add(f"{pod.namespace}/{pod.name}")
            metrics.STARTUP_BOOSTS.labels(event="unboosted").inc()
            message = (
                f"startup boost of pod {pod.namespace}/{pod.name} ended: shrunk in "
                f"place to {describe(boost.containers)}"
            )
            logger.info("%s (workload %s)", message, workload_id)
            record_audit(
                action=AuditEvent.Action.POD_UNBOOST,
                message=message,
                now=now,
                actor_label="updater",
                workload=context.by_id.get(workload_id),
                object_type="pod",
                object_id=pod.name[:64],
            )
    return shrunk, refused


def record_boosted_pods(
    context: UpdaterContext, *, shrunk: Collection[str] = ()
) -> int:
    """Store each workload's still-boosted pods (``Workload.startup_boosted_pods``)
    where they changed, for the workload page; the number of rows written."""
    seen: dict[int, list[dict[str, Any]]] = {}
    for workload_id, pods in context.pods.items():
        seen[workload_id] = []
        for pod in sorted(pods, key=lambda p: p.name):
            boost = pod_boost(pod)
            if (
                boost is None
                or not boost.containers
                or f"{pod.namespace}/{pod.name}" in shrunk
            ):
                continue
            until = None if boost.ends_at is None else boost.ends_at.isoformat()
            seen[workload_id].append({"pod": pod.name, "until": until})
    # One read of what is stored; a write only where it changed.
    stored = dict(
        Workload.objects.filter(cluster=context.cluster, is_active=True).values_list(
            "pk", "startup_boosted_pods"
        )
    )
    written = 0
    for workload_id, before in stored.items():
        after = seen.get(workload_id, [])
        if before != after:
            Workload.objects.filter(pk=workload_id).update(startup_boosted_pods=after)
            written += 1
    return written
