"""The one vocabulary for sorting workloads, shared by the dashboard and the API.

``ordering=`` takes comma-separated keys, ``-`` for descending (``-savings_monthly``,
``-risk,-savings_monthly``); ties are broken by id, so pages never overlap. The
dashboard's older ``sort=`` values stay accepted as aliases (``LEGACY_SORTS``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from django.db.models import Count, QuerySet

if TYPE_CHECKING:
    from recommender.models import Workload

# Sort keys and the fields they order by (``-key`` for descending).
WORKLOAD_ORDERING = {
    "name": "name",
    "namespace": "namespace",
    "cluster": "cluster__name",
    "kind": "kind",
    "replicas": "replicas",
    "savings_monthly": "savings",
    "risk": "risk",
    "recent_ooms": "recent_ooms",
    "shortfall_percent": "shortfall",
    "id": "pk",
}
DEFAULT_WORKLOAD_ORDERING = ["cluster__name", "namespace", "kind", "name", "pk"]
_KEY = "-?(?:" + "|".join(WORKLOAD_ORDERING) + ")"
ORDERING_PATTERN = f"^{_KEY}(?:,{_KEY})*$"
MAX_ORDERING = 400
ORDERING_ERROR = (
    "not a list of sort keys: give comma-separated keys from "
    + ", ".join(WORKLOAD_ORDERING)
    + " (prefix - for descending)"
)
# The dashboard's ``sort=`` values before it spoke ``ordering=``, and their orderings.
LEGACY_SORTS = {
    "name": "name",
    "savings": "-savings_monthly",
    "risk": "-risk,-savings_monthly",
}
# Fields of Workload.objects.with_provisioning's annotations (the facts).
FACT_FIELDS = ("savings", "risk", "recent_ooms", "shortfall")


def parse_ordering(value: str) -> list[str] | None:
    """The keys of an ``ordering=`` value, a key given again dropped; None when it is
    not one (an empty value is the default order, ``[]``)."""
    if value == "":
        return []
    if len(value) > MAX_ORDERING or re.fullmatch(ORDERING_PATTERN, value) is None:
        return None
    keys: list[str] = []
    for key in value.split(","):
        if key.lstrip("-") not in {k.lstrip("-") for k in keys}:
            keys.append(key)
    return keys


def workload_order(ordering: list[str] | None) -> list[str]:
    """The ``order_by`` of parsed ordering keys; ties by id."""
    if not ordering:
        return DEFAULT_WORKLOAD_ORDERING
    fields = []
    for key in ordering:
        field = WORKLOAD_ORDERING[key.lstrip("-")]
        fields.append(f"-{field}" if key.startswith("-") else field)
    if "pk" not in {f.lstrip("-") for f in fields}:
        fields.append("pk")
    return fields


def orders_by_facts(ordering: list[str] | None) -> bool:
    """Whether the ordering reads the provisioning facts."""
    return any(
        WORKLOAD_ORDERING[key.lstrip("-")] in FACT_FIELDS for key in ordering or []
    )


class ByCluster:
    """The ids of ``workloads`` in the default order (``DEFAULT_WORKLOAD_ORDERING``:
    cluster name, then the natural key, then id) for a paginator (the dashboard's
    and the API's), one cluster at a time: the rows of each cluster are counted in
    one grouped query, and a page is read from the clusters it spans, the first and
    the last each in its natural key's index order and those between (each fewer
    rows than a page) in one query. Sorting every workload by its cluster's name to
    cut one page cost 0.1-0.4 s at 50,000 workloads."""

    def __init__(self, workloads: QuerySet[Workload]) -> None:
        self._workloads = workloads
        self._counts: list[tuple[int, int]] | None = None

    def _per_cluster(self) -> list[tuple[int, int]]:
        """(cluster id, rows) of each cluster with rows, by cluster name."""
        if self._counts is None:
            self._counts = [
                (cluster_id, rows)
                for _, cluster_id, rows in self._workloads.order_by()
                .values("cluster__name", "cluster_id")
                .annotate(rows=Count("pk"))
                .order_by("cluster__name")
                .values_list("cluster__name", "cluster_id", "rows")
            ]
        return self._counts

    def count(self) -> int:
        """The number of rows."""
        return sum(rows for _, rows in self._per_cluster())

    def __getitem__(self, window: slice) -> list[int]:
        start, stop = window.start or 0, window.stop
        # (cluster id, its first and last row in the window) of the clusters spanned.
        spanned: list[tuple[int, int, int]] = []
        before = 0  # rows of the clusters before this one
        for cluster_id, rows in self._per_cluster():
            if before >= stop:
                break
            if start < before + rows:
                spanned.append(
                    (cluster_id, max(start - before, 0), min(stop - before, rows))
                )
            before += rows
        if not spanned:
            return []
        order = DEFAULT_WORKLOAD_ORDERING

        def part(cluster_id: int, low: int, high: int) -> list[int]:
            of_cluster = self._workloads.filter(cluster_id=cluster_id)
            return list(
                of_cluster.order_by(*order[1:]).values_list("pk", flat=True)[low:high]
            )

        ids = part(*spanned[0])
        if len(spanned) > 2:
            ids.extend(
                self._workloads.filter(cluster_id__in=[c for c, _, _ in spanned[1:-1]])
                .order_by(*order)
                .values_list("pk", flat=True)
            )
        if len(spanned) > 1:
            ids.extend(part(*spanned[-1]))
        return ids
