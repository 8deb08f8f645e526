"""Each namespace's monthly savings as the workloads list counts them: the sum of its
shown workloads' own ``savings``, each at its own prices (its nodes', else the list
prices), so the overview's namespace, cluster and fleet savings are the list's,
summed, whatever the nodes cost. As the overview's other totals, a cluster's are
read from what its last refresh stored (the group sums, ``GroupTotals``, at the list
prices they were stored at, plus the few workloads with a stored OOM kill; else
``WorkloadTotals``, summed in SQL) and a cluster never stored yet is computed as the
page loads (summed in Python): a few queries.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.db.models import F, Sum

from recommender.models import Workload
from recommender.services.readmodels import group_totals, workload_totals
from recommender.services.readmodels.provisioning import Prices, risk_rules


@dataclass(frozen=True)
class Savings:
    """``namespace_savings``' sums, and the savings of the workloads it read one by
    one (pk -> savings): the few with a stored OOM kill, which the stored group sums
    leave out (empty unless those sums serve)."""

    namespaces: dict[tuple[str, str], float]
    workloads: dict[int, float]


def namespace_savings(
    *, prices: Prices, now: datetime, complete: bool | None = None
) -> dict[tuple[str, str], float]:
    """{(cluster, namespace): monthly savings} over the shown workloads; whether
    every enabled cluster is stored is ``complete`` when the caller knows
    (``workload_totals.is_complete``), else asked once."""
    return savings(prices=prices, now=now, complete=complete).namespaces


def savings(*, prices: Prices, now: datetime, complete: bool | None = None) -> Savings:
    """``namespace_savings``, with the savings of the workloads summed one by one
    (the overview ranks its OOM-killed workloads by them, as the list does)."""
    if complete is None:
        complete = workload_totals.is_complete()
    rules = risk_rules(now)
    shown = Workload.objects.shown().order_by()
    out: dict[tuple[str, str], float] = defaultdict(float)
    each: dict[int, float] = {}
    stored = shown.filter(cluster__totals_at__isnull=False)
    if group_totals.is_usable(prices=prices, key=None, complete=complete):
        # Every cluster's groups are stored at these prices: summing a row per
        # workload cost 0.1-0.2 s at 50,000 workloads; only the workloads the groups
        # leave out (a stored OOM kill, a few thousand at most) are summed below,
        # each read as a row.
        for cluster, namespace, total in group_totals.namespace_savings():
            out[(cluster, namespace)] += total
        # (The annotation's name, which the type checker does not know of the model.)
        row = ("pk", "cluster__name", "namespace", "savings")
        for pk, cluster, namespace, amount in (
            stored.filter(totals__latest_oom_at__isnull=False)
            .with_stored_provisioning(prices=prices, rules=rules)
            .values_list(*row)
        ):
            each[pk] = float(amount or 0.0)
            out[(cluster, namespace)] += each[pk]
    else:
        for cluster, namespace, total in (
            stored.with_stored_provisioning(prices=prices, rules=rules)
            .values("cluster__name", "namespace")
            .annotate(total=Sum(F("savings")))
            .values_list("cluster__name", "namespace", "total")
        ):
            out[(cluster, namespace)] += float(total or 0.0)
    if complete:
        # Every enabled cluster stored: the query below finds no workload, yet
        # building its annotations alone costs tens of milliseconds a load.
        return Savings(dict(out), each)
    # (The annotation's name, which the type checker does not know of the model.)
    fields = ("cluster__name", "namespace", "savings")
    for cluster, namespace, amount in (
        shown.filter(cluster__totals_at__isnull=True)
        .with_provisioning(prices=prices, rules=rules)
        .values_list(*fields)
    ):
        out[(cluster, namespace)] += float(amount or 0.0)
    return Savings(dict(out), each)
