"""The updater's proposals: which pods need new requests, as ``ResizeChange`` rows."""
# For every live pod of a workload whose vpaweb-owned policy is Recreate or
# InPlaceOrRecreate (a policy that mirrors an upstream VPA object is never acted on),
# the updater decides as upstream's does (``decision.py``, upstream
# ``pkg/updater/priority/update_priority_calculator.go``): the
# capped recommendation (policy, LimitRanges, RequestsOnly: ``cap_for_pod``, the same
# capping the admission webhook applies), ``resourceDiff``, outside the bounds, quick
# OOM, the 12 h lifetime and 0.1 minimum change, ``evictionRequirements``. Each pod
# admitted becomes one open change, with the reason in words, its priority (scale-ups
# first) and the method its mode implies. A newer recommendation supersedes an unapplied
# change; a change whose pod is gone (or was replaced) expires; a change the pod no
# longer needs is superseded too.
#
# The database work is a fixed number of queries per cycle whatever the number of pods
# (workloads, containers with their latest recommendations, LimitRanges, open changes;
# then one insert of the new changes, ``insert.py``), so a cycle over 10,000 pods stays
# cheap (``make bench BENCH=updater``).

from __future__ import annotations

import gc
import json
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max, Q

from recommender.cluster.base import ClusterSnapshot, PodInfo
from recommender.engine.capping import (
    LimitRangeItem,
    RecommendationLike,
)
from recommender.engine.resources import Resources
from recommender.engine.update_band import within_band
from recommender.models import (
    AuditEvent,
    Cluster,
    Container,
    Policy,
    ResizeChange,
    Workload,
)
from recommender.models.bulk import insert_changes
from recommender.models.policy import IN_PLACE_MODES, updater_policy_q
from recommender.services.actuation import (
    boost,
    decision,
    hpa_coordination,
    workflow,
)
from recommender.services.advice.advise import (
    capped_recommendations,
    new_resources,
)
from recommender.services.advice.history import enough_history_q
from recommender.services.advice.limits import limit_ranges_by_namespace
from recommender.services.policy.validation import parse_container_policies
from recommender.services.readmodels import reverts
from recommender.services.readmodels.node_pools import node_allocatables

S = ResizeChange.Status
LIVE_PHASES = ("Running", "Pending")


def config_from_settings() -> decision.UpdaterConfig:
    """Upstream's flags as this deployment sets them."""
    return decision.UpdaterConfig(
        min_replicas=settings.UPDATER_MIN_REPLICAS,
        eviction_tolerance=settings.UPDATER_EVICTION_TOLERANCE,
    )


# The amounts of a recommendation the updater reads (Recommendation model fields).
REC_FIELDS = tuple(
    f"{bound}_{unit}"
    for bound in ("target", "lower", "upper", "uncapped")
    for unit in ("cpu_millicores", "memory_bytes")
)
# What the updater reads of a workload and its policy (the JSON it needs only).
WORKLOAD_FIELDS = (
    "id",
    "cluster_id",
    "kind",
    "namespace",
    "name",
    "replicas",
    "is_active",
    "hpa_conflicts",
    "policy__id",
    "policy__workload_id",
    "policy__mode",
    "policy__source",
    "policy__approval",
    "policy__min_replicas",
    "policy__container_policies",
    "policy__eviction_requirements",
    "policy__maintenance_windows",
    "policy__window_bypasses_quick_oom",
    "policy__hpa_coordination",
)
# What the updater reads of an open change (JSON fields it does not need stay unread).
CHANGE_FIELDS = (
    "id",
    "workload_id",
    "pod",
    "pod_uid",
    "status",
    "method",
    "approval",
    "resources_before",  # the requests a verified change removed (realized savings)
    "resources_after",
    "priority",
    "reason",
    "error",
    "created_at",
    "updated_at",
    "applied_at",
    "attempts",
    "try_later_count",
    "last_attempt_at",  # InPlace's back-off (cycle.retry_due)
    "written_at",
    "resize_pending_since",
    "resize_in_progress_since",
    "written_state",
    "written_generation",
    "decided_by_label",
    "hpa_changes",
    "hpa_state",
    "reverted_at",  # a revert after an unschedulable replacement (revert.py)
    "revert_pod",
    "revert_evicted_at",
)


@dataclass(frozen=True)
class RecBounds:
    """A recommendation's amounts read as plain values."""

    target: Resources
    lower_bound: Resources
    upper_bound: Resources
    uncapped_target: Resources

    @classmethod
    def from_row(cls, amounts: list[int | None]) -> RecBounds:
        """From the values of ``REC_FIELDS``, in order."""
        pairs = [Resources(amounts[i], amounts[i + 1]) for i in range(0, 8, 2)]
        return cls(*pairs)


@dataclass
class PodPlan:
    """What the updater thinks of one pod of an actionable workload."""

    workload: Workload
    pod: PodInfo
    priority: decision.PodPriority
    admitted: bool
    reason: str
    before: dict[str, Any]
    after: dict[str, Any]
    # Coordinated HPA mode: the HPA target changes that go with the resize.
    hpa_changes: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class UpdaterContext:
    """Everything one cycle reads, loaded in a fixed number of queries."""

    cluster: Cluster
    now: datetime
    config: decision.UpdaterConfig
    snapshot: ClusterSnapshot
    workloads: dict[tuple[str, str, str], Workload] = field(default_factory=dict)
    by_id: dict[int, Workload] = field(default_factory=dict)
    pods: dict[int, list[PodInfo]] = field(default_factory=dict)  # by workload id
    plans: dict[tuple[int, str], PodPlan] = field(default_factory=dict)
    # Open changes as plain rows; a model instance is built only for one that moves.
    open_rows: dict[tuple[int, str], dict[str, Any]] = field(default_factory=dict)
    open_changes: dict[tuple[int, str], ResizeChange] = field(default_factory=dict)
    # Requests of rejected changes whose snooze lasts, by workload id and container.
    rejected: dict[int, dict[str, list[dict[str, int | None]]]] = field(
        default_factory=dict
    )
    # Workloads whose last eviction's replacement could not be scheduled, with no
    # operator decision since: their new proposals are not approved automatically.
    needs_operator: set[int] = field(default_factory=set)
    # Coordinated HPA mode: per workload, its changes whose HPA patch took, newest
    # first (``hpa_coordination.rollout_of``).
    hpa_rollouts: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    # (workload id, pod uid, requests) of InPlace resizes found infeasible.
    infeasible: set[tuple[int, str, str]] = field(default_factory=set)
    # The cluster's largest nodes: no resize a node cannot hold is proposed.
    node_allocatables: tuple[tuple[int, int], ...] | None = None

    def status_of(self, key: tuple[int, str]) -> str:
        """The open change's status as this cycle last set it."""
        change = self.open_changes.get(key)
        return change.status if change is not None else self.open_rows[key]["status"]

    def change(self, key: tuple[int, str]) -> ResizeChange:
        """The open change of ``key`` as a model instance (built once)."""
        change = self.open_changes.get(key)
        if change is None:
            change = ResizeChange(**self.open_rows[key])
            workload = self.by_id.get(change.workload_id)
            if workload is not None:
                change.workload = workload  # no query per change
            self.open_changes[key] = change
        return change

    def close(self, key: tuple[int, str]) -> None:
        """Forget a change that is no longer open."""
        self.open_rows.pop(key, None)
        self.open_changes.pop(key, None)

    def pod(self, workload_id: int, name: str) -> PodInfo | None:
        """The live pod of that name in the snapshot."""
        for pod in self.pods.get(workload_id, ()):
            if pod.name == name:
                return pod
        return None


@contextmanager
def gc_frozen() -> Iterator[None]:
    """Keep the objects alive before the cycle (Django's, the discovery snapshot) out
    of its garbage collections (``gc.freeze``): planning 10,000 pods allocates enough
    to trigger full collections, each walking every object of the process (measured:
    about a quarter of a cycle's CPU time, ``make bench BENCH=updater``). Only which
    objects a collection visits changes; the cycle's own garbage is collected."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def load_context(
    cluster: Cluster, snapshot: ClusterSnapshot, *, now: datetime
) -> UpdaterContext:
    """Workloads, recommendations, LimitRanges and open changes of ``cluster``."""
    context = UpdaterContext(
        cluster=cluster, now=now, config=config_from_settings(), snapshot=snapshot
    )
    workloads = (
        Workload.objects.filter(cluster=cluster, is_active=True)
        .filter(updater_policy_q())
        .select_related("policy")
        .only(*WORKLOAD_FIELDS)
    )
    by_id: dict[int, Workload] = {}
    for workload in workloads:
        context.workloads[(workload.kind, workload.namespace, workload.name)] = workload
        by_id[workload.pk] = workload
    latest: dict[int, dict[str, RecommendationLike]] = defaultdict(dict)
    # Plain values, not model instances: this is the cycle's biggest read.
    rows = (
        Container.objects.filter(workload__cluster=cluster, workload__is_active=True)
        .filter(updater_policy_q("workload__"), latest_recommendation__isnull=False)
        # Only recommendations with enough history behind them (advice/history.py).
        .filter(enough_history_q("latest_recommendation__"))
        .order_by()  # any order: no sort of every container
        .values_list(
            "workload_id", "name", *(f"latest_recommendation__{f}" for f in REC_FIELDS)
        )
    )
    for workload_id, name, *amounts in rows:
        latest[workload_id][name] = RecBounds.from_row(amounts)
    ranges = limit_ranges_by_namespace(
        cluster_id=cluster.pk, namespaces={w.namespace for w in by_id.values()}
    )
    context.node_allocatables = node_allocatables(cluster_id=cluster.pk)
    context.by_id = by_id
    for row in ResizeChange.objects.filter(
        workload__cluster=cluster, status__in=workflow.OPEN
    ).values(*CHANGE_FIELDS):
        context.open_rows[(row["workload_id"], row["pod"])] = row
    load_rejections(context)
    load_infeasible(context)
    load_needs_operator(context)
    load_hpa_rollouts(context)
    for info in snapshot.workloads:
        found = context.workloads.get((info.kind, info.namespace, info.name))
        if found is None:
            continue
        workload = found
        live = [p for p in info.pods if p.phase in LIVE_PHASES and not p.deleting]
        context.pods[workload.pk] = live
        _plan_workload(context, workload, live, latest[workload.pk], ranges)
    return context


def load_rejections(context: UpdaterContext) -> None:
    """The requests of every rejection whose snooze still lasts (one query)."""
    rows = (
        ResizeChange.objects.filter(
            workload__cluster=context.cluster,
            workload__in=list(context.by_id),
            status=S.REJECTED,
        )
        .exclude(snooze="")
        .filter(Q(snoozed_until__isnull=True) | Q(snoozed_until__gt=context.now))
        .values_list("workload_id", "resources_after")
    )
    for workload_id, after in rows:
        by_container = context.rejected.setdefault(workload_id, {})
        for name, values in (after or {}).items():
            by_container.setdefault(name, []).append(values.get("requests") or {})
    # A revert holds its band back the same way, while it lasts (revert.py).
    for workload_id, containers in reverts.reverts_of(context.by_id).items():
        by_container = context.rejected.setdefault(workload_id, {})
        for name, (band, _) in containers.items():
            requests: dict[str, int | None] = dict(band)
            by_container.setdefault(name, []).append(requests)


def load_infeasible(context: UpdaterContext) -> None:
    """The resizes InPlace found infeasible, by pod (one query): not proposed again
    for that pod with the same requests (a node does not grow under a pod; a new
    recommendation, or a new pod, is tried)."""
    rows = ResizeChange.objects.filter(
        workload__in=list(context.by_id),
        status=S.FAILED,
        error__startswith=workflow.INFEASIBLE_ERROR,
    ).values_list("workload_id", "pod_uid", "resources_after")
    for workload_id, pod_uid, after in rows:
        context.infeasible.add((workload_id, pod_uid, _key_of(after)))


def _key_of(after: Any) -> str:
    return json.dumps(after, sort_keys=True)


def load_needs_operator(context: UpdaterContext) -> None:
    """Workloads with a change failed because its replacement pod could not be
    scheduled and no operator's decision on any of their changes since (2 queries)."""
    changes = ResizeChange.objects.filter(workload__in=list(context.by_id))
    failed = dict(
        changes.filter(status=S.FAILED, error__startswith=workflow.UNSCHEDULABLE_ERROR)
        .values("workload_id")
        .annotate(last=Max("updated_at"))
        .values_list("workload_id", "last")
    )
    if not failed:
        return
    decided = dict(
        changes.filter(workload__in=list(failed), decided_at__isnull=False)
        .exclude(decided_by_label=workflow.AUTOMATIC_LABEL)
        .values("workload_id")
        .annotate(last=Max("decided_at"))
        .values_list("workload_id", "last")
    )
    context.needs_operator = {
        w for w, last in failed.items() if decided.get(w) is None or decided[w] < last
    }


def load_hpa_rollouts(context: UpdaterContext) -> None:
    """The changes of coordinated workloads whose HPA patch took (one query)."""
    coordinated = [
        w.pk for w in context.by_id.values() if hpa_coordination.is_coordinated(w)
    ]
    if not coordinated:
        return
    for row in (
        ResizeChange.objects.filter(
            workload__in=coordinated,
            hpa_state=ResizeChange.HpaState.PATCHED,
            status__in=(S.APPLYING, S.APPLIED),
        )
        .order_by("-id")
        .values("id", "workload_id", "resources_after", "hpa_changes")
    ):
        context.hpa_rollouts.setdefault(row["workload_id"], []).append(dict(row))


def hpa_key(entries: list[dict[str, Any]] | None) -> list[tuple[Any, ...]]:
    """What makes two changes' HPA parts the same: the targets they bring the HPA
    to (a change proposed before a sibling moved the HPA there stays as it is: it
    finds the HPA there when it is applied)."""
    return [(e["hpa"], e["index"], e["after"]) for e in entries or ()]


def held_by_rejection(context: UpdaterContext, plan: PodPlan) -> bool:
    """Whether an operator's rejection holds this plan back: every container it
    would change stays within the band of a rejected change for that container
    (``update_band.within_band``, the updater's own threshold)."""
    rejected = context.rejected.get(plan.workload.pk)
    if not rejected:
        return False
    for name, after in plan.after.items():
        if after == plan.before.get(name):
            continue  # not changed by this plan
        planned = after.get("requests") or {}
        if not any(
            within_band(requests, planned, min_change=context.config.min_change)
            for requests in rejected.get(name, ())
        ):
            return False
    return True


def min_replicas_of(context: UpdaterContext, workload: Workload) -> int:
    """The policy's ``min_replicas``, else ``VPAWEB_UPDATER_MIN_REPLICAS``."""
    return workload.policy.min_replicas or context.config.min_replicas


def disruptable_pods(
    context: UpdaterContext, workload: Workload, pods: list[PodInfo]
) -> list[PodInfo]:
    """The pods the updater could ever disrupt (upstream's filters in
    ``pkg/updater/logic/updater.go`` and ``pods_restriction_factory.go``):
    scheduled, in a replica group it does not leave out (below ``min_replicas``, or
    a replicated owner with no replicas). The others get no change proposed."""
    owner = (workload.kind, workload.name)
    groups: dict[tuple[str, str, str], list[PodInfo]] = defaultdict(list)
    for pod in pods:
        if not decision.unscheduled(pod):
            groups[decision.group_key(pod, owner)].append(pod)
    kept: list[PodInfo] = []
    for key, members in groups.items():
        group = decision.build_group(
            members,
            owner_kind=key[1],
            replicas=workload.replicas,
            min_replicas=min_replicas_of(context, workload),
            tolerance_fraction=context.config.eviction_tolerance,
        )
        if group is not None:
            kept.extend(members)
    return kept


def _plan_workload(
    context: UpdaterContext,
    workload: Workload,
    pods: list[PodInfo],
    latest: Mapping[str, RecommendationLike],
    ranges: Mapping[str, tuple[LimitRangeItem | None, LimitRangeItem | None]],
) -> None:
    policy = workload.policy
    policies = parse_container_policies(policy.container_policies or [])
    pair = ranges.get(workload.namespace, (None, None))
    requirements = list(policy.eviction_requirements or [])
    # Pods of one workload mostly share their containers' resources: cap once each.
    cache: dict[Any, tuple[Any, ...]] = {}
    priorities: dict[Any, decision.PodPriority] = {}
    # Coordinated HPA mode: the HPA's resources too, with the HPA change.
    coordinated = hpa_coordination.is_coordinated(workload)
    hpas = (
        hpa_coordination.live_hpas(
            context.snapshot.horizontal_pod_autoscalers,
            workload.namespace,
            [h["name"] for h in workload.hpa_conflicts or ()],
        )
        if coordinated
        else {}
    )
    rollout = (
        hpa_coordination.rollout_of(context.hpa_rollouts.get(workload.pk, []), hpas)
        if coordinated
        else None
    )

    def planned(pod: PodInfo, held: Any) -> tuple[Any, ...]:
        capped, off = capped_recommendations(
            pod,
            latest,
            policies,
            pair,
            held,
            node_allocatables=context.node_allocatables,
        )
        before, after = new_resources(pod, capped, policies, pair[0])
        if decision.limit_range_refusals(pod, before, after, pair):
            # No change LimitRanger would refuse (it validates resizes; the
            # webhook leaves an evicted pod's replacement alone): none proposed.
            after = before
        return capped, off, before, after

    for pod in disruptable_pods(context, workload, pods):
        if boost.is_boosted(pod):
            continue  # shrunk by boost.unboost_pods, then judged like any pod
        key = tuple((c.name, c.kind, c.requests, c.limits) for c in pod.containers)
        if key not in cache:
            hpa_changes: list[dict[str, Any]] = []
            waits = ""
            capped, off, before, after = planned(
                pod, () if coordinated else workload.hpa_conflicts
            )
            if coordinated and after != before:
                found, waits = hpa_coordination.plan_hpa_changes(
                    workload=workload,
                    pods=pods,
                    pod=pod,
                    before=before,
                    after=after,
                    hpas=hpas,
                    rollout=rollout,
                )
                if found is None:
                    # The HPA's resources wait, as under upstream's rule.
                    capped, off, before, after = planned(pod, workload.hpa_conflicts)
                else:
                    hpa_changes = found
            cache[key] = (capped, off, before, after, hpa_changes, waits)
        capped, off, before, after, hpa_changes, waits = cache[key]
        if not capped or after == before:
            continue
        # The priority depends on the containers, annotations and terminations only.
        shape = (
            key,
            pod.annotations.get(decision.OBSERVED_ANNOTATION),
            pod.last_terminations,
        )
        priority = priorities.get(shape)
        if priority is None:
            priority = priorities[shape] = decision.pod_priority(
                pod,
                capped,
                now=context.now,
                evict_after_oom_s=context.config.evict_after_oom_s,
                off_containers=off,
            )
        admitted = decision.admit(
            priority, pod, now=context.now, config=context.config
        ) and decision.eviction_requirements_pass(requirements, pod, capped)
        reason = decision.describe(priority, pod, now=context.now) if admitted else ""
        if admitted and hpa_changes:
            reason += f"; with the HPA: {hpa_coordination.describe(hpa_changes)}"
        elif admitted and waits:
            reason += f"; the HPA's resources wait: {waits}"
        context.plans[(workload.pk, pod.name)] = PodPlan(
            workload=workload,
            pod=pod,
            priority=priority,
            admitted=admitted,
            reason=reason,
            before=before,
            after=after,
            hpa_changes=hpa_changes,
        )


@dataclass
class ProposalCounts:
    """What the proposal step did."""

    proposed: int = 0
    auto_approved: int = 0
    superseded: int = 0
    expired: int = 0
    kept: int = 0
    held: int = 0  # not proposed: an operator's rejection still holds them back
    infeasible: int = 0  # not proposed: InPlace found that resize infeasible


def _method_of(policy: Policy) -> str:
    if policy.mode in IN_PLACE_MODES:
        return ResizeChange.Method.IN_PLACE
    return ResizeChange.Method.EVICTION


def propose(context: UpdaterContext) -> ProposalCounts:
    """Create, keep, supersede or expire open changes to match the plans."""
    counts = ProposalCounts()
    now = context.now
    replaced: set[tuple[int, str]] = set()
    actionable = {w.pk for w in context.workloads.values()}
    for key, row in list(context.open_rows.items()):
        if context.status_of(key) == S.APPLYING:
            continue  # followed by apply.follow_applying
        if (
            key[0] in context.needs_operator
            and context.status_of(key) == S.APPROVED
            and row["decided_by_label"] == workflow.AUTOMATIC_LABEL
        ):
            # Approved by the policy before a replacement could not schedule: an
            # operator decides now.
            workflow.try_transition(
                context.change(key),
                to=S.PROPOSED,
                allowed_from=(S.APPROVED,),
                now=now,
                note="waits for an operator: the last evicted pod's replacement "
                "could not be scheduled",
                decided_at=None,
                decided_by_label="",
            )
        plan = context.plans.get(key)
        pod = context.pod(*key)
        if pod is None or (row["pod_uid"] and pod.uid != row["pod_uid"]):
            note = "the pod is gone" if pod is None else "the pod was replaced"
            if key[0] not in actionable:
                note = "the workload's policy no longer allows changes"
            if workflow.try_transition(
                context.change(key),
                to=S.EXPIRED,
                allowed_from=(S.PROPOSED, S.APPROVED),
                now=now,
                note=note,
            ):
                counts.expired += 1
                context.close(key)
            continue
        if (
            plan is not None
            and plan.admitted
            and plan.after == row["resources_after"]
            and hpa_key(plan.hpa_changes) == hpa_key(row["hpa_changes"])
        ):
            counts.kept += 1
            continue
        note = (
            "a newer recommendation replaces it"
            if plan is not None and plan.admitted
            else "the pod no longer needs a change"
        )
        if workflow.try_transition(
            context.change(key),
            to=S.SUPERSEDED,
            allowed_from=(S.PROPOSED, S.APPROVED),
            now=now,
            note=note,
        ):
            counts.superseded += 1
            context.close(key)
            replaced.add(key)
    new: list[dict[str, Any]] = []
    for key, plan in sorted(
        context.plans.items(), key=lambda item: item[1].priority.sort_key()
    ):
        if not plan.admitted or key in context.open_rows:
            continue
        if held_by_rejection(context, plan):
            counts.held += 1
            continue
        if (plan.workload.pk, plan.pod.uid, _key_of(plan.after)) in context.infeasible:
            counts.infeasible += 1
            continue
        policy = plan.workload.policy
        # After a replacement that could not schedule, an operator decides.
        automatic = (
            policy.approval == Policy.Approval.AUTOMATIC
            and plan.workload.pk not in context.needs_operator
        )
        # Plain rows, not model instances: thousands of proposals per cycle.
        new.append(
            {
                "workload_id": plan.workload.pk,
                "pod": plan.pod.name,
                "pod_uid": plan.pod.uid,
                "method": _method_of(policy),
                "status": S.APPROVED if automatic else S.PROPOSED,
                "approval": policy.approval,
                "resources_before": plan.before,
                "resources_after": plan.after,
                "hpa_changes": plan.hpa_changes,
                "reason": plan.reason
                + (
                    "; waits for an operator: the last evicted pod's replacement "
                    "could not be scheduled"
                    if plan.workload.pk in context.needs_operator
                    else ""
                ),
                "priority": plan.priority.rank,
                "created_at": now,
                "updated_at": now,
                "decided_at": now if automatic else None,
                "decided_by_label": workflow.AUTOMATIC_LABEL if automatic else "",
            }
        )
    if not new:
        return counts
    with transaction.atomic():
        created = insert_changes(
            new,
            cluster_id=context.cluster.pk,
            # Off wins: re-read in the insert statement, not from this cycle's read.
            approvable=Workload.objects.filter(updater_policy_q()),
        )
        # A proposal is recorded by its row (created_at, reason); the audit log gets
        # every transition after it, an automatic approval included.
        events: list[AuditEvent] = []
        for row in created:
            key = (row["workload_id"], row["pod"])
            context.open_rows[key] = {name: row[name] for name in CHANGE_FIELDS}
            if row["status"] == S.APPROVED:
                events.append(
                    workflow.audit_event(
                        context.change(key),
                        before=S.PROPOSED,
                        after=S.APPROVED,
                        now=now,
                        actor_label=workflow.AUTOMATIC_LABEL,
                    )
                )
                counts.auto_approved += 1
        AuditEvent.objects.bulk_create(events, batch_size=1000)
    counts.proposed = len(created)
    return counts


def changes_needing(
    context: UpdaterContext, statuses: Iterable[str]
) -> list[ResizeChange]:
    """Open changes of the context in ``statuses``, highest priority first."""
    wanted = set(statuses)
    found = [
        context.change(key)
        for key in list(context.open_rows)
        if context.status_of(key) in wanted
    ]
    return sorted(found, key=lambda c: (-c.priority, c.created_at, c.pk or 0))
