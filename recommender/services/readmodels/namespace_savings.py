"""Each namespace's monthly savings as the workloads list counts them: the sum of its
shown workloads' own ``savings``, each at its own prices (its nodes', else the list
prices), so the overview's namespace, cluster and fleet savings are the list's,
summed, whatever the nodes cost. As the overview's other totals, a cluster's are
read from what its last refresh stored (``WorkloadTotals``: summed in SQL) and a
cluster never stored yet is computed as the page loads (summed in Python): two
queries.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from django.db.models import F, Sum

from recommender.models import Workload
from recommender.services.readmodels.provisioning import Prices, risk_rules


def namespace_savings(*, prices: Prices, now: datetime) -> dict[tuple[str, str], float]:
    """{(cluster, namespace): monthly savings} over the shown workloads."""
    rules = risk_rules(now)
    shown = Workload.objects.shown().order_by()
    out: dict[tuple[str, str], float] = defaultdict(float)
    for cluster, namespace, total in (
        shown.filter(cluster__totals_at__isnull=False)
        .with_stored_provisioning(prices=prices, rules=rules)
        .values("cluster__name", "namespace")
        .annotate(total=Sum(F("savings")))
        .values_list("cluster__name", "namespace", "total")
    ):
        out[(cluster, namespace)] += float(total or 0.0)
    # (The annotation's name, which the type checker does not know of the model.)
    fields = ("cluster__name", "namespace", "savings")
    for cluster, namespace, savings in (
        shown.filter(cluster__totals_at__isnull=True)
        .with_provisioning(prices=prices, rules=rules)
        .values_list(*fields)
    ):
        out[(cluster, namespace)] += float(savings or 0.0)
    return dict(out)
