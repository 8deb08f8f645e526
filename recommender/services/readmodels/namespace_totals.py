"""Each namespace's overview totals: computed by one function, stored by the refresh,
read by the overview."""
# The overview (overview.py) sums every shown container: requests against the latest
# recommendations, coverage, confidence bands, the workloads missing a request and the
# workloads with a shortfall. At 100,000 containers those passes over the fleet cost
# about 0.3 s on every load of the page, and more once a cycle has rewritten many rows
# and autovacuum has not passed yet (the pages bench, docs/benchmarks.md).
# They change only when a refresh writes, so the refresh computes them after each cycle
# for what it refreshed (the whole cluster, or its shard's namespace) and stores one
# ``NamespaceTotals`` row per namespace with an active workload, counting its workloads
# from the facts of each that the same store writes (workload_totals.py);
# ``Cluster.totals_at`` says a cluster's rows are complete. The overview reads those
# rows, and computes the totals of the other clusters (never refreshed since the rows
# existed) as it loads, with ``compute``: the one definition of the numbers either way.
#
# What they sum is written only by refresh runs (discovery's workloads and containers,
# the cycle's recommendations, a back-fill's), which store the totals after writing,
# recomputing the workloads they noted (changes.py); an edit in the Django admin shows
# on the overview after the first refresh of its cluster in the next hour.
# What depends on the time of the request (the OOM kills of the last week) is never
# stored.

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import (
    Case,
    CharField,
    Count,
    F,
    FloatField,
    IntegerField,
    JSONField,
    Q,
    Sum,
    Value,
    When,
    Window,
)
from django.db.models.functions import Cast, RowNumber

from recommender.models import (
    Cluster,
    Container,
    NamespaceTotals,
    Workload,
)
from recommender.models.bulk import replace_rows
from recommender.models.provisioning import (
    billed_request_sql,
    no_data_q,
    pods_billed_sql,
)
from recommender.services.readmodels import (
    group_totals,
    label_rollups,
    workload_totals,
)
from recommender.services.readmodels.provisioning import (
    PriceRange,
    price_ranges,
    risk_rules,
)

# Per namespace, the containers without a recommendation kept for the overview's list
# ("no recommendation yet": it shows the first ones of the fleet, at most these).
FIRST_WITHOUT_DATA = 10
# Above any real confidence (days of history); the upper end of the "high" band.
MAX_CONFIDENCE = 1e12
# Above this many changed workloads a store recomputes every workload: one pass over
# all of them costs less than looking up so many (at 100,000 containers, 15,000
# changed workloads took 1 s longer than every workload).
MOST_RECOMPUTED = 10_000
# The clusters this process has stored in full: its first store of a cluster
# recomputes everything, so settings read at start (list prices, the rollup label
# key, the currency) are in the stored rows from a restart's first refresh on.
_STORED_IN_FULL: set[int] = set()
# Confidence bands (in days of history, upstream's unit): below 1 the bounds are widened
# a lot.
CONFIDENCE_BANDS = (("low", 1.0), ("medium", 7.0), ("high", float("inf")))


def confidence_band(confidence: float | None) -> str:
    """ "low" (< 1 day), "medium" (< 7 days), "high", or "unknown" (none, negative
    or from ``MAX_CONFIDENCE`` on): the totals' bands (``_band``) in Python."""
    if confidence is None or not 0.0 <= confidence < MAX_CONFIDENCE:
        return "unknown"
    return next(name for name, upper in CONFIDENCE_BANDS if confidence < upper)


def _band(name: str) -> Q:
    """Latest recommendations whose stored confidence (``Recommendation.confidence``)
    lies in band ``name``. Every band has both ends, so a confidence above any real
    one (``MAX_CONFIDENCE``) is in none ("unknown")."""
    bounds = [0.0] + [upper for _, upper in CONFIDENCE_BANDS[:-1]] + [MAX_CONFIDENCE]
    index = [band for band, _ in CONFIDENCE_BANDS].index(name)
    key = "latest_recommendation__confidence"
    return Q(**{f"{key}__gte": bounds[index], f"{key}__lt": bounds[index + 1]})


@dataclass(frozen=True)
class NamespaceFacts:
    """The totals of one namespace of one cluster (``NamespaceTotals``' columns;
    amounts in millicores and bytes, times the workloads' replicas)."""

    cluster_id: int
    cluster: str  # its name
    namespace: str
    workloads: int = 0
    workloads_missing_requests: int = 0
    # Of them, those with a counted shortfall (``shortfalls``' size).
    workloads_short: int = 0
    containers: int = 0
    covered: int = 0
    requested_cpu_millicores: int = 0
    requested_memory_bytes: int = 0
    covered_requested_cpu_millicores: int = 0
    covered_requested_memory_bytes: int = 0
    recommended_cpu_millicores: int = 0
    recommended_memory_bytes: int = 0
    recommendations: int = 0
    confidence_low: int = 0
    confidence_medium: int = 0
    confidence_high: int = 0
    # Workload pk -> its shortfall percent, for those with a counted shortfall.
    shortfalls: Mapping[int, int] = field(default_factory=dict)
    # The first FIRST_WITHOUT_DATA containers without a usable recommendation, as
    # (workload name, container name, container pk), in that order.
    first_without_data: Sequence[tuple[str, str, int]] = ()
    # Its active workloads per price source and the range of their prices
    # (provisioning.PriceRange, by source): what the overview's price mix adds up.
    price_mix: Sequence[PriceRange] = ()


# The columns NamespaceFacts and NamespaceTotals share, but the keys and the lists.
AMOUNTS = tuple(
    f.name
    for f in fields(NamespaceFacts)
    if f.name
    not in (
        "cluster_id",
        "cluster",
        "namespace",
        "shortfalls",
        "first_without_data",
        "price_mix",
    )
)


def compute(
    *,
    clusters: Mapping[int, str],
    now: datetime,
    namespace: str | None = None,
    parts: Mapping[int, workload_totals.Parts] | None = None,
    namespaces: Collection[str] | None = None,
) -> list[NamespaceFacts]:
    """The totals of every namespace with an active workload in ``clusters`` (pk ->
    name; or only ``namespace``, or ``namespaces``), ordered by cluster name and
    namespace, from each workload's ``parts`` (``workload_totals.compute``, computed
    here unless given: its workloads, those missing a request, those with a
    shortfall), one grouped pass over their (non-init) containers (the sums) and,
    in the same statement, the first containers without a recommendation of each
    namespace."""
    if not clusters:
        return []
    if parts is None:
        parts = workload_totals.compute(
            cluster_ids=list(clusters), rules=risk_rules(now), namespace=namespace
        )
    amounts: dict[tuple[int, str], dict[str, Any]] = {}
    shortfalls: dict[tuple[int, str], dict[int, int]] = {}
    prices: dict[tuple[int, str], list[PriceRange]] = {}
    for pk, found in parts.items():
        if not found.is_active or (
            namespaces is not None and found.namespace not in namespaces
        ):
            continue
        key = (found.cluster_id, found.namespace)
        counts = amounts.setdefault(key, {"workloads": 0})
        counts["workloads"] += 1
        source, core, gib = found.price
        prices.setdefault(key, []).append((source, 1, core, core, gib, gib))
        if found.value("missing_count"):
            counts["workloads_missing_requests"] = (
                counts.get("workloads_missing_requests", 0) + 1
            )
        if found.value("shortfall") > 0:
            shortfalls.setdefault(key, {})[pk] = found.value("shortfall")
            counts["workloads_short"] = counts.get("workloads_short", 0) + 1
    containers = Container.objects.recommended().filter(
        workload__cluster_id__in=list(clusters), workload__is_active=True
    )
    if namespace is not None:
        containers = containers.filter(workload__namespace=namespace)
    if namespaces is not None:
        containers = containers.filter(workload__namespace__in=list(namespaces))
    # (rank, workload name, name, pk) of the first containers without data.
    firsts: dict[tuple[int, str], list[tuple[int, str, str, int]]] = {}
    # (A workload that appeared since its parts were read has no count yet. The
    # first containers without data are looked for even when the sums count none:
    # a cycle's statements do not depend on its data; test_refresh_scale.py.)
    for key, sums, first in _container_rows(containers):
        if first is not None:
            amounts.setdefault(key, {})
            firsts.setdefault(key, []).append(first)
            continue
        # Amounts are whole millicores and bytes (a batch workload's running share
        # makes the sums fractional).
        amounts.setdefault(key, {}).update(
            {k: round(v) if isinstance(v, float) else v for k, v in sums.items()}
        )
    return sorted(
        (
            NamespaceFacts(
                cluster_id=cluster_id,
                cluster=clusters[cluster_id],
                namespace=ns,
                shortfalls=shortfalls.get((cluster_id, ns), {}),
                # In their ranks' order (a union of reads keeps none).
                first_without_data=tuple(
                    (workload, name, pk)
                    for _, workload, name, pk in sorted(
                        firsts.get((cluster_id, ns), ())
                    )
                ),
                price_mix=tuple(price_ranges(prices.get((cluster_id, ns), ()))),
                **{name: value or 0 for name, value in values.items()},
            )
            for (cluster_id, ns), values in amounts.items()
        ),
        key=_order,
    )


def _order(facts: NamespaceFacts) -> tuple[str, str]:
    return facts.cluster, facts.namespace


# What the containers are grouped by (``_container_rows``).
KEYS = ("workload__cluster_id", "workload__namespace")


def _container_rows(
    containers: Any,
) -> Iterator[tuple[tuple[int, str], dict[str, Any], tuple[int, str, str, int] | None]]:
    """The rows of ``containers`` per (cluster, namespace) ``key``: ``(key, sums,
    None)``, its sums (``_container_sums``), and ``(key, {}, (rank, workload name,
    name, pk))`` for each of its first containers without a usable recommendation
    (``_first_without_data``). One statement: the union of the two reads."""
    sums = _container_sums()
    # Each read's columns but the keys: its own, then the other's as NULL (of their
    # types: PostgreSQL takes an untyped one in a subquery for text).
    of_sums = {
        f"no_{name}": Cast(Value(None), output_field=sum_.output_field)
        for name, sum_ in sums.items()
    }
    of_first = {
        f"no_{name}": Cast(Value(None), output_field=field)
        for name, field in (
            ("rank", IntegerField()),
            ("workload", CharField()),
            ("name", CharField()),
            ("pk", IntegerField()),
        )
    }
    grouped = (
        containers.order_by()
        .values(*KEYS)
        .annotate(**sums, **of_first)
        .values_list(*KEYS, *sums, *of_first)
    )
    for cluster_id, ns, *values in grouped.union(
        _first_without_data(containers)
        .annotate(**of_sums)
        .values_list(*KEYS, *of_sums, "rank", "workload__name", "name", "pk"),
        all=True,
    ):
        rank, workload, name, pk = values[len(sums) :]
        if pk is None:
            yield (
                (cluster_id, ns),
                dict(zip(sums, values[: len(sums)], strict=True)),
                None,
            )
        else:
            yield (cluster_id, ns), {}, (rank, workload, name, pk)


def _container_sums() -> dict[str, Any]:
    """Per (cluster, namespace), as aggregates over its containers: the containers,
    the covered ones, the requested and recommended amounts times replicas, the
    latest recommendations and their confidence bands. One hash-aggregated pass over
    the containers and their latest recommendations (index-only on PostgreSQL:
    migration 0013)."""
    # Replicas, or a batch workload's running share (models.provisioning.pods_billed).
    replicas = pods_billed_sql("workload__")
    has_target_cpu = Q(latest_recommendation__target_cpu_millicores__isnull=False)
    has_target_mem = Q(latest_recommendation__target_memory_bytes__isnull=False)

    def summed(expr: Any, when: Q | None = None) -> Sum:
        value = expr * replicas
        if when is not None:
            value = Case(When(when, then=value), default=Value(0.0))
        return Sum(value, output_field=FloatField())

    # Requested: what the live pods carry (billed_request_sql), as the savings count.
    cpu_request = billed_request_sql("", "request_cpu_millicores")
    memory_request = billed_request_sql("", "request_memory_bytes")
    return {
        "containers": Count("pk"),
        "covered": Count("pk", filter=~no_data_q()),
        "requested_cpu_millicores": summed(cpu_request),
        "requested_memory_bytes": summed(memory_request),
        "covered_requested_cpu_millicores": summed(cpu_request, has_target_cpu),
        "covered_requested_memory_bytes": summed(memory_request, has_target_mem),
        "recommended_cpu_millicores": summed(
            F("latest_recommendation__target_cpu_millicores"), has_target_cpu
        ),
        "recommended_memory_bytes": summed(
            F("latest_recommendation__target_memory_bytes"), has_target_mem
        ),
        "recommendations": Count("pk", filter=Q(latest_recommendation__isnull=False)),
        **{
            f"confidence_{name}": Count("pk", filter=_band(name))
            for name, _ in CONFIDENCE_BANDS
        },
    }


def _first_without_data(containers: Any) -> Any:
    """The first FIRST_WITHOUT_DATA containers without a usable recommendation
    (no_data_q) of each namespace, by workload name, name and pk (``rank``, from 1):
    ranks only those containers."""
    return (
        containers.no_data()
        .annotate(
            rank=Window(
                RowNumber(),
                partition_by=[F(key) for key in KEYS],
                order_by=[F("workload__name"), F("name"), F("pk")],
            )
        )
        .filter(rank__lte=FIRST_WITHOUT_DATA)
        .order_by()
    )


def store(
    *,
    cluster: Cluster,
    now: datetime,
    namespace: str | None = None,
    changed: Collection[int] | None = None,
) -> int:
    """Compute and store the totals of ``cluster``'s namespaces (only ``namespace``
    when given and the cluster's other rows are complete), and their workloads'
    (``workload_totals``, ``label_rollups``, ``group_totals``); returns how many
    namespace rows were written.

    With ``changed`` (the workloads a refresh changed, changes.py), a store after
    another in the same hour recomputes only those workloads and the namespaces and
    groups they are in; otherwise every workload of the scope, writing only the
    rows that differ.

    Writers of one cluster take turns on its row (the UPDATE below holds it until
    the commit), so the totals stored last were computed after the last writer's
    data was committed (each caller stores after its own writes)."""
    with transaction.atomic():
        of_cluster = Cluster.objects.filter(pk=cluster.pk)
        if namespace is not None and not of_cluster.filter(
            totals_at__isnull=False
        ).update(totals_at=F("totals_at")):
            namespace, changed = None, None  # the first rows: all of them
        if namespace is None:
            hour = now.replace(minute=0, second=0, microsecond=0)
            # The first store of each hour recomputes everything (changes.py).
            if changed is not None and not of_cluster.filter(
                totals_at__gte=hour, totals_at__lt=hour + timedelta(hours=1)
            ).update(totals_at=now):
                changed = None
            if changed is None and not of_cluster.update(totals_at=now):
                return 0  # deleted meanwhile
        rules = risk_rules(now)
        if changed is not None and (
            len(changed) > MOST_RECOMPUTED or cluster.pk not in _STORED_IN_FULL
        ):
            changed = None
        in_full = changed is None and namespace is None
        kills = workload_totals.latest_kills(
            cluster_ids=[cluster.pk], namespace=namespace, workload_ids=changed
        )
        # The workloads' parts (only the changed ones' when known), stored as they
        # are (the lists sorted or filtered by a fact read them) and counted per
        # namespace.
        computed, amounts = label_rollups.compute_with_parts(
            cluster_id=cluster.pk,
            rules=rules,
            kills=kills,
            namespace=namespace,
            workload_ids=changed,
        )
        workload_totals.store(
            cluster_id=cluster.pk,
            now=now,
            namespace=namespace,
            computed=computed,
            # Only the changed workloads' rows, each written.
            existing=None if changed is None else {},
        )
        label_rollups.store(
            cluster_id=cluster.pk,
            namespace=namespace,
            workload_ids=changed,
            computed=amounts,
        )
        touched: set[str] | None = None
        parts: Mapping[int, workload_totals.Parts] = computed
        if changed is not None:
            touched = {computed[pk].namespace for pk in changed if pk in computed}
            if not touched:
                return 0  # nothing changed: every stored row stands
            parts = _stored_parts(cluster.pk, touched)
        facts = compute(
            clusters={cluster.pk: cluster.name},
            now=now,
            namespace=namespace,
            parts=parts,
            namespaces=touched,
        )
        stale = NamespaceTotals.objects.filter(cluster_id=cluster.pk)
        if namespace is not None:
            stale = stale.filter(namespace=namespace)
        if touched is not None:
            # Only a touched namespace left without an active workload has a row
            # to delete; the others' rows are written over.
            stale = stale.filter(
                namespace__in=list(touched - {f.namespace for f in facts})
            )
        else:
            stale = stale.exclude(namespace__in=[f.namespace for f in facts])
        # Both disjoint (a namespace with facts is written over, not deleted): one
        # statement on PostgreSQL.
        replace_rows(
            stale,
            [
                NamespaceTotals(
                    cluster_id=f.cluster_id,
                    namespace=f.namespace,
                    computed_at=now,
                    shortfalls={str(pk): pct for pk, pct in f.shortfalls.items()},
                    first_without_data=[list(first) for first in f.first_without_data],
                    price_mix=[list(found) for found in f.price_mix],
                    **{name: getattr(f, name) for name in AMOUNTS},
                )
                for f in facts
            ],
            conflict=["cluster", "namespace"],
            update=[
                "computed_at",
                "shortfalls",
                "first_without_data",
                "price_mix",
                *AMOUNTS,
            ],
        )
        group_totals.store(
            cluster_id=cluster.pk,
            rules=rules,
            namespace=namespace,
            namespaces=touched,
        )
    if in_full:  # committed
        _STORED_IN_FULL.add(cluster.pk)
    return len(facts)


def _stored_parts(
    cluster_id: int, namespaces: Collection[str]
) -> dict[int, workload_totals.Parts]:
    """The stored ``Parts`` of the active workloads of ``namespaces`` (a workload
    without a row: none)."""
    return {
        pk: workload_totals.Parts(
            cluster_id, ns, True, tuple(values), (source, core, gib)
        )
        for pk, ns, source, core, gib, *values in Workload.objects.filter(
            cluster_id=cluster_id,
            namespace__in=list(namespaces),
            is_active=True,
            totals__isnull=False,
        )
        .order_by()
        .values_list(
            "pk",
            "namespace",
            *workload_totals.PRICE,
            *(f"totals__{column}" for column in workload_totals.COLUMNS),
        )
    }


def namespaces() -> list[str]:
    """The namespaces with a shown workload (active, of an enabled cluster), sorted:
    the stored rows' of clusters that have them (one row per namespace with an
    active workload), the workloads' of the others (a distinct over every shown
    workload cost 60 ms at 50,000 workloads)."""
    stored: list[int] = []
    computed: list[int] = []
    for pk, totals_at in Cluster.objects.filter(is_enabled=True).values_list(
        "pk", "totals_at"
    ):
        (computed if totals_at is None else stored).append(pk)
    found: set[str] = set()
    if stored:
        found.update(
            NamespaceTotals.objects.filter(cluster_id__in=stored)
            .order_by()
            .values_list("namespace", flat=True)
            .distinct()
        )
    if computed:
        found.update(
            Workload.objects.filter(cluster_id__in=computed, is_active=True)
            .order_by()
            .values_list("namespace", flat=True)
            .distinct()
        )
    return sorted(found)


def read(
    *,
    now: datetime,
    clusters: Mapping[int, tuple[str, datetime | None]] | None = None,
    shortfalls: bool = True,
) -> list[NamespaceFacts]:
    """The totals of every namespace of the enabled clusters (``clusters``, pk ->
    (name, ``totals_at``), when the caller has read them), ordered by cluster name
    and namespace: the stored rows of clusters that have them, computed for the
    others. Without ``shortfalls`` the stored rows' shortfalls are left empty (their
    count, ``workloads_short``, stays): tens of thousands of entries at 100,000
    containers, which ``stored_shortfalls`` reads when they are needed."""
    if clusters is None:
        clusters = {
            pk: (name, totals_at)
            for pk, name, totals_at in Cluster.objects.filter(
                is_enabled=True
            ).values_list("pk", "name", "totals_at")
        }
    stored_ids = [pk for pk, (_, at) in clusters.items() if at is not None]
    stored = [
        NamespaceFacts(
            cluster_id=cluster_id,
            cluster=clusters[cluster_id][0],
            namespace=ns,
            shortfalls=_by_pk(by_text or {}),
            first_without_data=tuple(
                (workload, name, pk) for workload, name, pk in first_without_data
            ),
            price_mix=tuple(tuple(found) for found in price_mix),
            **dict(zip(AMOUNTS, values, strict=True)),
        )
        for cluster_id, ns, by_text, first_without_data, price_mix, *values in (
            NamespaceTotals.objects.filter(cluster_id__in=stored_ids).values_list(
                "cluster_id",
                "namespace",
                # (A constant in place of the column: the row's shape stays.)
                "shortfalls" if shortfalls else Value(None, JSONField()),
                "first_without_data",
                "price_mix",
                *AMOUNTS,
            )
        )
    ]
    computed = compute(
        clusters={pk: name for pk, (name, at) in clusters.items() if at is None},
        now=now,
    )
    return sorted(stored + computed, key=_order)


def _by_pk(stored: Mapping[str, int]) -> dict[int, int]:
    """A stored shortfall map (JSON: text keys) by workload pk."""
    return dict(zip(map(int, stored), stored.values(), strict=True))


def stored_shortfalls(cluster_ids: Collection[int]) -> dict[int, int]:
    """Workload pk -> shortfall percent, of every stored namespace of
    ``cluster_ids`` (what ``read`` leaves out without ``shortfalls``): one query."""
    out: dict[int, int] = {}
    for found in NamespaceTotals.objects.filter(
        cluster_id__in=list(cluster_ids)
    ).values_list("shortfalls", flat=True):
        out.update(_by_pk(found))
    return out
