"""Read-side use cases of the dashboard: fleet totals, savings, risk, lists.

Everything here reads; nothing writes. Totals, statuses and savings are computed in SQL
so the list and the overview stay fast with tens of thousands of workloads: a workload's
status and savings are aggregates over one join of its containers and their latest
recommendation (through the denormalised ``Container.latest_recommendation``), never a
Python loop over all rows.

Definitions (also in docs/dashboard.md):
- A container is **under-provisioned** when a request is below the recommendation's
  lower bound (or missing while the recommendation has one), **over-provisioned** when a
  request is above the upper bound, **within bounds** otherwise, and has **no data**
  without a recommendation. A workload takes the worst status of its containers: under,
  then over, then no data.
- **Savings** per month = replicas x (request - target) x price x 730 h, summed over the
  resources that have a target; negative savings mean the workload needs more.
- Init containers are left out, as upstream VPA does not recommend for them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from django.core.paginator import Page, Paginator
from django.db.models import Prefetch, QuerySet

from recommender.models import Cluster, Policy, Workload
from recommender.services.dashboard.provisioning import (
    Prices,
    Status,
    annotate_workloads,
    mode_q,
    recommended_containers,
    shown_q,
)

logger = logging.getLogger(__name__)

PAGE_SIZE = 50
MAX_PAGE_SIZE = 200

SORTS = {
    "name": "name",
    "savings": "savings (largest first)",
    "risk": "risk (highest first)",
}


# --- The workloads list ---------------------------------------------------------------


@dataclass(frozen=True)
class WorkloadFilters:
    """What the list is narrowed to; empty strings mean "any"."""

    cluster: str = ""
    namespace: str = ""
    kind: str = ""
    mode: str = ""
    status: str = ""
    q: str = ""
    sort: str = "name"

    def errors(self) -> dict[str, list[str]]:
        """Each unknown kind, mode, status or sort value, keyed by its parameter (the
        list refuses them rather than silently listing everything)."""
        known = {
            "kind": list(Workload.Kind.values),
            "mode": list(Policy.Mode.values),
            "status": list(Status.LABELS),
            "sort": list(SORTS),
        }
        errors: dict[str, list[str]] = {}
        for name, values in known.items():
            value = getattr(self, name)
            if value and value not in values:
                errors[name] = [
                    f"{value!r} is not a {name}; choose one of {', '.join(values)}"
                ]
        return errors

    def cleaned(self) -> WorkloadFilters:
        """Drop values that cannot match (an unknown status, sort, kind or mode)."""
        return WorkloadFilters(
            cluster=self.cluster.strip(),
            namespace=self.namespace.strip(),
            kind=self.kind if self.kind in Workload.Kind.values else "",
            mode=self.mode if self.mode in Policy.Mode.values else "",
            status=self.status if self.status in Status.LABELS else "",
            q=self.q.strip()[:253],
            sort=self.sort if self.sort in SORTS else "name",
        )


def list_workloads(
    *,
    filters: WorkloadFilters,
    page: int | str = 1,
    page_size: int = PAGE_SIZE,
    now: datetime,
    prices: Prices,
) -> Page[Workload]:
    """One page of active workloads, filtered and sorted, each with status and savings.

    Rows carry ``status``, ``savings``, ``recent_ooms``, ``risk``, their policy and
    their containers (with latest recommendations) prefetched: a page costs a fixed few
    queries.
    """
    filters = filters.cleaned()
    qs = Workload.objects.filter(shown_q())
    if filters.cluster:
        qs = qs.filter(cluster__name=filters.cluster)
    if filters.namespace:
        qs = qs.filter(namespace=filters.namespace)
    if filters.kind:
        qs = qs.filter(kind=filters.kind)
    if filters.mode:
        qs = qs.filter(mode_q(filters.mode))
    if filters.q:
        qs = qs.filter(name__icontains=filters.q)
    # Annotations cost a subquery per row: compute them for every row only when the
    # filter or the sort needs them; the page's rows are then loaded (annotated) by id.
    order = {
        "name": ["cluster__name", "namespace", "name", "pk"],
        "savings": ["-savings", "pk"],
        "risk": ["-risk", "-savings", "pk"],
    }[filters.sort]
    ids: QuerySet[Workload, int]
    if filters.status or filters.sort != "name":
        annotated = annotate_workloads(qs, now=now, prices=prices)
        if filters.status:
            annotated = annotated.filter(status=filters.status)
        ids = annotated.order_by(*order).values_list("pk", flat=True)
    else:
        ids = qs.order_by(*order).values_list("pk", flat=True)
    paginator = Paginator(ids, max(1, min(page_size, MAX_PAGE_SIZE)))
    id_page = paginator.get_page(page)
    page_ids = list(id_page.object_list)
    rows = {
        w.pk: w
        for w in annotate_workloads(
            Workload.objects.filter(pk__in=page_ids), now=now, prices=prices
        )
        .select_related("cluster", "policy")
        .prefetch_related(
            Prefetch(
                "containers",
                queryset=recommended_containers()
                .select_related("latest_recommendation")
                .order_by("position", "name"),
            )
        )
    }
    # The page's numbering comes from the paginator of ids (a Page reads only its count
    # and page count); the page holds the workloads of those ids.
    return Page(
        [rows[pk] for pk in page_ids if pk in rows],
        id_page.number,
        cast("Paginator[Workload]", paginator),
    )


def filter_choices() -> dict[str, list[str]]:
    """Values for the list's filter drop-downs: clusters and namespaces that exist."""
    clusters = list(
        Cluster.objects.filter(is_enabled=True)
        .order_by("name")
        .values_list("name", flat=True)
    )
    namespaces = list(
        Workload.objects.filter(shown_q())
        .order_by("namespace")
        .values_list("namespace", flat=True)
        .distinct()
    )
    return {
        "clusters": clusters,
        "namespaces": namespaces,
        "kinds": list(Workload.Kind.values),
        "modes": list(Policy.Mode.values),
    }
