"""The rollups' sums per namespace, kind and rollup label value: computed by one
function, stored by the refresh with the workloads' rows, read by the rollups of
every grouping but another label key's, and by the overview's namespace savings."""
# Summing a row per workload (WorkloadAmounts and WorkloadTotals joined, priced)
# cost 0.4-1 s per rollup at 50,000 workloads. Those sums change only when a refresh
# writes, but for the workloads with a recent OOM kill (their risk and status count
# kills of the last week) and the list prices (settings). So ``namespace_totals.store``
# stores per (namespace, kind, value of VPAWEB_ROLLUP_LABEL_KEY) the sums over the
# active workloads without any stored kill (``GroupTotals``), at the list prices then
# in force: the same group sums (label_rollups.group_sums) the rollups ran. The
# workloads with a stored kill (a few) are summed as the page loads, as before. While a
# cluster's rows are incomplete, or were stored at other prices or for another key,
# the readers sum every workload as they load.

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from typing import Any

from django.conf import settings
from django.db.models import Sum
from django.db.models.fields.json import KeyTextTransform

from recommender.models import (
    GroupTotals,
    ProvisioningStatus,
    RiskRules,
    Workload,
)
from recommender.models.bulk import replace_rows
from recommender.models.provisioning import PriceRates
from recommender.services.readmodels import label_rollups, workload_totals
from recommender.services.readmodels.provisioning import Prices

# The sums GroupTotals stores, under RollupGroup's names (label_rollups.group_sums).
SUMS = (
    "workloads",
    *label_rollups.COLUMNS.values(),
    "savings",
    "at_risk",
    "wasteful",
    "missing_requests",
)
# What a row is grouped by, and the rollups' group fields that name each.
KEYS = {"namespace": "namespace", "kind": "kind", "label": "group"}


def label_key() -> str:
    """The label the rows are grouped by (VPAWEB_ROLLUP_LABEL_KEY)."""
    return str(settings.ROLLUP_LABEL_KEY)


def compute(
    *,
    cluster_id: int,
    rules: RiskRules,
    prices: PriceRates,
    key: str,
    namespace: str | None = None,
    namespaces: Collection[str] | None = None,
) -> list[dict[str, Any]]:
    """The rows of ``cluster_id``'s active workloads without a stored OOM kill (of
    ``namespace``, or of ``namespaces``, when given), grouped by namespace, kind
    and label ``key``'s value, at ``prices``, from the workloads' stored rows: one
    grouped query."""
    workloads = Workload.objects.filter(
        cluster_id=cluster_id, is_active=True, totals__latest_oom_at__isnull=True
    )
    if namespace is not None:
        workloads = workloads.filter(namespace=namespace)
    if namespaces is not None:
        workloads = workloads.filter(namespace__in=list(namespaces))
    annotated = label_rollups.with_amounts(
        workloads, prices=prices, rules=rules, stored=True
    ).annotate(group=KeyTextTransform(key, "labels"))
    return [
        {
            "namespace": values[0],
            "kind": values[1],
            # (A workload without the label is in the rollups' group "".)
            "label": values[2] or "",
            **{name: summed[name] for name in SUMS},
            "statuses": summed["statuses"],
        }
        for values, summed in label_rollups.group_sums(
            annotated, tuple(KEYS.values()), ProvisioningStatus.LABELS, rules
        )
    ]


def store(
    *,
    cluster_id: int,
    rules: RiskRules,
    namespace: str | None = None,
    namespaces: Collection[str] | None = None,
) -> int:
    """Replace the rows of ``cluster_id`` (only ``namespace``'s, or ``namespaces``',
    when given) with what ``compute`` gives at the list prices and label key in
    force; returns how many rows were written. Runs in ``namespace_totals.store``'s
    transaction, after the workloads' rows (workload_totals, label_rollups)."""
    prices = Prices.from_settings()
    key = label_key()
    rows = compute(
        cluster_id=cluster_id,
        rules=rules,
        prices=prices,
        key=key,
        namespace=namespace,
        namespaces=namespaces,
    )
    stale = GroupTotals.objects.filter(cluster_id=cluster_id)
    if namespace is not None:
        stale = stale.filter(namespace=namespace)
    if namespaces is not None:
        stale = stale.filter(namespace__in=list(namespaces))
    # The stale rows' delete and the insert: one statement on PostgreSQL.
    replace_rows(
        stale,
        [
            GroupTotals(
                cluster_id=cluster_id,
                label_key=key,
                price_per_core_hour=prices.per_core_hour,
                price_per_gib_hour=prices.per_gib_hour,
                **row,
            )
            for row in rows
        ],
    )
    return len(rows)


def is_usable(*, prices: Prices, key: str | None, complete: bool | None = None) -> bool:
    """Whether the stored rows stand for every shown workload without a stored kill
    at ``prices`` (and grouped by label ``key``, when given): every enabled cluster's
    rows are complete (``complete``, when the caller knows:
    ``workload_totals.is_complete``), and none was stored at other prices or for
    another key."""
    if not (workload_totals.is_complete() if complete is None else complete):
        return False
    if key is not None and key != label_key():
        return False
    return (
        not GroupTotals.objects.filter(cluster__is_enabled=True)
        .exclude(
            label_key=label_key(),
            price_per_core_hour=prices.per_core_hour,
            price_per_gib_hour=prices.per_gib_hour,
        )
        .exists()
    )


def group_sums(
    group_fields: Sequence[str], *, cluster: str = ""
) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    """The stored rows of the enabled clusters (of ``cluster`` when given), each as
    its values of the rollups' ``group_fields`` (``cluster__name`` and ``KEYS``'
    names) and its sums under ``RollupGroup``'s names, as label_rollups.group_sums
    gives them (the caller adds up the rows of one group)."""
    rows = GroupTotals.objects.filter(cluster__is_enabled=True)
    if cluster:
        rows = rows.filter(cluster__name=cluster)
    names = {field: key for key, field in KEYS.items()}
    for row in rows.order_by().values("cluster__name", *KEYS, *SUMS, "statuses"):
        yield (
            tuple(row[names.get(field, field)] for field in group_fields),
            {
                **{name: row[name] for name in SUMS},
                "statuses": row["statuses"],
            },
        )


def namespace_savings() -> list[tuple[str, str, float]]:
    """(cluster name, namespace, savings) of the stored rows of the enabled
    clusters, summed per namespace."""
    return [
        (cluster, namespace, float(total or 0.0))
        for cluster, namespace, total in GroupTotals.objects.filter(
            cluster__is_enabled=True
        )
        .order_by()
        .values("cluster__name", "namespace")
        .annotate(total=Sum("savings"))
        .values_list("cluster__name", "namespace", "total")
    ]
