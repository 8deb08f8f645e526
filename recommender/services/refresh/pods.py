"""What discovery stores of pods: their owners (``WorkloadPod``, read back through
``readmodels/pod_owners.py``) and what the live pods really request.

The API server's LimitRanger fills requests and limits a pod template leaves out;
``applied_resources`` takes a container's current values from its live pods and says
where each came from (``Container.Source``: template, LimitRange default, pod).
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.db.models import (
    BooleanField,
    Case,
    CharField,
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    FilteredRelation,
    Max,
    Min,
    OuterRef,
    Q,
    Subquery,
    Sum,
    TextField,
    Value,
    When,
)
from django.db.models.functions import Greatest

from recommender.cluster.base import ContainerSpec, PodInfo
from recommender.engine.resources import CPU, MEMORY, Resources
from recommender.models import Checkpoint, Container, UsageHour, Workload, WorkloadPod
from recommender.models.bulk import STREAM_ROWS, insert_new, update_many
from recommender.models.provisioning import HOURS_PER_MONTH
from recommender.services.readmodels import changes
from recommender.services.readmodels.pod_owners import (
    POD_RETENTION,
    PodKey,
)
from recommender.services.refresh import stored_json
from recommender.services.refresh.cron_hours import forecast_hours

# A stored pod row is rewritten at most this often when nothing but its last-seen
# time changed (a refresh runs every minute; retention is counted in days).
TOUCH_EVERY = timedelta(hours=1)
# Rows rewritten a statement at most, stored pods and batch workloads' running hours
# alike (fewer where the backend binds fewer parameters: bulk.rows_per_statement).
REWRITE_BATCH = 20_000
# The phase in which a batch run holds its requests on a node.
RUNNING = "Running"
BATCH_KINDS = (Workload.Kind.JOB, Workload.Kind.CRON_JOB)
# The seconds one usage sample stands for (ingest.STEP_S; ingest imports this
# module through discovery).
SAMPLE_S = 60.0


def _container_resources(pod: PodInfo) -> dict[str, Any]:
    return {
        c.name: {"requests": c.requests.to_dict(), "limits": c.limits.to_dict()}
        for c in pod.containers
    }


def record_pods(
    *,
    cluster_id: int,
    namespace: str | None,
    now: datetime,
    pods: Sequence[tuple[PodInfo, int]],
    batch_workload_ids: Collection[int] = (),
    owners: dict[PodKey, int] | None = None,
    unchanged: Collection[int] = frozenset(),
    compared: Collection[int] | None = None,
) -> dict[str, int]:
    """Store the live pods with their workload ids; forget those past retention.
    Pods of ``batch_workload_ids`` (Jobs, CronJobs) also keep when they started and
    until when they were seen Running (``record_running_hours``). ``owners``, when
    given, gets the stored workload id of each other pod seen within
    ``POD_RETENTION``, from the same read (``load_pod_owners``'s ``stored``).

    A pod already stored is rewritten only when its workload or resources changed,
    or its last-seen time is older than ``TOUCH_EVERY``; the delete of the rows past
    retention is issued only when the read of the stored pods saw one. ``pods``
    names each pod once (a pod belongs to one workload). The pods of ``unchanged``
    workloads (their change marker where discovery's last compare left it:
    discovery.py) are not compared, only rewritten when due; with ``compared`` (the
    other workloads), only those workloads' stored containers are read. Returns
    counts.
    """
    of_shard = WorkloadPod.objects.filter(cluster_id=cluster_id)
    if namespace is not None:
        of_shard = of_shard.filter(namespace=namespace)
    # The live pods by key, each with its containers' resources as stored: once per
    # tuple of containers, found by its identity (an adapter may hand a workload's
    # replicas one tuple). Not by value: hashing a tuple of frozen dataclasses
    # (ContainerSpec, Resources: recomputed at every hash) cost more than this
    # computation, and was most of this pass at 100,000 pods. ``pods`` holds every
    # tuple through the call, so no id is reused within it.
    resources_of: dict[int, dict[str, Any]] = {}

    def resources(pod: PodInfo) -> dict[str, Any]:
        containers = resources_of.get(id(pod.containers))
        if containers is None:
            containers = resources_of[id(pod.containers)] = _container_resources(pod)
        return containers

    # A pod of an unchanged workload: its resources only if it is written.
    live: dict[PodKey, tuple[PodInfo, int, dict[str, Any] | None]] = {}
    for pod, workload_id in pods:
        live[(pod.namespace, pod.name)] = (
            pod,
            workload_id,
            None if workload_id in unchanged else resources(pod),
        )
    changed: list[tuple[int, dict[str, Any]]] = []
    # Running pods of Jobs: their run time grows every cycle (record_running_hours).
    running: list[tuple[int, dict[str, Any]]] = []
    # Whether a pod no longer live is stored past retention: the delete below is
    # issued only then (a steady fleet's cycles have none to delete).
    has_expired = False
    # One statement for the shard's stored pods, whatever their number (a query per
    # batch of names grew with the fleet), each compared with its live pod as it
    # streams in; the live pods left over are new. Whether the last-seen time is
    # due comes from the database, not 100,000 timestamps read into Python every
    # cycle; the containers' JSON as text, parsed once per distinct text
    # (stored_json.py) and only where it decides.
    stored_text: Any = stored_json.as_text("containers")
    if compared is not None:
        stored_text = Case(
            When(workload_id__in=list(compared), then=stored_text),
            default=None,
            output_field=TextField(),
        )
    stored = of_shard.annotate(
        containers_text=stored_text,
        is_due=ExpressionWrapper(
            Q(last_seen_at__lt=now - TOUCH_EVERY), output_field=BooleanField()
        ),
        is_kept=ExpressionWrapper(
            Q(last_seen_at__gte=now - POD_RETENTION), output_field=BooleanField()
        ),
    ).values_list(
        "pk",
        "namespace",
        "name",
        "workload_id",
        "containers_text",
        "is_due",
        "is_kept",
        "started_at",
    )
    rows = stored.iterator(chunk_size=STREAM_ROWS)
    for pk, ns, name, stored_owner, text, is_due, is_kept, started_at in rows:
        seen = live.pop((ns, name), None)
        if seen is None:
            if not is_kept:
                has_expired = True
            elif owners is not None:
                owners[(sys.intern(ns), name)] = stored_owner
            continue
        pod, workload_id, containers = seen
        if containers is None and (is_due or stored_owner != workload_id):
            containers = resources(pod)
        if workload_id in batch_workload_ids and pod.phase == RUNNING:
            running.append(
                (
                    pk,
                    {
                        "started_at": started_at or pod.start_time or now,
                        "ran_until": now,
                    },
                )
            )
        if containers is None:
            continue  # unchanged, not due
        if (
            is_due
            or stored_owner != workload_id
            or stored_json.parse(text) != containers
        ):
            changed.append(
                (
                    pk,
                    {
                        "workload": workload_id,
                        "containers": containers,
                        "uid": pod.uid,
                        "owner_kind": pod.owner_kind,
                        "owner_name": pod.owner_name,
                        "limit_ranger": pod.limit_ranger,
                        "last_seen_at": now,
                    },
                )
            )
    new_rows: list[WorkloadPod] = []
    for pod, workload_id, containers in live.values():
        if containers is None:
            containers = resources(pod)
        is_batch = workload_id in batch_workload_ids
        new_rows.append(
            WorkloadPod(
                cluster_id=cluster_id,
                workload_id=workload_id,
                namespace=pod.namespace,
                name=pod.name,
                uid=pod.uid,
                owner_kind=pod.owner_kind,
                owner_name=pod.owner_name,
                containers=containers,
                limit_ranger=pod.limit_ranger,
                first_seen_at=now,
                last_seen_at=now,
                started_at=(pod.start_time or now) if is_batch else None,
                ran_until=now if is_batch and pod.phase == RUNNING else None,
            )
        )
    # One JSON document a statement, a conflict skipped (bulk.insert_new).
    insert_new(new_rows)
    # Up to REWRITE_BATCH rows a statement (bulk.update_many): every stored pod
    # falls due together an hour after a first contact, and 160,000 stored pods in
    # batches of 500 are 320 statements in one cycle.
    update_many(WorkloadPod, rows=changed, batch=REWRITE_BATCH)
    update_many(WorkloadPod, rows=running, batch=REWRITE_BATCH)
    # The rows past retention by the read's cutoff: issued only when the read saw a
    # gone pod's row among them (a live pod's was moved on just above), so those go
    # in this cycle, as they always did.
    forgotten = 0
    if has_expired:
        forgotten, _ = of_shard.filter(last_seen_at__lt=now - POD_RETENTION).delete()
    return {"pods_new": len(new_rows), "pods_forgotten": forgotten}


def record_running_hours(
    *, cluster_id: int, namespace: str | None, now: datetime
) -> int:
    """Set ``Workload.running_hours_month`` of the shard's Jobs and CronJobs from
    the runs of their pods discovery saw: the pod-hours run within the last
    ``POD_RETENTION`` (since the workload was first seen, if later), per 730-hour
    month; a CronJob with a schedule: its runs a month x its mean run
    (cron_hours.py). Without a finished run to forecast from, the stored usage
    history counts when it spans longer than discovery has watched: its pod-hours
    sampled (``history_hours``) over the hours it spans (``stored_history``). A
    batch workload with neither gets 0. Returns the rows changed.

    One grouped statement for the workloads with their pods' runs; while a workload
    has neither a forecast nor the retention's days watched, one for its
    namespace's stored history and, where that spans longer, one for its sampled
    hours; one update for up to 20,000 changed workloads (none when none changed).
    """
    window_start = now - POD_RETENTION
    workloads = Workload.objects.filter(
        cluster_id=cluster_id, is_active=True, kind__in=BATCH_KINDS
    )
    if namespace is not None:
        workloads = workloads.filter(namespace=namespace)
    # The pods' runs within the window, joined to their workload (its row and the
    # sums in one statement; a workload without one gets no sum and no count).
    runs = FilteredRelation(
        "pods",
        condition=Q(pods__ran_until__gt=window_start, pods__started_at__isnull=False),
    )
    # Observed from the later of the window's start and the workload's first sight.
    begin = Greatest(F("runs__started_at"), F("first_seen_at"), Value(window_start))
    # Runs over (a pod seen running in this pass is not): they give the mean run.
    over = Q(runs__ran_until__lt=now)
    rows = [
        _BatchRow(*row)
        for row in workloads.annotate(runs=runs)
        .order_by()
        .values("pk")
        .annotate(
            ran=Sum(
                ExpressionWrapper(
                    F("runs__ran_until") - begin, output_field=DurationField()
                )
            ),
            done_s=Sum(
                ExpressionWrapper(
                    F("runs__ran_until") - F("runs__started_at"),
                    output_field=DurationField(),
                ),
                filter=over,
            ),
            done=Count("runs", filter=over),
        )
        .values_list(
            "pk",
            "namespace",
            "first_seen_at",
            "running_hours_month",
            "schedule",
            "ran",
            "done_s",
            "done",
        )
    ]
    forecasts = {
        row.pk: forecast_hours(row.schedule, runs=row.done, ran_s=_seconds(row.done_s))
        for row in rows
    }
    spans = {
        row.pk: (now - max(window_start, row.first_seen_at)).total_seconds()
        for row in rows
    }
    # The history is read only while a batch workload has neither a forecast nor
    # the retention's days watched: for the others its answer cannot count.
    wanted = [
        row
        for row in rows
        if forecasts[row.pk] is None and spans[row.pk] < POD_RETENTION.total_seconds()
    ]
    stored = (
        stored_history(
            cluster_id=cluster_id,
            namespaces={row.namespace for row in wanted},
            since=window_start,
        )
        if wanted
        else {}
    )
    # The history's span: from the back-fill's start to its last sample, so the
    # estimate stands still between two reads of the usage.
    history_spans = {
        w.pk: (
            history.until
            - max(
                window_start,
                w.first_seen_at - timedelta(seconds=history.before_first_sight_s),
            )
        ).total_seconds()
        for w in wanted
        if (history := stored.get(w.namespace)) is not None
    }
    sampled = history_hours(
        [pk for pk, span in history_spans.items() if span > spans[pk]],
        since=window_start,
    )
    changed: list[tuple[int, dict[str, Any]]] = []
    for row in rows:
        span_s, forecast = spans[row.pk], forecasts[row.pk]
        history_span_s = history_spans.get(row.pk, 0.0)
        if forecast is not None:
            hours = forecast
        elif history_span_s > span_s and row.pk in sampled:
            hours = sampled[row.pk] / history_span_s * 3600.0 * HOURS_PER_MONTH
        else:
            ran_s = _seconds(row.ran)
            hours = 0.0 if span_s <= 0 else ran_s / span_s * HOURS_PER_MONTH
        if row.running_hours_month is None or (
            abs(row.running_hours_month - hours) > 1e-6
        ):
            changed.append((row.pk, {"running_hours_month": hours}))
    # A young fleet's hours move every cycle: thousands of rows (two integers and a
    # float each), one statement for up to 20,000 where the backend binds so many.
    update_many(Workload, rows=changed, batch=REWRITE_BATCH)
    changes.note(pk for pk, _ in changed)
    return len(changed)


class _BatchRow(NamedTuple):
    """A batch workload as ``record_running_hours`` reads it, with its pods' runs
    within the window: their time observed (``ran``), and of those over, their
    time from start (``done_s``) and number (``done``)."""

    pk: int
    namespace: str
    first_seen_at: datetime
    running_hours_month: float | None
    schedule: str
    ran: timedelta | None
    done_s: timedelta | None
    done: int


def _seconds(duration: timedelta | None) -> float:
    return max(duration.total_seconds(), 0.0) if duration is not None else 0.0


# The figures ``stored_history`` reads of each namespace, as its statement tags them.
_FIRST_HOUR, _FIRST_SIGHT, _LAST_SAMPLE = "first_hour", "first_sight", "last_sample"


@dataclass(frozen=True)
class StoredHistory:
    """A namespace's stored usage history: how far before a workload's first sight
    it reaches (the first contact's back-fill; 0 for a source that keeps none) and
    the time of its last sample (the ingest's watermark)."""

    before_first_sight_s: float
    until: datetime


def stored_history(
    *, cluster_id: int, namespaces: Collection[str], since: datetime
) -> dict[str, StoredHistory]:
    """``StoredHistory`` of each of ``namespaces`` (of the cluster) with hours stored
    after ``since``: from the namespace's earliest stored hour, its workloads'
    earliest first sight and its latest sample. One statement, the same whichever
    pass (a shard or the whole cluster) asks: three grouped reads as one ``UNION
    ALL``, each row tagged with the figure it holds."""
    if not namespaces:
        return {}
    names = sorted(namespaces)
    path = "container__workload__namespace"
    of_containers = {
        "container__workload__cluster_id": cluster_id,
        f"{path}__in": names,
    }
    # The earliest hour of each container, one probe of its index (usage_hour_once:
    # container, ends_at), not a scan of every hour stored: a fleet keeps hundreds
    # of hours per container (0.1 s for 273,000 hours of 13,673 containers, 0.035 s
    # by probes).
    first_hour = (
        UsageHour.objects.filter(container=OuterRef("pk"), ends_at__gt=since)
        .order_by("ends_at")
        .values("ends_at")[:1]
    )

    def per_namespace(rows: Any, path: str, figure: str, value: Any) -> Any:
        return (
            rows.order_by()
            .values(path)
            .annotate(figure=Value(figure, output_field=CharField()), at=value)
            .values_list("figure", path, "at")
        )

    figures: dict[str, dict[str, datetime]] = {
        _FIRST_HOUR: {},
        _FIRST_SIGHT: {},
        _LAST_SAMPLE: {},
    }
    for figure, namespace, at in per_namespace(
        Container.objects.filter(
            workload__cluster_id=cluster_id, workload__namespace__in=names
        ),
        "workload__namespace",
        _FIRST_HOUR,
        Min(Subquery(first_hour)),
    ).union(
        per_namespace(
            Workload.objects.filter(cluster_id=cluster_id, namespace__in=names),
            "namespace",
            _FIRST_SIGHT,
            Min("first_seen_at"),
        ),
        per_namespace(
            Checkpoint.objects.filter(**of_containers),
            path,
            _LAST_SAMPLE,
            Max("last_sample_at"),
        ),
        all=True,
    ):
        if at is not None:  # a namespace without hours since ``since``
            figures[figure][namespace] = at
    first_seen, last_samples = figures[_FIRST_SIGHT], figures[_LAST_SAMPLE]
    return {
        namespace: StoredHistory(
            before_first_sight_s=max(
                (first_seen[namespace] - (hour - timedelta(hours=1))).total_seconds(),
                0.0,
            ),
            until=last_samples[namespace],
        )
        for namespace, hour in figures[_FIRST_HOUR].items()
        if first_seen.get(namespace) and last_samples.get(namespace)
    }


def history_hours(
    workload_ids: Collection[int], *, since: datetime
) -> dict[int, float]:
    """The pod-hours each of ``workload_ids`` ran in its stored usage history after
    ``since`` (``UsageHour``: one sample a pod a minute; a workload's busiest regular
    container). One statement."""
    sampled: dict[int, float] = {}
    if not workload_ids:
        return sampled
    per_container = (
        UsageHour.objects.filter(
            container__workload_id__in=list(workload_ids), ends_at__gt=since
        )
        .exclude(container__kind=Container.Kind.INIT)
        .order_by()
        .values("container__workload_id", "container_id")
        .annotate(n=Sum("cpu_samples"))
        .values_list("container__workload_id", "n")
    )
    for workload_id, n in per_container:
        pod_hours = (n or 0) * SAMPLE_S / 3600.0
        sampled[workload_id] = max(sampled.get(workload_id, 0.0), pod_hours)
    return sampled


class AppliedResources(NamedTuple):
    """A container's current requests and limits, and where each came from."""

    requests: Resources
    limits: Resources
    template: dict[str, dict[str, int]]
    sources: dict[str, str]  # "requests.cpu" -> Container.Source value


def representative_pods(pods: Sequence[PodInfo]) -> dict[str, PodInfo]:
    """By container name, the pod whose values stand for the workload's: a running
    one first, by name (one pass over the workload's pods for all its containers)."""
    running: dict[str, PodInfo] = {}
    having: dict[str, PodInfo] = {}
    # The first by name of each, without sorting the pods (discovery asks this of
    # every workload every cycle); pod names are unique within a workload.
    for pod in pods:
        name, is_running = pod.name, pod.phase == RUNNING
        for container in pod.containers:
            first = having.get(container.name)
            if first is None or name < first.name:
                having[container.name] = pod
            if is_running:
                first = running.get(container.name)
                if first is None or name < first.name:
                    running[container.name] = pod
    return having | running


def pods_requests(
    pods: Sequence[PodInfo],
) -> dict[str, tuple[float | None, float | None]]:
    """By container name, the mean (cpu millicores, memory bytes) request over the
    pods ``representative_pods`` chooses among: the running ones carrying the
    container, else all that carry it; a resource no pod requests is None. What the
    potential savings count per pod (``Container.pods_request_*``), so a pod
    resized in place counts its own request."""
    # (container, running) -> [cpu sum, cpu pods, memory sum, memory pods]
    sums: dict[tuple[str, bool], list[float]] = {}
    for pod in pods:
        running = pod.phase == RUNNING
        for container in pod.containers:
            row = sums.get((container.name, running))
            if row is None:
                row = sums[(container.name, running)] = [0.0, 0.0, 0.0, 0.0]
            cpu = container.requests.cpu_millicores
            if cpu is not None:
                row[0] += cpu
                row[1] += 1
            memory = container.requests.memory_bytes
            if memory is not None:
                row[2] += memory
                row[3] += 1
    out: dict[str, tuple[float | None, float | None]] = {}
    for (name, running), row in sums.items():
        if not running and (name, True) in sums:
            continue  # the running pods' mean stands
        out[name] = (
            row[0] / row[1] if row[1] else None,
            row[2] / row[3] if row[3] else None,
        )
    return out


# What ``applied_resources`` reads of each amount: the key of its source, and the
# (container, "request" | "limit", resource) LimitRanger would name it by.
_SOURCE_KEYS = (
    ("requests.cpu", "request", CPU),
    ("requests.memory", "request", MEMORY),
    ("limits.cpu", "limit", CPU),
    ("limits.memory", "limit", MEMORY),
)
_FROM_LIMIT_RANGE = Container.Source.LIMIT_RANGE.value
_FROM_TEMPLATE = Container.Source.TEMPLATE.value
_FROM_POD = Container.Source.POD.value


def applied_resources(spec: ContainerSpec, pod: PodInfo | None) -> AppliedResources:
    """What ``spec``'s container carries in the workload's live pods, as ``pod``
    (its ``representative_pods`` entry) carries it.

    Without a live pod the template's values stand (source "template"). With one, a
    value LimitRanger says it set is a LimitRange default, one equal to the
    template's is the template's, and any other was set on the pod (an admission
    webhook, an in-place resize).
    """
    own_requests, own_limits = spec.requests, spec.limits
    template = {"requests": own_requests.to_dict(), "limits": own_limits.to_dict()}
    if pod is None:
        requests, limits = own_requests, own_limits
        set_by_limit_ranger: frozenset[tuple[str, str, str]] = frozenset()
    else:
        current = next(c for c in pod.containers if c.name == spec.name)
        requests, limits = current.requests, current.limits
        set_by_limit_ranger = pod.limit_ranger_set
    sources: dict[str, str] = {}
    for (key, singular, resource), value, own in zip(
        _SOURCE_KEYS,
        (
            requests.cpu_millicores,
            requests.memory_bytes,
            limits.cpu_millicores,
            limits.memory_bytes,
        ),
        (
            own_requests.cpu_millicores,
            own_requests.memory_bytes,
            own_limits.cpu_millicores,
            own_limits.memory_bytes,
        ),
        strict=True,
    ):
        if value is None:
            continue
        if set_by_limit_ranger and (spec.name, singular, resource) in (
            set_by_limit_ranger
        ):
            sources[key] = _FROM_LIMIT_RANGE
        elif value == own:
            sources[key] = _FROM_TEMPLATE
        else:
            sources[key] = _FROM_POD
    return AppliedResources(requests, limits, template, sources)
