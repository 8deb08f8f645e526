"""Each workload's stored facts: computed by one function, stored by the refresh with
the namespace totals, read by the lists filtered or sorted by a fact."""
# The workload lists filtered or sorted by a provisioning fact (risk, savings, status,
# missing requests) need every workload's facts before the first page. Computed as the
# page loads (``Workload.objects.with_provisioning``: every container joined with its
# latest recommendation, grouped per workload) that cost 0.4-0.7 s at 100,000
# containers. What those facts sum changes only when a refresh writes, so the refresh
# stores per workload the parts that depend on neither the prices nor the time
# (``WorkloadTotals``: ``STORED_PARTS``, the request-minus-target sums, the shortfall,
# the missing and no-data counts; and the latest OOM kill) inside
# ``namespace_totals.store``: same transaction, same scope, same ``Cluster.totals_at``.
# The lists then join those rows, price the savings and count the recent OOM kills as
# they load (``Workload.objects.with_stored_provisioning``), under the same annotation
# names; while an enabled cluster has no stored rows yet, they compute everything as
# before.

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import models
from django.db.models import Max

from recommender.models import (
    Cluster,
    Container,
    OomKill,
    RiskRules,
    Workload,
    WorkloadTotals,
)
from recommender.models.provisioning import STORED_PARTS, PriceRates, WorkloadQuerySet
from recommender.services.readmodels.provisioning import risk_rules

logger = logging.getLogger(__name__)

# Rows per DELETE ... WHERE pk IN (...) (below SQLite's limit of bound variables) and
# per upsert (on SQLite, bulk_create lowers it to that limit): one statement for all
# the workloads a cycle changed at 100,000 containers (up to about 27,000).
BATCH = 30_000


# WorkloadTotals' columns, in the order ``compute`` gives them.
COLUMNS = (*STORED_PARTS, "latest_oom_at")


# A workload's price source and stored prices (``Parts.price``), as read with it.
PRICE = ("price_source", "price_per_core_hour", "price_per_gib_hour")


@dataclass(frozen=True)
class Parts:
    """One workload's ``COLUMNS`` values (``values``, in that order), where it is
    and what it is priced at (``PRICE``' values): what the namespace totals count of
    it too (namespace_totals.compute)."""

    cluster_id: int
    namespace: str
    is_active: bool
    values: tuple[Any, ...]
    price: tuple[str, float | None, float | None]

    def value(self, column: str) -> Any:
        """One of ``COLUMNS``' values."""
        return self.values[COLUMNS.index(column)]


def latest_kills(
    *,
    cluster_ids: Collection[int],
    namespace: str | None = None,
    workload_ids: Collection[int] | None = None,
) -> dict[int, datetime]:
    """Workload pk -> the latest OOM kill of its regular containers, for the
    workloads of ``cluster_ids`` (or of their ``namespace``; only ``workload_ids``
    when given) with any: one grouped query."""
    # The workloads in a subquery: the ids on the containers' column put them in the
    # container index's condition, which a plan misled by statistics that predate a
    # first contact's inserts probed once per id for each workload of the namespace
    # (8.4 s for a shard's 8,000 workloads; 34 ms once analysed).
    kills = OomKill.objects.filter(
        container__workload__in=scoped(
            cluster_ids=cluster_ids, namespace=namespace, workload_ids=workload_ids
        )
    )
    return dict(
        kills.exclude(container__kind=Container.Kind.INIT)
        .order_by()
        .values("container__workload_id")
        .annotate(at=Max("occurred_at"))
        .values_list("container__workload_id", "at")
    )


def scoped(
    *,
    cluster_ids: Collection[int],
    namespace: str | None = None,
    workload_ids: Collection[int] | None = None,
) -> WorkloadQuerySet:
    """The workloads of ``cluster_ids`` (or of their ``namespace``; only
    ``workload_ids`` when given), active or not: what a store recomputes."""
    workloads = Workload.objects.filter(cluster_id__in=cluster_ids)
    if namespace is not None:
        workloads = workloads.filter(namespace=namespace)
    if workload_ids is not None:
        workloads = workloads.filter(pk__in=list(workload_ids))
    return workloads


# What a workload's ``Parts`` are read from (``parts_of``), after its pk, from a
# queryset ``with_stored_parts``.
PART_COLUMNS = ("cluster_id", "namespace", "is_active", *PRICE, *STORED_PARTS)


def parts_of(row: Sequence[Any], latest_kill: datetime | None) -> Parts:
    """A workload's ``Parts`` from its ``PART_COLUMNS`` values and latest kill."""
    cluster_id, namespace, is_active, source, core, gib, *parts = row
    return Parts(
        cluster_id, namespace, is_active, (*parts, latest_kill), (source, core, gib)
    )


def compute(
    *, cluster_ids: Collection[int], rules: RiskRules, namespace: str | None = None
) -> dict[int, Parts]:
    """Workload pk -> its ``Parts``, for every workload of ``cluster_ids`` (or of
    their ``namespace``), active or not: two grouped queries, whatever the
    clusters."""
    kills = latest_kills(cluster_ids=cluster_ids, namespace=namespace)
    return {
        pk: parts_of(row, kills.get(pk))
        for pk, *row in scoped(cluster_ids=cluster_ids, namespace=namespace)
        .with_stored_parts(rules=rules)
        .order_by()
        .values_list("pk", *PART_COLUMNS)
    }


def store(
    *,
    cluster_id: int,
    now: datetime,
    namespace: str | None = None,
    computed: Mapping[int, Parts] | None = None,
    existing: Mapping[int, tuple[Any, ...]] | None = None,
) -> int:
    """Make the stored rows of ``cluster_id``'s workloads (only ``namespace``'s when
    given) what ``compute`` gives (``computed``, when the caller has it already),
    writing only the rows that differ (from ``existing``, when given: only
    ``computed``'s rows, those not in it all written); returns how many workloads'
    rows were written or deleted. Runs in the caller's transaction
    (``namespace_totals.store``, which holds the cluster's row)."""
    if computed is None:
        computed = compute(
            cluster_ids=[cluster_id], rules=risk_rules(now), namespace=namespace
        )
    values = {pk: parts.values for pk, parts in computed.items()}
    changed, gone = write_changed(
        WorkloadTotals,
        cluster_id=cluster_id,
        namespace=namespace,
        columns=COLUMNS,
        values=values,
        existing=existing,
    )
    logger.info(
        "cluster %s namespace %s: %d of %d workload totals rewritten, %d deleted",
        cluster_id,
        namespace,
        changed,
        len(values),
        gone,
    )
    return changed + gone


def write_changed(
    model: type[models.Model],
    *,
    cluster_id: int,
    namespace: str | None,
    columns: Sequence[str],
    values: Mapping[int, tuple[Any, ...]],
    existing: Mapping[int, tuple[Any, ...]] | None = None,
) -> tuple[int, int]:
    """Make ``model``'s rows (one per workload, keyed ``workload``) of
    ``cluster_id``'s workloads (only ``namespace``'s when given) hold ``values``
    (workload pk -> ``columns``' values), writing only the rows that differ from
    the stored ones (``existing``: as the caller read them); returns how many rows
    were written and how many deleted."""
    if existing is None:
        stored = model._default_manager.filter(workload__cluster_id=cluster_id)
        if namespace is not None:
            stored = stored.filter(workload__namespace=namespace)
        existing = {
            pk: tuple(row) for pk, *row in stored.values_list("workload_id", *columns)
        }
    changed = {pk: row for pk, row in values.items() if existing.get(pk) != row}
    # Rows of a workload no longer in the scope: none, as rows go with their
    # workload, whose cluster and namespace never change.
    gone = [pk for pk in existing if pk not in values]
    for start in range(0, len(gone), BATCH):
        model._default_manager.filter(pk__in=gone[start : start + BATCH]).delete()
    upsert(model, columns=columns, values=changed)
    return len(changed), len(gone)


def upsert(
    model: type[models.Model],
    *,
    columns: Sequence[str],
    values: Mapping[int, tuple[Any, ...]],
) -> None:
    """Write ``values`` (workload pk -> ``columns``' values) to ``model``'s rows (one
    per workload, keyed ``workload``), new and changed ones in one upsert per batch
    (none without values)."""
    model._default_manager.bulk_create(
        [
            model(workload_id=pk, **dict(zip(columns, row, strict=True)))
            for pk, row in values.items()
        ],
        batch_size=BATCH,
        update_conflicts=True,
        unique_fields=["workload"],
        update_fields=list(columns),
    )


def is_complete() -> bool:
    """Whether every enabled cluster has its workloads' rows (``totals_at``)."""
    return not Cluster.objects.filter(is_enabled=True, totals_at__isnull=True).exists()


def with_facts(
    workloads: WorkloadQuerySet,
    *,
    prices: PriceRates,
    rules: RiskRules,
    complete: bool | None = None,
) -> WorkloadQuerySet:
    """``workloads`` (of enabled clusters) annotated as
    ``Workload.objects.with_provisioning`` does: from the stored rows when every
    enabled cluster has them (``complete``, when the caller knows: ``is_complete``),
    else computed over every container."""
    if is_complete() if complete is None else complete:
        return workloads.with_stored_provisioning(prices=prices, rules=rules)
    return workloads.with_provisioning(prices=prices, rules=rules)
