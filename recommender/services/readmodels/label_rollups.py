"""Each workload's rollup amounts: computed by one function, stored by the refresh with
the workload totals, read by the rollups (rollups.py) of every grouping and label
key."""
# A rollup sums per group the workloads' containers, coverage and requested and
# recommended amounts (all replicas), beside their priced, time-dependent facts. Those
# amounts joined every container with its latest recommendation on each request (about 1
# s at 100,000 containers); they change only when a refresh writes, so
# ``namespace_totals.store`` stores them per workload (``WorkloadAmounts``) in its
# transaction and scope, writing only the rows that differ. The rollups read them while
# every enabled cluster's rows are complete (``workload_totals.is_complete``), summed
# per group by the database (``group_sums``), else compute them per workload as they
# load, under the same annotation names either way.

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from django.db.models import Case, Count, F, FloatField, Q, Sum, Value, When
from django.db.models.functions import Coalesce

from recommender.models import (
    Container,
    OomKill,
    ProvisioningFacts,
    RiskRules,
    WorkloadAmounts,
)
from recommender.models.provisioning import (
    PriceRates,
    WorkloadQuerySet,
    billed_request_sql,
    no_data_q,
    pods_billed_sql,
)
from recommender.services.readmodels import workload_totals

# The rollup's annotation -> the stored column.
COLUMNS = {
    "n_containers": "containers",
    "n_covered": "covered",
    "req_cpu": "requested_cpu_millicores",
    "req_memory": "requested_memory_bytes",
    "covered_req_cpu": "covered_requested_cpu_millicores",
    "covered_req_memory": "covered_requested_memory_bytes",
    "rec_cpu": "recommended_cpu_millicores",
    "rec_memory": "recommended_memory_bytes",
}


def computed_amounts() -> dict[str, Any]:
    """Per workload (``COLUMNS``' annotations): containers, coverage, requested and
    recommended amounts (all replicas), over the same join as
    ``Workload.objects.with_provisioning``."""
    prefix = "containers__"
    rec = f"{prefix}latest_recommendation__"
    regular = ~Q(containers__kind=Container.Kind.INIT)
    replicas = pods_billed_sql("")

    def summed(expr: Any, when: Q | None = None) -> Any:
        condition = regular if when is None else regular & when
        return (
            Coalesce(
                Sum(
                    Case(
                        When(condition, then=expr),
                        default=Value(0),
                        output_field=FloatField(),
                    ),
                    output_field=FloatField(),
                ),
                Value(0.0),
            )
            * replicas
        )

    has_cpu = Q(**{f"{rec}target_cpu_millicores__isnull": False})
    has_memory = Q(**{f"{rec}target_memory_bytes__isnull": False})
    # Requested: what the live pods carry (billed_request_sql), as the savings count.
    request_cpu = billed_request_sql(prefix, "request_cpu_millicores")
    request_memory = billed_request_sql(prefix, "request_memory_bytes")
    return {
        "n_containers": Count("containers", filter=regular),
        "n_covered": Count("containers", filter=regular & ~no_data_q(prefix)),
        "req_cpu": summed(request_cpu),
        "req_memory": summed(request_memory),
        "covered_req_cpu": summed(request_cpu, has_cpu),
        "covered_req_memory": summed(request_memory, has_memory),
        "rec_cpu": summed(F(f"{rec}target_cpu_millicores"), has_cpu),
        "rec_memory": summed(F(f"{rec}target_memory_bytes"), has_memory),
    }


def compute(
    *,
    cluster_id: int,
    namespace: str | None = None,
    workload_ids: Collection[int] | None = None,
) -> dict[int, tuple[int, ...]]:
    """Workload pk -> its ``COLUMNS`` values (whole millicores and bytes, as the
    rollups round each workload), for every workload of ``cluster_id`` (or of its
    ``namespace``; only ``workload_ids`` when given), active or not: one grouped
    query."""
    workloads = workload_totals.scoped(
        cluster_ids=[cluster_id], namespace=namespace, workload_ids=workload_ids
    )
    return {
        pk: tuple(round(value or 0) for value in values)
        for pk, *values in workloads.annotate(**computed_amounts())
        .order_by()
        .values_list("pk", *COLUMNS)
    }


def compute_with_parts(
    *,
    cluster_id: int,
    rules: RiskRules,
    kills: Mapping[int, datetime],
    namespace: str | None = None,
    workload_ids: Collection[int] | None = None,
) -> tuple[dict[int, workload_totals.Parts], dict[int, tuple[int, ...]]]:
    """``workload_totals.compute`` (with ``kills``, their ``latest_kills``) and
    ``compute`` of the same workloads, in one grouped query over their containers."""
    parts: dict[int, workload_totals.Parts] = {}
    amounts: dict[int, tuple[int, ...]] = {}
    if workload_ids is not None and not workload_ids:
        return parts, amounts
    workloads = workload_totals.scoped(
        cluster_ids=[cluster_id], namespace=namespace, workload_ids=workload_ids
    )
    split = len(workload_totals.PART_COLUMNS)
    for pk, *values in (
        workloads.with_stored_parts(rules=rules)
        .annotate(**computed_amounts())
        .order_by()
        .values_list("pk", *workload_totals.PART_COLUMNS, *COLUMNS)
    ):
        parts[pk] = workload_totals.parts_of(values[:split], kills.get(pk))
        amounts[pk] = tuple(round(value or 0) for value in values[split:])
    return parts, amounts


def store(
    *,
    cluster_id: int,
    namespace: str | None = None,
    workload_ids: Collection[int] | None = None,
    computed: Mapping[int, tuple[int, ...]] | None = None,
) -> int:
    """Make the stored rows of ``cluster_id``'s workloads (only ``namespace``'s when
    given) what ``compute`` gives (``computed``, when the caller has it already),
    writing only the rows that differ; returns how many were written or deleted.
    With ``workload_ids``, only those workloads' rows, each written. Runs in
    ``namespace_totals.store``'s transaction."""
    if computed is None:
        computed = compute(
            cluster_id=cluster_id, namespace=namespace, workload_ids=workload_ids
        )
    if workload_ids is not None:
        workload_totals.upsert(
            WorkloadAmounts, columns=list(COLUMNS.values()), values=computed
        )
        return len(computed)
    changed, gone = workload_totals.write_changed(
        WorkloadAmounts,
        cluster_id=cluster_id,
        namespace=namespace,
        columns=list(COLUMNS.values()),
        values=computed,
    )
    return changed + gone


def with_amounts(
    workloads: WorkloadQuerySet, *, prices: PriceRates, rules: RiskRules, stored: bool
) -> WorkloadQuerySet:
    """``workloads`` with the provisioning facts (``workload_totals.with_facts``)
    and ``COLUMNS``' annotations: from the stored rows when ``stored``
    (``is_stored``), else computed over every container."""
    if stored:
        return workloads.with_stored_provisioning(prices=prices, rules=rules).annotate(
            **{
                name: Coalesce(F(f"amounts__{column}"), Value(0))
                for name, column in COLUMNS.items()
            }
        )
    return workloads.with_provisioning(prices=prices, rules=rules).annotate(
        **computed_amounts()
    )


def is_stored() -> bool:
    """Whether every enabled cluster has its stored rows (``with_amounts``)."""
    return workload_totals.is_complete()


def group_sums(
    annotated: WorkloadQuerySet,
    group_fields: Sequence[str],
    statuses: Iterable[str],
    rules: RiskRules,
) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Per group of ``annotated`` (``with_amounts`` from the stored rows) by
    ``group_fields``, for the workloads without an OOM kill since ``rules.oom_since``
    (``killed_rows`` gives the others): the group's values and its sums under
    ``RollupGroup``'s names (``statuses``: workloads per headline status), summed by
    the database in one grouped pass over a row per workload, which never counts a
    workload's kills."""
    annotated = annotated.exclude(Q(totals__latest_oom_at__gte=rules.oom_since))
    sums = {
        "workloads": Count("pk"),
        **{
            column: Coalesce(Sum(name), Value(0))
            for name, column in COLUMNS.items()
            if name not in ("n_containers", "n_covered")
        },
        "containers": Coalesce(Sum("n_containers"), Value(0)),
        "covered": Coalesce(Sum("n_covered"), Value(0)),
        "savings": Coalesce(Sum("savings"), Value(0.0), output_field=FloatField()),
        "at_risk": Count("pk", filter=Q(risk__gt=0)),
        "wasteful": Count("pk", filter=Q(savings__gt=0)),
        "missing_requests": Count("pk", filter=Q(missing_count__gt=0)),
    }
    names = list(statuses)
    counts = {
        f"status_{i}": Count("pk", filter=Q(status=s)) for i, s in enumerate(names)
    }
    # (Aliases unlike the annotations they sum, which the filters name.)
    aliased = {f"sum_{name}": value for name, value in sums.items()}
    for row in annotated.order_by().values(*group_fields).annotate(**aliased, **counts):
        yield (
            tuple(row[field] for field in group_fields),
            {
                **{name: row[f"sum_{name}"] for name in sums},
                "statuses": {s: row[f"status_{i}"] for i, s in enumerate(names)},
            },
        )


# ``killed_rows``' values after the group's, as the rollups read a workload's row.
ROW_FIELDS = ("pk", "status", "savings", "risk", "missing_count", *COLUMNS)


def killed_rows(
    annotated: WorkloadQuerySet, group_fields: Sequence[str], rules: RiskRules
) -> list[tuple[Any, ...]]:
    """The workloads of ``annotated`` (``with_amounts`` from the stored rows) with an
    OOM kill since ``rules.oom_since`` (their stored latest kill; a few), each as its
    ``group_fields`` values and ``ROW_FIELDS``: their kills counted in one grouped
    query, risk and status by ``ProvisioningFacts``, the Python rule of the lists'."""
    fields = ("savings", "shortfall", "missing_count", "no_data_count", *COLUMNS)
    rows = list(
        annotated.filter(totals__latest_oom_at__gte=rules.oom_since)
        .order_by()
        .values_list(*group_fields, "pk", *fields)
    )
    keys = len(group_fields)
    kills = dict(
        OomKill.objects.filter(
            container__workload_id__in=[row[keys] for row in rows],
            occurred_at__gte=rules.oom_since,
        )
        .exclude(container__kind=Container.Kind.INIT)
        .order_by()
        .values("container__workload_id")
        .annotate(n=Count("pk"))
        .values_list("container__workload_id", "n")
    )
    out = []
    for row in rows:
        pk, savings, shortfall, missing, no_data, *amounts = row[keys:]
        facts = ProvisioningFacts(
            savings=savings,
            recent_ooms=kills.get(pk, 0),
            shortfall_percent=shortfall,
            missing_requests=missing > 0,
            no_data=no_data > 0,
        )
        out.append(
            (*row[:keys], pk, facts.status, savings, facts.risk, missing, *amounts)
        )
    return out
