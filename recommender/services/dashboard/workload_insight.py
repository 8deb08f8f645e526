"""Read-side use cases of the workload page: per container numbers, the ready-to-use
result, and the charts' data (engine histograms from checkpoints, usage from the hours
the refresh stored: no usage source is read).

Facts, statuses and savings follow recommender/models/provisioning.py; nothing here
writes.
"""

from __future__ import annotations

import json
import logging
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import yaml
from django.db.models import F, Prefetch, Window
from django.db.models.functions import RowNumber

from recommender.engine import (
    AggregateSet,
    Profile,
    format_cpu,
    format_memory,
)
from recommender.engine.capping import MODE_OFF, select_container_policy
from recommender.engine.oom import oom_effect
from recommender.engine.resources import RESOURCE_NAMES, Resources
from recommender.engine.usage_hours import HOUR_S, hour_end_s
from recommender.errors import NotFound
from recommender.models import (
    Container,
    OomKill,
    Policy,
    ProvisioningFacts,
    Recommendation,
    UsageHour,
    Workload,
    container_facts,
    workload_facts,
)
from recommender.models.provisioning import pods_billed
from recommender.services.advice.advise import (
    SOURCE_RECOMMENDATION,
    AdviceInputs,
    PodAdvice,
    advise,
    gated_advice,
    inputs_for_workload,
    workload_pod,
    written_resources,
)
from recommender.services.advice.hpa import (
    adjusted_hpas,
    adjustments_for_workload,
    requests_of,
    trigger_warnings,
)
from recommender.services.policy.validation import (
    parse_container_policies,
    profile_or_default,
)
from recommender.services.readmodels.provisioning import (
    Prices,
    no_recommendation_reason,
    per_run,
    risk_rules,
    runs_a_month,
)
from recommender.services.readmodels.realized import live_pod_requests
from recommender.text import comment_text

logger = logging.getLogger(__name__)


# --- The workload page ----------------------------------------------------------------

# How much recommendation history the page draws per container (its newest rows; a row
# is written only on change).
HISTORY_LIMIT = 500
OOM_HISTORY = timedelta(days=8)
# kubectl resource names and where each kind keeps its pod template.
KUBECTL_RESOURCE: dict[str, str] = {
    Workload.Kind.DEPLOYMENT: "deployment",
    Workload.Kind.STATEFUL_SET: "statefulset",
    Workload.Kind.DAEMON_SET: "daemonset",
    Workload.Kind.REPLICA_SET: "replicaset",
    Workload.Kind.JOB: "job",
    Workload.Kind.CRON_JOB: "cronjob",
    Workload.Kind.REPLICATION_CONTROLLER: "replicationcontroller",
}


@dataclass
class ContainerInsight:
    """One container of the workload page: numbers, history, ready-to-use result."""

    container: Container
    facts: ProvisioningFacts
    recommendation: Recommendation | None
    history: list[Recommendation]
    oom_kills: list[OomKill]
    explanation: dict[str, Any]
    no_data_reason: str | None
    new_requests: dict[str, int]
    new_limits: dict[str, int]
    is_policy_off: bool = False
    # How the OOM kills before the recommendation bear on its memory target
    # (engine.oom.oom_effect), None without kills.
    oom_effect: dict[str, Any] | None = None
    # When its live pods carry different requests (one resized in place): (cpu
    # millicores, memory bytes, pods), most pods first (realized.live_pod_requests).
    pod_requests: list[tuple[int | None, int | None, int]] = field(default_factory=list)

    @property
    def status(self) -> str:
        """The headline status."""
        return self.facts.status

    @property
    def savings(self) -> float:
        """Monthly savings, all replicas."""
        return self.facts.savings


@dataclass
class WorkloadInsight:
    """Everything the workload page shows except the charts' data."""

    workload: Workload
    policy: Policy
    containers: list[ContainerInsight]
    facts: ProvisioningFacts
    kubectl_patch: str
    resources_yaml: str
    patch_note: str
    # What the advice read (the webhook preview reuses it: no second read).
    advice_inputs: AdviceInputs | None = None
    # Why the advice leaves the pods as they are: no node could hold them at the
    # recommendation ("" when one can).
    fits_no_node: str = ""
    # The HPA change per Utilization metric (services.advice.hpa.adjustments).
    hpa_adjustments: list[dict[str, Any]] = field(default_factory=list)
    # HPA triggers above the new limits (services.advice.hpa.trigger_warnings).
    hpa_warnings: list[str] = field(default_factory=list)
    # Containers whose recommendation the history gate holds back, with why, and
    # whether the snippets show them anyway (flagged low confidence).
    held_by_history: dict[str, str] = field(default_factory=dict)
    include_short_history: bool = False

    @property
    def status(self) -> str:
        """The headline status."""
        return self.facts.status

    @property
    def savings(self) -> float:
        """Monthly savings, all replicas."""
        return self.facts.savings

    @property
    def runs_a_month(self) -> float | None:
        """A CronJob's runs a month of its schedule (None otherwise)."""
        return runs_a_month(self.workload.schedule)

    @property
    def savings_per_run(self) -> float | None:
        """A CronJob's savings of one run: the month's over its runs."""
        return per_run(self.facts.savings, self.workload.schedule)


def _quantity_dict(amounts: dict[str, int]) -> dict[str, str]:
    out = {}
    if "cpu" in amounts:
        out["cpu"] = format_cpu(amounts["cpu"])
    if "memory" in amounts:
        out["memory"] = format_memory(amounts["memory"])
    return out


def _merged(current: Resources, new: Resources) -> Resources:
    """``current`` with the amounts ``new`` sets."""
    for resource in RESOURCE_NAMES:
        amount = new.get(resource)
        if amount is not None:
            current = current.with_amount(resource, amount)
    return current


def _history_note(held: dict[str, str], *, included: bool) -> str:
    """What the history gate did to the snippets."""
    if not held:
        return ""
    reasons = "; ".join(f"{name}: {why}" for name, why in held.items())
    if included:
        return (
            f" Low confidence, shown because you asked: {reasons} (the webhook and "
            "the updater do not act on these yet)."
        )
    return f" Left out, as the webhook and the updater leave them: {reasons}."


def ready_to_use(
    workload: Workload,
    containers: list[ContainerInsight],
    held: dict[str, str] | None = None,
    *,
    include_short_history: bool = False,
) -> tuple[str, str, str]:
    """A ``kubectl patch`` command, a YAML ``resources:`` snippet and a note (with
    what the history gate ``held`` back, by container)."""
    gate = _history_note(held or {}, included=include_short_history)
    regular: list[dict[str, Any]] = []
    init: list[dict[str, Any]] = []
    snippets = {}
    for item in containers:
        if not item.new_requests or item.is_policy_off:
            continue
        resources: dict[str, Any] = {"requests": _quantity_dict(item.new_requests)}
        if item.new_limits:
            resources["limits"] = _quantity_dict(item.new_limits)
        entry = {"name": item.container.name, "resources": resources}
        (init if item.container.kind != Container.Kind.REGULAR else regular).append(
            entry
        )
        snippets[item.container.name] = {"resources": resources}
    if not snippets:
        if held and not include_short_history:
            return "", "", gate.strip()
        return (
            "",
            "",
            "No container has a recommendation yet, so there is nothing to apply.",
        )
    pod_spec: dict[str, Any] = {}
    if regular:
        pod_spec["containers"] = regular
    if init:
        pod_spec["initContainers"] = init
    template = {"template": {"spec": pod_spec}}
    if workload.kind == Workload.Kind.CRON_JOB:
        patch = {"spec": {"jobTemplate": {"spec": template}}}
    else:
        patch = {"spec": template}
    body = json.dumps(patch, separators=(",", ":"))
    # Every part a cluster (or a user) named is shell-quoted: the command is pasted.
    resource = KUBECTL_RESOURCE.get(workload.kind, workload.kind.lower())
    command = (
        f"kubectl --namespace {shlex.quote(workload.namespace)} patch "
        f"{shlex.quote(resource)} {shlex.quote(workload.name)} "
        f"--type strategic --patch {shlex.quote(body)}"
    )
    parts = []
    for name, snippet in snippets.items():
        parts.append(
            comment_text(f"# container {name}")
            + "\n"
            + yaml.safe_dump(snippet, sort_keys=False)
        )
    note = "Patching the pod template rolls out new pods with these requests."
    if workload.kind == Workload.Kind.JOB:
        note = (
            "A Job's pod template cannot be changed once created: put these resources "
            "in the Job's manifest for its next run."
        )
    return command, "\n".join(parts), note + gate


def _oom_effect(
    rec: Recommendation | None, kills: list[OomKill], profile: Profile
) -> dict[str, Any] | None:
    """``oom_effect`` of the kills the recommendation's memory histogram held: those
    in the profile's memory history before it was computed."""
    if rec is None:
        return None
    start = rec.created_at - timedelta(seconds=profile.memory_history_s)
    requests = [
        k.memory_request_bytes
        for k in kills
        if start <= k.occurred_at <= rec.created_at
    ]
    target: Any = rec.explanation
    for key in ("resources", "memory", "target"):
        target = target.get(key) if isinstance(target, dict) else None
    return oom_effect(
        requests,
        ratio=profile.oom_bump_ratio,
        min_bump_bytes=profile.oom_min_bump_bytes,
        target=target if isinstance(target, dict) else None,
    )


def workload_insight(
    *,
    workload_id: int,
    now: datetime,
    prices: Prices,
    include_short_history: bool = False,
) -> WorkloadInsight:
    """The workload page's numbers: status, savings, history, OOMs, result; the
    snippets pass the history gate as the webhook does unless
    ``include_short_history``."""
    try:
        workload = Workload.objects.select_related("cluster", "policy").get(
            pk=workload_id
        )
    except Workload.DoesNotExist:
        raise NotFound(f"workload {workload_id} does not exist") from None
    policy = getattr(workload, "policy", None) or Policy(workload=workload)
    container_policies = parse_container_policies(policy.container_policies)
    containers = list(
        Container.objects.recommended()
        .filter(workload=workload)
        .select_related("latest_recommendation", "checkpoint")
        .order_by("position", "name")
    )
    ids = [c.pk for c in containers]
    pod_requests = live_pod_requests(workload.pk)
    history: dict[int, list[Recommendation]] = {pk: [] for pk in ids}
    # The newest HISTORY_LIMIT rows of EACH container (a busy container never crowds
    # out another's history), in one query, drawn oldest first.
    newest_first = [F("created_at").desc(), F("id").desc()]
    for row in (
        Recommendation.objects.filter(container_id__in=ids)
        .annotate(
            rank=Window(
                RowNumber(), partition_by=[F("container_id")], order_by=newest_first
            )
        )
        .filter(rank__lte=HISTORY_LIMIT)
        .order_by("container_id", *newest_first)
    ):
        history[row.container_id].append(row)
    # The page lists the last OOM_HISTORY of kills; the explanation needs those the
    # recommendation's memory histogram held (the profile's history before it).
    profile = profile_or_default(workload)
    history_span = timedelta(seconds=profile.memory_history_s)
    since = min(
        [now - OOM_HISTORY]
        + [
            c.latest_recommendation.created_at - history_span
            for c in containers
            if c.latest_recommendation is not None
        ]
    )
    ooms: dict[int, list[OomKill]] = {pk: [] for pk in ids}
    kills_before: dict[int, list[OomKill]] = {pk: [] for pk in ids}
    for kill in OomKill.objects.filter(
        container_id__in=ids, occurred_at__gte=since
    ).order_by("occurred_at"):
        kills_before[kill.container_id].append(kill)
        if kill.occurred_at >= now - OOM_HISTORY:
            ooms[kill.container_id].append(kill)
    # The one advice path (services.advice.advise): capped as /rightsize and the
    # admission webhook cap it, limits from the same rule.
    inputs = inputs_for_workload(workload)
    pod = workload_pod(containers)
    pod_advice = advise(inputs, pod)
    # The history gate, as the webhook and the updater apply it.
    gated, held = gated_advice(
        inputs, pod_advice, include_short_history=include_short_history
    )
    advice = {a.name: a for a in gated.containers}
    # What the patch and the snippet write: readable quantities, rounded up.
    readable = written_resources(
        inputs, pod, PodAdvice(inputs.namespace, workload, list(advice.values()))
    )
    # The HPA change that keeps its scaling at those requests, and the triggers
    # it would leave above the new limits.
    hpa_changes = adjustments_for_workload(
        workload.hpa_conflicts,
        before=requests_of(pod),
        after={name: amounts[0] for name, amounts in readable.items()},
    )
    new_pod = {
        c.name: (
            _merged(c.requests, readable[c.name][0]),
            _merged(c.limits, readable[c.name][1]),
        )
        for c in pod
    }
    hpa_warnings = [
        warning
        for hpa in adjusted_hpas(workload.hpa_conflicts, hpa_changes)
        for warning in trigger_warnings(
            hpa,
            requests={name: amounts[0] for name, amounts in new_pod.items()},
            limits={name: amounts[1] for name, amounts in new_pod.items()},
        )
    ]
    rules = risk_rules(now)
    items = []
    for container in containers:
        rec = container.latest_recommendation
        facts = container_facts(
            container,
            recent_ooms=sum(
                1 for kill in ooms[container.pk] if kill.occurred_at >= rules.oom_since
            ),
            replicas=pods_billed(workload.replicas, workload.running_hours_month),
            prices=prices.of(workload),
            rules=rules,
        )
        no_data = facts.no_data
        selected = select_container_policy(container_policies, container.name)
        new_requests: dict[str, int] = {}
        new_limits: dict[str, int] = {}
        one = advice.get(container.name)
        if not no_data and one is not None and one.source == SOURCE_RECOMMENDATION:
            requests, limits = readable[container.name]
            new_requests = requests.to_dict()
            new_limits = limits.to_dict()
        items.append(
            ContainerInsight(
                container=container,
                facts=facts,
                recommendation=rec,
                history=list(reversed(history[container.pk])),
                oom_kills=ooms[container.pk],
                explanation=(rec.explanation or {}) if rec else {},
                no_data_reason=(
                    no_recommendation_reason(container) if no_data else None
                ),
                new_requests=new_requests,
                new_limits=new_limits,
                is_policy_off=selected is not None and selected.mode == MODE_OFF,
                oom_effect=_oom_effect(rec, kills_before[container.pk], profile),
                pod_requests=pod_requests.get(container.name, []),
            )
        )
    command, snippet, note = ready_to_use(
        workload, items, held, include_short_history=include_short_history
    )
    return WorkloadInsight(
        workload=workload,
        policy=policy,
        containers=items,
        facts=workload_facts(item.facts for item in items),
        kubectl_patch=command,
        resources_yaml=snippet,
        patch_note=note,
        advice_inputs=inputs,
        hpa_adjustments=hpa_changes,
        hpa_warnings=hpa_warnings,
        held_by_history=held,
        include_short_history=include_short_history,
        fits_no_node=pod_advice.fits_no_node,
    )


# --- Chart data (engine state and usage history) --------------------------------------

# The usage chart's span: hourly points (the stored UsageHour rows), 192 per line.
USAGE_WINDOW = timedelta(days=8)
PERCENTILES = (0.5, 0.9, 0.95)


def _histogram_chart(view: Any) -> dict[str, Any]:
    """A HistogramView trimmed to its non-empty buckets, with p50/p90/p95 marked."""
    weight = np.asarray(view.weight, dtype=float)
    nonzero = np.flatnonzero(weight > 0)
    if nonzero.size == 0:
        return {"bucket_start": [], "weight": [], "percentiles": {}}
    lo, hi = int(nonzero[0]), int(nonzero[-1]) + 1
    return {
        "bucket_start": [float(x) for x in view.bucket_start[lo:hi]],
        "weight": [float(x) for x in weight[lo:hi]],
        "percentiles": {f"p{round(p * 100)}": view.percentile(p) for p in PERCENTILES},
    }


def usage_distributions(
    *, containers: Sequence[Container], profile: Profile, now: datetime
) -> dict[str, dict[str, Any]]:
    """Decayed CPU (cores) and memory (bytes) histograms per container.

    A container without a checkpoint (or with a corrupt one) is left out, with the
    reason logged: the page says there is no distribution yet rather than failing.
    """
    charts: dict[str, dict[str, Any]] = {}
    now_s = now.timestamp()
    for container in containers:
        checkpoint = getattr(container, "checkpoint", None)
        if checkpoint is None or not checkpoint.state:
            continue
        try:
            aggregates = AggregateSet.from_checkpoints(
                profile, [bytes(checkpoint.state)]
            )
        except ValueError as exc:
            logger.warning(
                "checkpoint of container %s unreadable: %s", container.pk, exc
            )
            continue
        charts[container.name] = {
            "cpu": _histogram_chart(aggregates.cpu_histogram(0, now_s=now_s)),
            "memory": _histogram_chart(aggregates.memory_histogram(0, now_s=now_s)),
            "sample_count": int(aggregates.sample_count()[0]),
        }
    return charts


def stored_usage(
    *, containers: Sequence[Container], now: datetime
) -> dict[str, dict[str, Any]]:
    """Per container, its stored usage hours (``UsageHour``) of the last
    ``USAGE_WINDOW``: the hours' ends, and per hour the peak and the mean of CPU
    (cores) and memory (bytes) over all its pods' samples (None: no sample).

    One query, no usage source: the refresh stores the hours as it reads samples. A
    container without a stored hour in the window is left out (the chart says so).
    """
    end = datetime.fromtimestamp(
        float(hour_end_s(np.array([now.timestamp()]))[0]), tz=now.tzinfo
    )
    hours = int(USAGE_WINDOW.total_seconds() // HOUR_S)
    start = end - timedelta(seconds=hours * HOUR_S)
    names = {c.pk: c.name for c in containers}
    lines: dict[int, dict[str, list[float | None]]] = {}
    for pk, ends_at, *values in (
        UsageHour.objects.filter(
            container_id__in=list(names), ends_at__gt=start, ends_at__lte=end
        )
        .order_by()
        .values_list(
            "container_id",
            "ends_at",
            "cpu_max_cores",
            "cpu_sum_cores",
            "cpu_samples",
            "memory_max_bytes",
            "memory_sum_bytes",
            "memory_samples",
        )
    ):
        cpu_max, cpu_sum, cpu_n, memory_max, memory_sum, memory_n = values
        line = lines.get(pk)
        if line is None:
            line = lines[pk] = {
                name: [None] * hours
                for name in ("cpu_max", "cpu_mean", "memory_max", "memory_mean")
            }
        at = round((ends_at - start).total_seconds() / HOUR_S) - 1
        line["cpu_max"][at] = cpu_max if cpu_n else None
        line["cpu_mean"][at] = float(cpu_sum or 0.0) / cpu_n if cpu_n else None
        line["memory_max"][at] = memory_max if memory_n else None
        line["memory_mean"][at] = (
            float(memory_sum or 0.0) / memory_n if memory_n else None
        )
    times = [
        (start + timedelta(seconds=(k + 1) * HOUR_S)).isoformat() for k in range(hours)
    ]
    return {names[pk]: {"t": times, **line} for pk, line in lines.items()}


@dataclass
class WorkloadCharts:
    """The charts' data of one workload."""

    workload: Workload
    container_names: list[str]
    chart_data: dict[str, Any]


def _recommendation_lines(container: Container) -> dict[str, Any]:
    rec = container.latest_recommendation
    return {
        "request_cpu": container.request_cpu_millicores,
        "request_memory": container.request_memory_bytes,
        "target_cpu": getattr(rec, "target_cpu_millicores", None),
        "lower_cpu": getattr(rec, "lower_cpu_millicores", None),
        "upper_cpu": getattr(rec, "upper_cpu_millicores", None),
        "target_memory": getattr(rec, "target_memory_bytes", None),
        "lower_memory": getattr(rec, "lower_memory_bytes", None),
        "upper_memory": getattr(rec, "upper_memory_bytes", None),
        "ooms": [
            kill.occurred_at.isoformat()
            for kill in container.recent_oom_kills  # type: ignore[attr-defined]
        ],
    }


def workload_charts(*, workload_id: int, now: datetime) -> WorkloadCharts:
    """The charts' data: engine histograms from checkpoints, hourly usage from the
    stored hours (``stored_usage``: no usage source is read), requests, bounds and OOM
    kills."""
    try:
        workload = Workload.objects.select_related("cluster", "policy").get(
            pk=workload_id
        )
    except Workload.DoesNotExist:
        raise NotFound(f"workload {workload_id} does not exist") from None
    containers = list(
        Container.objects.recommended()
        .filter(workload=workload)
        .select_related("latest_recommendation", "checkpoint")
        .prefetch_related(
            Prefetch(
                "oom_kills",
                queryset=OomKill.objects.filter(
                    occurred_at__gte=now - USAGE_WINDOW
                ).order_by("occurred_at"),
                to_attr="recent_oom_kills",
            )
        )
        .order_by("position", "name")
    )
    # The profile the refresh decodes these checkpoints with, overrides included (a
    # half-life override changes how the stored weights decay).
    distributions = usage_distributions(
        containers=containers, profile=profile_or_default(workload), now=now
    )
    return WorkloadCharts(
        workload=workload,
        container_names=[c.name for c in containers],
        chart_data={
            "containers": {c.name: _recommendation_lines(c) for c in containers},
            "distributions": distributions,
            "usage": stored_usage(containers=containers, now=now),
        },
    )
