"""Applying approved changes, following them, and verifying them; one updater cycle."""
# A cycle (``run_cycle``) for one cluster:
#
# 1. discover the cluster (pods with their current requests and conditions);
# 2. **follow** changes being applied: an in-place resize is verified when the pod's
#    containers carry the new requests, waits while ``PodResizePending``/``Deferred`` (5
#    min) or ``PodResizeInProgress`` (1 h) last, and falls back to eviction as upstream
#    does (Infeasible, Deferred too long, in progress too long, Error); an eviction is
#    verified when a replacement pod carries the new requests, failed when it carries
#    something else or nothing appears in ``VPAWEB_UPDATER_VERIFY_TIMEOUT_S``, and
#    reverted once when the replacement cannot be scheduled (``revert.py``: its
#    eviction comes after the apply step, with the writer);
# 3. **propose** (``proposals.propose``);
# 4. **apply** approved changes, highest priority first, unless writes are blocked
#    (actuation not allowed, kill switch, paused cluster, dry run:
#    ``control.write_block_reason``); each write path (resize, eviction, events, VPA
#    status) only while the cluster's permissions allow it and no 403 stopped it
#    (``permissions.py``, asked by SelfSubjectAccessReview at the first cycle), and each
#    change only inside its policy's and cluster's maintenance windows (``windows.py``):
#    replica groups, ``minReplicas`` and the eviction tolerance decide which pods may be
#    disrupted this cycle, the per-cluster rate limits cap the writes; a workload's
#    changes wait until every live webhook process has loaded its policy
#    (``readmodels/webhook_acks.py``: the handshake); an in-place
#    resize patches ``pods/<name>/resize`` and falls back to eviction when refused; an
#    eviction goes through the Eviction API, where a 429 (a PodDisruptionBudget) is "try
#    later"; each action leaves an Event on the pod;
# 5. write vpaweb's recommendation into the ``status`` of every VerticalPodAutoscaler
#    whose ``spec.recommenders`` names vpaweb, when it changed (``vpa_status.py``, the
#    drop-in path), under the same switches as the apply step.

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from recommender.cluster.base import ClusterSnapshot, PodInfo
from recommender.cluster.writer import ClusterWriter, ContainerResize, WriteResult
from recommender.engine.resources import Resources
from recommender.models import Cluster, Policy, ResizeChange
from recommender.services.actuation import (
    boost,
    control,
    decision,
    hpa_coordination,
    permissions,
    proposals,
    revert,
    vpa_status,
    workflow,
)
from recommender.services.advice.advise import resources_json
from recommender.services.connections import cluster_adapter_for, cluster_writer_for
from recommender.services.policy import windows
from recommender.services.readmodels import webhook_acks as acks

logger = logging.getLogger(__name__)

S = ResizeChange.Status
M = ResizeChange.Method
RESIZED_REASON = "ResizedInPlaceByVpaweb"
EVICTED_REASON = "EvictedByVpaweb"


@dataclass
class CycleReport:
    """What one updater cycle did (stored in the task result and logged)."""

    cluster: str
    pods: int = 0
    proposed: int = 0
    auto_approved: int = 0
    superseded: int = 0
    expired: int = 0
    held: int = 0  # not proposed again: an operator rejected the same resize
    infeasible: int = 0  # not proposed again: InPlace found the same resize infeasible
    resized: int = 0
    evicted: int = 0
    try_later: int = 0
    waiting: int = 0
    waiting_for_webhook: int = 0  # a webhook process has not loaded the policy yet
    fell_back: int = 0
    reverted: int = 0  # evictions whose replacement could not schedule: reverted
    recovered: int = 0  # left applying by a crash before any write: approved again
    outside_window: int = 0  # approved, waiting for a maintenance window
    failed: int = 0
    applied: int = 0
    unboosted: int = 0  # startup-boosted pods shrunk in place (boost.py)
    unboost_refused: int = 0
    writes: int = 0
    vpa_statuses: int = 0  # VPA objects naming vpaweb whose status was written
    vpa_status_failed: int = 0
    writes_blocked: str = ""
    not_leader: bool = False
    holder: str = ""  # the worker that ran (or tried to run) the cycle

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def _resources(data: dict[str, Any]) -> Resources:
    return Resources(cpu_millicores=data.get("cpu"), memory_bytes=data.get("memory"))


def observed_of(pod: PodInfo, names: list[str]) -> dict[str, Any]:
    """What the pod's named containers carry now, in ResizeChange's shape."""
    return {
        c.name: resources_json(c.requests, c.limits)
        for c in pod.containers
        if c.name in names
    }


def carries(pod: PodInfo, after: dict[str, Any], *, spec: bool = False) -> bool:
    """Whether the pod's containers request what the change asked for (with
    ``spec``, whether its spec asks for it: a resize the API server took)."""
    containers = pod.spec_containers if spec else pod.containers
    # A pod the webhook boosted counts with its CPU as admitted before the boost.
    have = boost.requests_as_admitted(pod, containers)
    for name, wanted in after.items():
        requests = wanted.get("requests") or {}
        current = have.get(name)
        if current is None:
            return False
        if any(current.get(r) != v for r, v in requests.items()):
            return False
    return True


def not_observed(pod: PodInfo, change: ResizeChange) -> str:
    """Why the kubelet has not acted on the change's resize yet ("" when it has, or
    when the pod or the answer carries no generation: an older kubelet): its
    ``status.observedGeneration`` is below the generation the resize's answer carried
    (k8s-wire kubelet/02: the resize bumps ``metadata.generation``)."""
    written, observed = change.written_generation, pod.observed_generation
    if written is None or observed is None or observed >= written:
        return ""
    return (
        f"the kubelet has not observed the resize yet (observedGeneration {observed}, "
        f"the resize is generation {written})"
    )


def for_this_resize(pod: PodInfo, change: ResizeChange) -> PodInfo:
    """The pod without the resize conditions the kubelet wrote for an older
    generation than the change's resize (each condition's ``observedGeneration``,
    k8s-wire kubelet/01-07): a Deferred or Infeasible left by an earlier resize says
    nothing of this one."""
    written = change.written_generation
    if written is None:
        return pod
    kept = tuple(
        c
        for c in pod.conditions
        if c.type not in (decision.RESIZE_PENDING, decision.RESIZE_IN_PROGRESS)
        or c.observed_generation is None
        or c.observed_generation >= written
    )
    return pod if len(kept) == len(pod.conditions) else replace(pod, conditions=kept)


def not_running(pod: PodInfo, names: list[str]) -> str | None:
    """Why the named containers are not all running and ready, or None. A pod
    whose adapter reports no container states at all counts as running only in
    phase Running (a Pending pod has no started container)."""
    if not pod.container_states:
        return None if pod.phase == "Running" else f"the pod is {pod.phase}"
    for name in names:
        state = pod.state_of(name)
        if state is None or not state.running:
            text = state.describe() if state is not None else "not started"
            return f"container {name} is {text}"
    return None


def written_state(pod: PodInfo, names: list[str]) -> dict[str, Any]:
    """The named containers' restart counts and IDs (``ResizeChange.written_state``)."""
    return {
        s.name: {"restarts": s.restart_count, "id": s.container_id}
        for s in pod.container_states
        if s.name in names
    }


def restarted(pod: PodInfo, change: ResizeChange) -> str | None:
    """Which container restarted (or was replaced) since the write, or None."""
    for name, then in (change.written_state or {}).items():
        state = pod.state_of(name)
        if state is None:
            continue
        if state.restart_count != then.get("restarts") or (
            then.get("id") and state.container_id != then["id"]
        ):
            return (
                f"container {name} restarted since the resize (restarts "
                f"{then.get('restarts')} -> {state.restart_count})"
            )
    return None


def unschedulable_for(pod: PodInfo, now: datetime) -> tuple[float, str] | None:
    """Seconds a Pending pod has been ``PodScheduled=False`` (Unschedulable), and the
    scheduler's message; None when it is not stuck that way."""
    if pod.phase != "Pending":
        return None
    for c in pod.conditions:
        if c.type == "PodScheduled" and c.status == "False":
            since = c.last_transition or pod.created_at or now
            return (now - since).total_seconds(), c.message or c.reason
    if not pod.node_name and not pod.conditions:
        # Pending and bound to no node, no scheduler's verdict yet (k8s-wire
        # eviction/15): counted from its creation.
        since = pod.created_at or now
        return (now - since).total_seconds(), "not bound to a node"
    return None


def _replacements(pods: list[PodInfo], change: ResizeChange) -> list[PodInfo]:
    since = change.applied_at or change.updated_at
    return [
        p
        for p in pods
        if p.uid != change.pod_uid
        and (
            p.name == change.pod
            or (p.created_at or p.start_time or since) >= since - timedelta(seconds=5)
        )
    ]


def _never_written(change: ResizeChange, pod: PodInfo | None) -> bool:
    """A crash's leftover: ``applying`` with no write answered (the process died
    between the two), and the pod shows none happened: still there, not being
    deleted, neither carrying the new requests nor asking for them in its spec (a
    resize the API server took before the process died, pending or in progress)."""
    return (
        change.written_at is None
        and pod is not None
        and not pod.deleting
        and not carries(pod, change.resources_after)
        and not (
            change.method == M.IN_PLACE
            and carries(pod, change.resources_after, spec=True)
        )
    )


def follow_applying(context: proposals.UpdaterContext, report: CycleReport) -> None:
    """Verify, wait on, or fall back from the changes being applied; send back to
    ``approved`` those a crashed process left ``applying`` without writing."""
    now = context.now
    timeout = timedelta(seconds=settings.UPDATER_VERIFY_TIMEOUT_S)
    for change in proposals.changes_needing(context, (S.APPLYING,)):
        pods = context.pods.get(change.workload_id, [])
        names = list(change.resources_after)
        pod = next(
            (p for p in pods if p.name == change.pod and p.uid == change.pod_uid), None
        )
        # Only the lease holder applies, and this cycle has not started any write
        # yet: an unwritten "applying" change is a previous process's leftover.
        if _never_written(change, pod) and workflow.try_transition(
            change,
            to=S.APPROVED,
            allowed_from=(S.APPLYING,),
            now=now,
            note="no write was recorded and the pod shows none (the updater "
            "stopped before writing): approved again",
        ):
            report.recovered += 1
            continue
        if change.reverted_at is not None:
            # Reverted (revert.py): its stuck replacement is evicted by the apply
            # step, once; past the verify timeout without that, it fails as it is.
            if now - change.reverted_at > timeout:
                error = f"{change.error} (not evicted in time: writes stopped)"
                if workflow.try_transition(
                    change,
                    to=S.FAILED,
                    allowed_from=(S.APPLYING,),
                    now=now,
                    note=error,
                    error=error,
                ):
                    report.failed += 1
            else:
                report.waiting += 1
            continue
        waiting_for = "the pod never showed the new requests"
        if change.method == M.IN_PLACE and pod is not None:
            # Only the kubelet's answer to this resize counts: its generation
            # observed, and the resize conditions written for it.
            pod = for_this_resize(pod, change)
            unseen = not_observed(pod, change)
            if unseen:
                waiting_for = unseen
            elif carries(pod, change.resources_after):
                # Listed in the status is not enough: the same container must run
                # with them (a kubelet can list a resize its container never got).
                problem = restarted(pod, change)
                if problem is not None:
                    _finish(
                        change,
                        S.FAILED,
                        now,
                        report,
                        observed_of(pod, names),
                        error=problem,
                    )
                    continue
                # Coordinated HPA mode: the HPA is read back too.
                waiting_for = not_running(pod, names) or hpa_differs(context, change)
                if not waiting_for:
                    _finish(change, S.APPLIED, now, report, observed_of(pod, names))
                    continue
            progress = decision.in_place_progress(
                pod,
                now=now,
                pending_since=change.resize_pending_since,
                in_progress_since=change.resize_in_progress_since,
                config=context.config,
            )
            if progress.action == "evict" and in_place_only(change):
                never_evicted(change, pod, progress, now, report)
                continue
            if progress.action == "evict" and change.hpa_changes:
                _finish(
                    change,
                    S.FAILED,
                    now,
                    report,
                    observed_of(pod, names),
                    error=f"{progress.reason}; {NO_EVICTION}",
                )
                continue
            if progress.action == "evict":
                if workflow.try_transition(
                    change,
                    to=S.APPROVED,
                    allowed_from=(S.APPLYING,),
                    now=now,
                    note=f"falling back to eviction: {progress.reason}",
                    method=M.EVICTION,
                    error=progress.reason,
                ):
                    report.fell_back += 1
                continue
            if progress.action == "wait":
                fields: dict[str, Any] = {}
                if progress.pending_deferred and change.resize_pending_since is None:
                    fields["resize_pending_since"] = now
                if progress.in_progress and change.resize_in_progress_since is None:
                    fields["resize_in_progress_since"] = now
                if fields:
                    ResizeChange.objects.filter(pk=change.pk).update(**fields)
                report.waiting += 1
                continue
        if pod is None and change.hpa_changes:
            # A coordinated change is never evicted: no replacement is its doing
            # (an HPA scaling in takes pods away, a new pod comes from the template).
            if workflow.try_transition(
                change,
                to=S.EXPIRED,
                allowed_from=(S.APPLYING,),
                now=now,
                note="the pod is gone",
            ):
                report.expired += 1
            continue
        if change.method == M.EVICTION or pod is None:
            found = [p for p in _replacements(pods, change) if not p.deleting]
            good = [p for p in found if carries(p, change.resources_after)]
            # Verified only when a replacement runs with the new requests.
            running = next((p for p in good if not not_running(p, names)), None)
            if running is not None:
                _finish(change, S.APPLIED, now, report, observed_of(running, names))
                continue
            stuck = [
                (p, found_for)
                for p in good
                if (found_for := unschedulable_for(p, now)) is not None
            ]
            if stuck and stuck[0][1][0] > settings.UPDATER_UNSCHEDULABLE_TIMEOUT_S:
                replacement, (seconds, message) = stuck[0]
                context.needs_operator.add(change.workload_id)
                ResizeChange.objects.filter(pk=change.pk).update(
                    observed=observed_of(replacement, names)
                )
                # Reverted to the previous requests, once (revert.py): the webhook
                # admits the workload's pods with them, the replacement is evicted.
                if revert.decide(
                    change,
                    replacement,
                    stuck=f"{workflow.UNSCHEDULABLE_ERROR}: {replacement.name} has "
                    f"been Pending for {seconds / 60:.0f} min: {message}",
                    now=now,
                ):
                    report.reverted += 1
                continue
            if good:
                waiting_for = f"replacement {good[0].name}: " + (
                    not_running(good[0], names) or ""
                )
            elif found:
                _finish(
                    change,
                    S.FAILED,
                    now,
                    report,
                    observed_of(found[0], names),
                    error=f"replacement pod {found[0].name} does not carry the new "
                    "requests",
                )
                continue
        if now - (change.applied_at or change.updated_at) > timeout:
            _finish(
                change,
                S.FAILED,
                now,
                report,
                observed_of(pod, names) if pod else {},
                error=f"not verified in time: {waiting_for}",
            )
        else:
            report.waiting += 1


def in_place_only(change: ResizeChange) -> bool:
    """Whether the change's workload is in InPlace mode: resized, never evicted."""
    return bool(change.workload.policy.mode == Policy.Mode.IN_PLACE)


# Why an InPlace change ends instead of falling back to eviction.
NEVER_EVICTS = "InPlace never evicts"


def never_evicted(
    change: ResizeChange,
    pod: PodInfo,
    progress: decision.InPlaceProgress,
    now: datetime,
    report: CycleReport,
) -> None:
    """What InPlace does where InPlaceOrRecreate evicts: an Infeasible resize fails
    and is remembered (not proposed again for this pod until the recommendation
    changes); a Deferred one is tried again later, with back-off; any other (an
    Error, in progress too long) fails."""
    names = list(change.resources_after)
    if progress.pending_deferred:
        if workflow.try_transition(
            change,
            to=S.APPROVED,
            allowed_from=(S.APPLYING,),
            now=now,
            note=f"{progress.reason}: tried again later, with back-off "
            f"({NEVER_EVICTS})",
            try_later_count=change.try_later_count + 1,
            # The back-off counts from here (``retry_due``).
            last_attempt_at=now,
            resize_pending_since=None,
            error=f"{progress.reason}; tried again with back-off",
        ):
            report.try_later += 1
        return
    if "Infeasible" in progress.reason:
        error = f"{workflow.INFEASIBLE_ERROR}: {progress.reason}; not sent again "
        error += "until the recommendation changes or the pod is replaced"
    else:
        error = f"{progress.reason}; {NEVER_EVICTS}"
    _finish(change, S.FAILED, now, report, observed_of(pod, names), error=error)


def retry_due(change: ResizeChange, *, now: datetime, deferred_s: float) -> bool:
    """Whether an InPlace change tried before (Deferred, or a 429) may be sent again:
    ``deferred_s`` after its last attempt, doubling with each, at most six hours."""
    if not change.try_later_count or change.last_attempt_at is None:
        return True
    tries = int(change.try_later_count)
    wait_s = min(deferred_s * 2.0 ** (tries - 1), 6 * 3600.0)
    return (now - change.last_attempt_at).total_seconds() >= wait_s


# Why a coordinated change is never evicted instead of resized.
NO_EVICTION = (
    "a coordinated HPA change is resized in place only, never evicted: the "
    "replacement would get its requests from the admission webhook, which leaves "
    "an HPA's resources as submitted"
)


def hpa_differs(context: proposals.UpdaterContext, change: ResizeChange) -> str:
    """What the HPA carries instead of the change's targets ("" when it carries
    them all), as this cycle's discovery read it back."""
    hpas = hpa_coordination.live_hpas(
        context.snapshot.horizontal_pod_autoscalers,
        change.workload.namespace,
        [e["hpa"] for e in change.hpa_changes or ()],
    )
    for entry in change.hpa_changes or ():
        live = hpa_coordination.live_target(hpas, entry)
        if live is None:
            return f"HPA {entry['hpa']} (its {entry['resource']} metric) is gone"
        if not hpa_coordination.same_target(entry["resource"], live, entry["after"]):
            return (
                f"HPA {entry['hpa']} carries {hpa_coordination.target_text(live)}, "
                f"not {hpa_coordination.target_text(entry['after'])}"
            )
    return ""


def _finish(
    change: ResizeChange,
    status: str,
    now: datetime,
    report: CycleReport,
    observed: dict[str, Any],
    *,
    error: str = "",
) -> None:
    fields: dict[str, Any] = {"observed": observed, "error": error}
    if status == S.APPLIED:
        fields["verified_at"] = now
        # What the realized savings count from now on (services/readmodels/realized).
        fields["requests_removed"] = requests_removed(
            change.resources_before, change.resources_after
        )
    if workflow.try_transition(
        change,
        to=status,
        allowed_from=(S.APPLYING,),
        now=now,
        note=error or "the pod carries the new requests",
        **fields,
    ):
        if status == S.APPLIED:
            report.applied += 1
        else:
            report.failed += 1


def requests_removed(before: dict[str, Any], after: dict[str, Any]) -> dict[str, int]:
    """The requests a change removes from its pod, summed over the containers it
    changes ({"cpu_millicores", "memory_bytes"}; negative where it adds)."""
    removed = {"cpu_millicores": 0, "memory_bytes": 0}
    for name, values in after.items():
        new = values.get("requests") or {}
        old = (before.get(name) or {}).get("requests") or {}
        for resource, key in (("cpu", "cpu_millicores"), ("memory", "memory_bytes")):
            if new.get(resource) is not None and old.get(resource) is not None:
                removed[key] += int(old[resource]) - int(new[resource])
    return removed


def _container_resizes(change: ResizeChange) -> tuple[ContainerResize, ...]:
    return tuple(
        ContainerResize(
            name=name,
            requests=_resources(values.get("requests") or {}),
            limits=_resources(values.get("limits") or {}),
        )
        for name, values in change.resources_after.items()
    )


def _problem(result: WriteResult) -> str:
    causes = (result.body.get("details") or {}).get("causes") or []
    text = f"HTTP {result.status}"
    if result.reason:
        text += f" {result.reason}"
    if result.message:
        text += f": {result.message}"
    for cause in causes:
        if isinstance(cause, dict) and cause.get("message"):
            text += f" ({cause['message']})"
    return text


class Applier:
    """Applies approved changes of one cycle within the safety limits."""

    def __init__(
        self,
        context: proposals.UpdaterContext,
        writer: ClusterWriter,
        report: CycleReport,
    ) -> None:
        self.context = context
        self.writer = writer
        self.report = report
        self.evictions_left = settings.UPDATER_MAX_EVICTIONS_PER_CYCLE
        self.resizes_left = settings.UPDATER_MAX_RESIZES_PER_CYCLE
        self.groups: dict[tuple[str, str, str], decision.ReplicaGroup | None] = {}
        # HPAs this pass patched, as they now are (``hpa_of`` summaries).
        self.patched_hpas: dict[tuple[str, str], dict[str, Any]] = {}

    def group_of(
        self, change: ResizeChange, pod: PodInfo
    ) -> decision.ReplicaGroup | None:
        workload = change.workload
        key = decision.group_key(pod, (workload.kind, workload.name))
        if key not in self.groups:
            pods = self.context.pods.get(change.workload_id, [])
            members = [
                p
                for p in pods
                if decision.group_key(p, (workload.kind, workload.name)) == key
            ]
            self.groups[key] = decision.build_group(
                members,
                owner_kind=key[1],
                replicas=workload.replicas,
                min_replicas=proposals.min_replicas_of(self.context, workload),
                tolerance_fraction=self.context.config.eviction_tolerance,
            )
        return self.groups[key]

    def outside_window(self, change: ResizeChange) -> bool:
        """Whether the change waits for a maintenance window (the policy's and the
        cluster's); a quick OOM passes when the policy lets it."""
        policy = change.workload.policy
        state = windows.window_state(
            policy.maintenance_windows,
            self.context.cluster.maintenance_windows,
            now=self.context.now,
        )
        if state.is_open:
            return False
        plan = self.context.plans.get((change.workload_id, change.pod))
        quick_oom = plan is not None and plan.priority.quick_oom
        return not (quick_oom and policy.window_bypasses_quick_oom)

    def apply_all(self) -> None:
        """Every approved change, highest priority first; a workload's only once
        every live webhook process has loaded its policy (``acks.not_loaded``)."""
        approved = list(proposals.changes_needing(self.context, (S.APPROVED,)))
        # Wall-clock time: the processes' heartbeats are.
        not_loaded = acks.not_loaded(
            cluster_id=self.context.cluster.pk,
            workload_ids={c.workload_id for c in approved},
            now=timezone.now(),
        )
        for change in approved:
            pod = self.context.pod(change.workload_id, change.pod)
            if pod is None or pod.uid != change.pod_uid:
                continue  # expired by propose; a vanished pod is not touched
            if self.outside_window(change):
                self.report.outside_window += 1
                continue
            waiting = not_loaded.get(change.workload_id)
            if waiting is not None:
                # A replacement (or the next pod) would be admitted with the old
                # policy: no write until the webhook has it.
                self.report.waiting_for_webhook += 1
                if change.error != waiting:
                    ResizeChange.objects.filter(pk=change.pk).update(error=waiting)
                continue
            if in_place_only(change) and not retry_due(
                change,
                now=self.context.now,
                deferred_s=self.context.config.deferred_timeout_s,
            ):
                self.report.waiting += 1
                continue
            if change.hpa_changes:
                self.coordinated(change, pod)
            elif change.method == M.IN_PLACE:
                self.resize(change, pod)
            else:
                self.evict(change, pod)

    def _blocked(self, path: str) -> str | None:
        return permissions.path_block_reason(
            self.context.cluster, path, now=self.context.now
        )

    def _resize_in_place(
        self,
        change: ResizeChange,
        pod: PodInfo,
        group: decision.ReplicaGroup,
        *,
        by: str,
    ) -> WriteResult:
        """Send the change's resize through the writer and record it: the write, the
        path's permission, and on success the group, the report and the pod's event."""
        result = self.writer.resize_pod(
            namespace=pod.namespace,
            name=pod.name,
            containers=_container_resizes(change),
        )
        self.report.writes += 1
        self._written(change, pod, result)
        self._record(permissions.RESIZE, result)
        if result.ok:
            group.record(pod, in_place=True)
            self.report.resized += 1
            self._event(
                change,
                pod,
                RESIZED_REASON,
                f"Pod resized in place by {by} (change {change.pk}): {change.reason}",
            )
        return result

    def _written(
        self, change: ResizeChange, pod: PodInfo, result: WriteResult | None = None
    ) -> None:
        """The write was answered: a crash from now on is not "never written"; the
        containers' restart counts and IDs as they were are kept for verification,
        and a resize's generation (the pod in its answer, k8s-wire kubelet/02)."""
        change.written_at = self.context.now
        change.written_state = written_state(pod, list(change.resources_after))
        generation = None
        if result is not None and result.ok:
            generation = (result.body.get("metadata") or {}).get("generation")
        change.written_generation = generation if isinstance(generation, int) else None
        ResizeChange.objects.filter(pk=change.pk).update(
            written_at=change.written_at,
            written_state=change.written_state,
            written_generation=change.written_generation,
        )

    def _record(self, path: str, result: WriteResult) -> None:
        permissions.record_write_result(
            self.context.cluster, path, result, now=self.context.now
        )

    def _start(
        self, change: ResizeChange, note: str, *, error: str = "", **fields: Any
    ) -> bool:
        now = self.context.now
        return workflow.try_transition(
            change,
            to=S.APPLYING,
            allowed_from=(S.APPROVED,),
            now=now,
            note=note,
            attempts=change.attempts + 1,
            last_attempt_at=now,
            applied_at=now,
            written_at=None,
            error=error,
            # Off, a pause or a kill switch committed since this cycle read them wins.
            where=control.acting_q("workload__"),
            **fields,
        )

    def _event(
        self, change: ResizeChange, pod: PodInfo, reason: str, message: str
    ) -> None:
        if self._blocked(permissions.EVENTS):
            return  # shown on the cluster's write paths, not logged per pod
        result = self.writer.record_event(
            namespace=pod.namespace,
            pod=pod.name,
            pod_uid=pod.uid,
            reason=reason,
            message=message,
        )
        self.report.writes += 1
        self._record(permissions.EVENTS, result)
        if not result.ok and not result.permission_refused:
            logger.warning("event on pod %s refused: %s", pod.name, _problem(result))

    def resize(self, change: ResizeChange, pod: PodInfo) -> None:
        group = self.group_of(change, pod)
        if group is None or pod.phase == "Pending" or not group.disruptable():
            self.report.waiting += 1
            return
        if self.resizes_left <= 0:
            self.report.waiting += 1
            return
        blocked = self._blocked(permissions.RESIZE)
        only = in_place_only(change)
        if blocked and only:
            self._wait(change, f"{blocked}; {NEVER_EVICTS}")
            return
        if blocked:
            # InPlaceOrRecreate falls back to eviction, as it does when refused.
            self.evict(change, pod, error=blocked, method=M.EVICTION)
            return
        why = self.memory_limit_refusal(change)
        if why:
            # Never sent in place (upstream's rule before 1.35): InPlace skips it,
            # InPlaceOrRecreate evicts; the replacement gets the lower limit.
            if only:
                self._wait(change, f"{why}; {NEVER_EVICTS}")
            else:
                self.evict(
                    change, pod, error=f"{why}: evicted instead", method=M.EVICTION
                )
            return
        stopped = not_running(pod, list(change.resources_after))
        if stopped and only:
            self._wait(change, f"{stopped}; {NEVER_EVICTS}")
            return
        if stopped:
            # A container between restarts (e.g. CrashLoopBackOff after OOM kills)
            # may never start with a resize: its replacement gets the new requests.
            # Only InPlaceOrRecreate resizes in place, and it may evict.
            self.evict(
                change, pod, error=f"{stopped}: evicted instead", method=M.EVICTION
            )
            return
        if not self._start(change, "resizing in place"):
            return
        self.resizes_left -= 1
        result = self._resize_in_place(change, pod, group, by="vpaweb")
        if result.ok:
            return
        if result.status == 429:
            self._try_later(change, result)
            return
        if only:
            self.refused_in_place(change, pod, result)
            return
        # Refused (e.g. 422 "Pod running on node without support for resize", or a
        # 403 NodeCapacity: this pod's node cannot hold it, infeasible as upstream's
        # PodResizePending Infeasible): InPlaceOrRecreate falls back to eviction for
        # this pod, as upstream's updater does. Only an authorization 403 stops the
        # resize path for the cluster (``_record``).
        problem = _problem(result)
        refused = (
            "the resize is infeasible: the pod's node cannot hold it"
            if result.node_capacity
            else "the resize was refused"
        )
        if workflow.try_transition(
            change,
            to=S.APPROVED,
            allowed_from=(S.APPLYING,),
            now=self.context.now,
            note=f"falling back to eviction: {refused}: {problem}",
            method=M.EVICTION,
            error=problem,
        ):
            self.report.fell_back += 1
            self.evict(change, pod, error=problem)

    def memory_limit_refusal(self, change: ResizeChange) -> str:
        """Why the change cannot be resized in place on this cluster's version: it
        lowers a memory limit and the server is older than 1.35 ("" when it can)."""
        lowered = decision.lowers_memory_limit(
            change.resources_before, change.resources_after
        )
        if not lowered:
            return ""
        refusal = decision.memory_limit_decrease_refusal(
            self.context.snapshot.server_version
        )
        return refusal and f"container {', '.join(lowered)}'s memory limit: {refusal}"

    def _wait(self, change: ResizeChange, why: str) -> None:
        """The change waits (InPlace: no eviction instead), saying why."""
        self.report.waiting += 1
        if change.error != why:
            ResizeChange.objects.filter(pk=change.pk).update(error=why)

    def refused_in_place(
        self, change: ResizeChange, pod: PodInfo, result: WriteResult
    ) -> None:
        """An InPlace resize refused: never evicted instead. One the pod's node cannot
        hold (NodeCapacity) is remembered as infeasible."""
        problem = _problem(result)
        if result.node_capacity:
            error = (
                f"{workflow.INFEASIBLE_ERROR}: the pod's node cannot hold it "
                f"({problem}); not sent again until the recommendation changes or the "
                "pod is replaced"
            )
        else:
            error = f"the resize was refused: {problem}; {NEVER_EVICTS}"
        _finish(
            change,
            S.FAILED,
            self.context.now,
            self.report,
            observed_of(pod, list(change.resources_after)),
            error=error,
        )

    def evict(
        self, change: ResizeChange, pod: PodInfo, *, error: str = "", **fields: Any
    ) -> None:
        group = self.group_of(change, pod)
        if (
            group is None
            or group.budget_refused
            or not group.can_evict(pod)
            or self.evictions_left <= 0
            or self._blocked(permissions.EVICTION)
        ):
            self.report.waiting += 1
            return
        if not self._start(change, "evicting", error=error, **fields):
            return
        self.evictions_left -= 1
        result = self.writer.evict_pod(namespace=pod.namespace, name=pod.name)
        self.report.writes += 1
        self._written(change, pod)
        self._record(permissions.EVICTION, result)
        if result.ok:
            group.record(pod, in_place=False)
            self.report.evicted += 1
            self._event(
                change,
                pod,
                EVICTED_REASON,
                f"Pod evicted by vpaweb to apply new resource requests (change "
                f"{change.pk}): {change.reason}",
            )
            return
        if result.status == 429:
            # The budget covers the group: its other pods wait for the next cycle.
            group.budget_refused = True
            self._try_later(change, result)
            return
        problem = _problem(result)
        to = S.EXPIRED if result.status == 404 else S.FAILED
        if workflow.try_transition(
            change,
            to=to,
            allowed_from=(S.APPLYING,),
            now=self.context.now,
            note=problem,
            error=problem,
        ):
            if to == S.FAILED:
                self.report.failed += 1
            else:
                self.report.expired += 1

    # --- coordinated HPA mode (hpa_coordination.py) ---------------------------------
    def _hpas(self, change: ResizeChange) -> dict[str, Any]:
        """The change's HPAs as this cycle read them, with this pass's own patches."""
        names = [e["hpa"] for e in change.hpa_changes]
        found = hpa_coordination.live_hpas(
            self.context.snapshot.horizontal_pod_autoscalers,
            change.workload.namespace,
            names,
        )
        return {
            **found,
            **{
                name: hpa
                for (namespace, name), hpa in self.patched_hpas.items()
                if namespace == change.workload.namespace and name in names
            },
        }

    def _note_patched(
        self, namespace: str, name: str, entries: list[Any], *, revert: bool = False
    ) -> None:
        """Remember what this pass wrote to an HPA (its siblings read it)."""
        current = self._hpas_by_name(namespace, name)
        if current is None:
            return
        metrics = [dict(m) for m in current.get("resource_metrics") or ()]
        for entry in entries:
            target = entry["before"] if revert else entry["after"]
            for metric in metrics:
                if metric["index"] == entry["index"]:
                    metric.update(
                        hpa_coordination.summary_fields(metric["resource"], target)
                    )
        self.patched_hpas[(namespace, name)] = {
            **current,
            "resource_metrics": metrics,
        }

    def _hpas_by_name(self, namespace: str, name: str) -> dict[str, Any] | None:
        if (namespace, name) in self.patched_hpas:
            return self.patched_hpas[(namespace, name)]
        found = hpa_coordination.live_hpas(
            self.context.snapshot.horizontal_pod_autoscalers, namespace, [name]
        )
        hpa = found.get(name)
        return None if hpa is None else dict(hpa)

    def _patch_hpas(
        self, change: ResizeChange, pod: PodInfo, entries: list[Any], *, revert: bool
    ) -> tuple[list[Any], WriteResult | None]:
        """Patch each HPA of ``entries`` (one JSON patch per HPA); the entries that
        took, and the first refusal (None when all took)."""
        done: list[Any] = []
        for name, group in hpa_coordination.by_hpa(entries).items():
            result = self.writer.patch_hpa(
                namespace=pod.namespace,
                name=name,
                operations=hpa_coordination.hpa_operations(group, revert=revert),
            )
            self.report.writes += 1
            self._record(permissions.HPA_TARGETS, result)
            if not result.ok:
                return done, result
            self._note_patched(pod.namespace, name, list(group), revert=revert)
            done.extend(group)
        return done, None

    def _set_back(self, change: ResizeChange, pod: PodInfo, entries: list[Any]) -> str:
        """Set the HPA targets of ``entries`` back (after a refused resize); what
        happened, in words."""
        if not entries:
            return ""
        _, refused = self._patch_hpas(change, pod, entries, revert=True)
        state = ResizeChange.HpaState.REVERTED
        text = "the HPA change was set back"
        if refused is not None:
            state = ResizeChange.HpaState.REVERT_FAILED
            text = f"the HPA change could NOT be set back: {_problem(refused)}"
            logger.warning(
                "change %s: HPA of %s/%s not set back: %s",
                change.pk,
                pod.namespace,
                change.workload.name,
                _problem(refused),
            )
        ResizeChange.objects.filter(pk=change.pk).update(hpa_state=state)
        change.hpa_state = state
        return text

    def coordinated(self, change: ResizeChange, pod: PodInfo) -> None:
        """Patch the HPA (its old targets tested), then resize the pod in place; a
        refused resize sets the HPA back. Never evicts (``NO_EVICTION``)."""
        group = self.group_of(change, pod)
        if (
            group is None
            or pod.phase == "Pending"
            or not group.disruptable()
            or self.resizes_left <= 0
            or self._blocked(permissions.RESIZE)
            or self._blocked(permissions.HPA_TARGETS)
            or not_running(pod, list(change.resources_after))
        ):
            self.report.waiting += 1
            return
        why = self.memory_limit_refusal(change)
        if why:
            # Neither the HPA nor the pod is written: a coordinated change never
            # falls back to eviction.
            self._wait(change, f"{why}; {NO_EVICTION}")
            return
        now = self.context.now
        hpas = self._hpas(change)
        to_patch = []
        for entry in change.hpa_changes:
            live = hpa_coordination.live_target(hpas, entry)
            resource = entry["resource"]
            if live is not None and hpa_coordination.same_target(
                resource, live, entry["after"]
            ):
                continue  # already there (a sibling's patch, or this change's)
            if live is not None and hpa_coordination.same_target(
                resource, live, entry["before"]
            ):
                to_patch.append(entry)
                continue
            # The HPA moved on since the proposal: decided again from the next read.
            seen = "gone" if live is None else hpa_coordination.target_text(live)
            if workflow.try_transition(
                change,
                to=S.SUPERSEDED,
                allowed_from=(S.APPROVED,),
                now=now,
                note=f"HPA {entry['hpa']}'s {resource} target is {seen}, not "
                f"{hpa_coordination.target_text(entry['before'])} as when proposed: "
                "decided again on the next cycle",
            ):
                self.report.superseded += 1
            return
        if not self._start(change, "patching the HPA and resizing in place"):
            return
        self.resizes_left -= 1
        patched, refused = self._patch_hpas(change, pod, to_patch, revert=False)
        if refused is not None:
            problem = _problem(refused)
            set_back = self._set_back(change, pod, patched)
            causes = (refused.body.get("details") or {}).get("causes")
            if refused.status in (409, 422) and not causes:
                # A failed test (a bare 422) or a conflict: the HPA changed since it
                # was read. Nothing is resized; the next cycle reads it again and
                # decides again.
                note = (
                    f"the HPA changed since it was read ({problem}): nothing resized; "
                    "decided again on the next cycle"
                )
                to = S.APPROVED
            elif refused.status == 403:
                note = f"no permission to patch the HPA ({problem}): nothing resized"
                to = S.APPROVED
            else:
                note = f"the HPA patch was refused ({problem}): nothing resized"
                to = S.FAILED
            if set_back:
                note += f"; {set_back}"
            if workflow.try_transition(
                change,
                to=to,
                allowed_from=(S.APPLYING,),
                now=now,
                note=note,
                error=note,
            ):
                if to == S.FAILED:
                    self.report.failed += 1
                else:
                    self.report.try_later += 1
            return
        if patched:
            ResizeChange.objects.filter(pk=change.pk).update(
                hpa_state=ResizeChange.HpaState.PATCHED
            )
            change.hpa_state = ResizeChange.HpaState.PATCHED
        result = self._resize_in_place(change, pod, group, by="vpaweb with its HPA")
        if result.ok:
            return
        # Refused: the HPA goes back to where it was; no eviction (NO_EVICTION).
        problem = _problem(result)
        set_back = self._set_back(change, pod, patched)
        if result.status == 429:
            self._try_later(change, result)
            return
        note = f"the resize was refused: {problem}; {NO_EVICTION}"
        if set_back:
            note += f"; {set_back}"
        if workflow.try_transition(
            change,
            to=S.FAILED,
            allowed_from=(S.APPLYING,),
            now=now,
            note=note,
            error=note,
        ):
            self.report.failed += 1

    def _try_later(self, change: ResizeChange, result: WriteResult) -> None:
        """A 429 (a PodDisruptionBudget, or throttling) is not an error: try later."""
        problem = _problem(result)
        if result.retry_after_s is not None:
            problem += f"; retry after {result.retry_after_s:g} s"
        if workflow.try_transition(
            change,
            to=S.APPROVED,
            allowed_from=(S.APPLYING,),
            now=self.context.now,
            note=f"try later: {problem}",
            try_later_count=change.try_later_count + 1,
            error=problem,
        ):
            self.report.try_later += 1


def run_cycle(
    cluster: Cluster,
    *,
    now: datetime,
    snapshot: ClusterSnapshot | None = None,
    writer: ClusterWriter | None = None,
    holder: str | None = None,
) -> CycleReport:
    """One updater cycle for ``cluster`` (only by the holder of its lease)."""
    holder = holder or control.PROCESS_IDENTITY
    report = CycleReport(cluster=cluster.name, holder=holder)
    if not control.acquire_lock(cluster_id=cluster.pk, holder=holder, now=now):
        report.not_leader = True
        return report
    if snapshot is None:
        adapter = cluster_adapter_for(cluster, now=now)
        snapshot = adapter.discover()
    with proposals.gc_frozen():
        context = proposals.load_context(cluster, snapshot, now=now)
        report.pods = sum(len(p) for p in context.pods.values())
        follow_applying(context, report)
        counts = proposals.propose(context)
    report.proposed = counts.proposed
    report.auto_approved = counts.auto_approved
    report.superseded = counts.superseded
    report.held = counts.held
    report.infeasible = counts.infeasible
    report.expired += counts.expired
    blocked = control.write_block_reason(cluster)
    shrunk: set[str] = set()
    if blocked:
        report.writes_blocked = blocked
    else:
        own_writer = writer is None
        writer = writer or cluster_writer_for(cluster, snapshot=snapshot, now=now)
        try:
            if permissions.permissions_due(cluster, now=now):
                permissions.check_write_permissions(cluster, writer=writer, now=now)
            Applier(context, writer, report).apply_all()
            evicted, failed = revert.evict_stuck(
                proposals.changes_needing(context, (S.APPLYING,)),
                pods=context.pods,
                writer=writer,
                cluster=cluster,
                now=now,
            )
            report.writes += evicted
            report.failed += failed
            shrunk, report.unboost_refused = boost.unboost_pods(context, writer)
            report.unboosted = len(shrunk)
            report.writes += report.unboosted + report.unboost_refused
            statuses = vpa_status.write_vpa_statuses(
                cluster, snapshot, writer=writer, now=now
            )
            report.vpa_statuses = statuses.written
            report.vpa_status_failed = statuses.failed
            report.writes += statuses.written + statuses.failed
        finally:
            if own_writer:
                writer.close()
    boost.record_boosted_pods(context, shrunk=shrunk)
    # Renewed at the end too: the lease outlives this cycle by one interval.
    control.acquire_lock(cluster_id=cluster.pk, holder=holder, now=now)
    logger.info("updater cycle of %s: %s", cluster.name, report.as_dict())
    return report
