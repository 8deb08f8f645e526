"""Read-side use cases of the dashboard: the workloads list and its filter choices.

Everything here reads; nothing writes. Facts, statuses and savings are computed in SQL
(``Workload.objects.with_provisioning``, recommender/models/provisioning.py, where the
definitions are) when a filter or the sort needs them for every row, so the list stays
fast with tens of thousands of workloads; the rows of the page shown get theirs from the
Python form of the same rule.

Risk, waste and missing requests are separate facts: a workload can be wasteful and at
risk at once, and the list filters and sorts by each.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any, cast

from django.core.paginator import Page, Paginator
from django.db.models import Count, Prefetch, QuerySet, Window

from recommender.errors import InvalidInput
from recommender.models import (
    Cluster,
    Container,
    Policy,
    ProvisioningStatus,
    RiskRules,
    Workload,
)
from recommender.models.provisioning import (
    container_facts,
    pods_billed,
    recent_oom_counts,
    workload_facts,
)
from recommender.services.dashboard import ordering as sorting
from recommender.services.readmodels import (
    label_filter,
    namespace_totals,
    workload_totals,
)
from recommender.services.readmodels.provisioning import Prices, risk_rules

logger = logging.getLogger(__name__)

PAGE_SIZE = 50
MAX_PAGE_SIZE = 200

# The sort menu: ``ordering=`` values (the API's vocabulary, services/dashboard/
# ordering.py) and their labels; any other valid ordering works from the address bar.
SORTS = {
    "": "cluster, namespace, kind and name",
    "name": "name",
    "-savings_monthly": "savings (largest first)",
    "-risk,-savings_monthly": "risk (OOM kills, then shortfall)",
}
# The yes/no filters on the separate facts.
FACT_VALUES = ("true", "false")


# --- The workloads list ---------------------------------------------------------------


@dataclass(frozen=True)
class WorkloadFilters:
    """What the list is narrowed to; empty strings mean "any"."""

    cluster: str = ""
    namespace: str = ""
    kind: str = ""
    mode: str = ""
    status: str = ""
    at_risk: str = ""
    wasteful: str = ""
    missing_requests: str = ""
    q: str = ""
    label_selector: str = ""
    ordering: str = ""
    sort: str = ""  # the older spelling: name, savings or risk (LEGACY_SORTS)

    def errors(self) -> dict[str, list[str]]:
        """Each unknown kind, mode, status, fact or sort value, keyed by its parameter
        (the list refuses them rather than silently listing everything)."""
        known = {
            "kind": list(Workload.Kind.values),
            "mode": list(Policy.Mode.values),
            "status": list(ProvisioningStatus.LABELS),
            "at_risk": list(FACT_VALUES),
            "wasteful": list(FACT_VALUES),
            "missing_requests": list(FACT_VALUES),
            "sort": list(sorting.LEGACY_SORTS),
        }
        errors: dict[str, list[str]] = {}
        for name, values in known.items():
            value = getattr(self, name)
            if value and value not in values:
                errors[name] = [
                    f"{value!r} is not a {name}; choose one of {', '.join(values)}"
                ]
        if sorting.parse_ordering(self.ordering) is None:
            errors["ordering"] = [sorting.ORDERING_ERROR]
        try:
            label_filter.parsed_selector(self.label_selector)
        except InvalidInput as exc:
            errors.update(exc.fields)
        return errors

    @property
    def needs_facts(self) -> bool:
        """Whether a filter or the sort reads the provisioning facts."""
        return bool(
            self.status
            or self.at_risk
            or self.wasteful
            or self.missing_requests
            or sorting.orders_by_facts(sorting.parse_ordering(self.ordering))
        )

    @property
    def narrows_by_facts(self) -> bool:
        """Whether a filter on the provisioning facts narrows the list."""
        return bool(
            self.status or self.at_risk or self.wasteful or self.missing_requests
        )

    @property
    def is_filtered(self) -> bool:
        """Whether anything narrows the list."""
        return any(
            (
                self.cluster,
                self.namespace,
                self.kind,
                self.mode,
                self.status,
                self.at_risk,
                self.wasteful,
                self.missing_requests,
                self.q,
                self.label_selector,
            )
        )

    def cleaned(self) -> WorkloadFilters:
        """Drop values that cannot match (an unknown status, fact, sort, kind or
        mode)."""

        def fact(value: str) -> str:
            return value if value in FACT_VALUES else ""

        return WorkloadFilters(
            cluster=self.cluster.strip(),
            namespace=self.namespace.strip(),
            kind=self.kind if self.kind in Workload.Kind.values else "",
            mode=self.mode if self.mode in Policy.Mode.values else "",
            status=self.status if self.status in ProvisioningStatus.LABELS else "",
            at_risk=fact(self.at_risk),
            wasteful=fact(self.wasteful),
            missing_requests=fact(self.missing_requests),
            q=self.q.strip()[:253],
            label_selector=self._valid_selector(),
            ordering=self.effective_ordering(),
        )

    def _valid_selector(self) -> str:
        """``label_selector`` stripped when it parses, else "" (left out)."""
        try:
            label_filter.parsed_selector(self.label_selector)
        except InvalidInput:
            return ""
        return self.label_selector.strip()

    def export_query(self) -> dict[str, str]:
        """The recommendation export's query parameters (``GET
        /api/v1/recommendations/export``) for the rows of this list: the same
        filters, search and order, active workloads only (as the list shows)."""
        cleaned = self.cleaned()
        given = {
            "is_active": "true",
            "cluster": cleaned.cluster,
            "namespace": cleaned.namespace,
            "kind": cleaned.kind,
            "mode": cleaned.mode,
            "status": cleaned.status,
            "at_risk": cleaned.at_risk,
            "wasteful": cleaned.wasteful,
            "missing_requests": cleaned.missing_requests,
            "search": cleaned.q,
            "label_selector": cleaned.label_selector,
            "ordering": cleaned.ordering,
        }
        # The API refuses an empty parameter: what is not set is left out.
        return {"format": "csv", **{k: v for k, v in given.items() if v}}

    def effective_ordering(self) -> str:
        """``ordering`` when valid, else the ordering of a known ``sort``, else ""."""
        if self.ordering and sorting.parse_ordering(self.ordering) is not None:
            return self.ordering
        return sorting.LEGACY_SORTS.get(self.sort, "")


def sort_choices(ordering: str) -> list[tuple[str, str]]:
    """The sort menu, with an ordering typed into the address bar as its own entry."""
    choices = list(SORTS.items())
    if ordering not in SORTS:
        choices.append((ordering, ordering))
    return choices


class _Paginator(Paginator):  # type: ignore[type-arg]
    """A paginator told how to count its rows (``count``), when a cheaper query
    than counting ``object_list`` gives the same number."""

    def __init__(
        self, object_list: Any, per_page: int, *, count: Callable[[], int] | None
    ) -> None:
        super().__init__(object_list, per_page)
        self._count = count

    @cached_property
    def count(self) -> int:
        """The number of rows."""
        return self._count() if self._count is not None else super().count


class _CountedIds:
    """The ids of an ordered queryset for a paginator, whose requested page comes
    with the number of rows in the same query (a window count): a count and the
    page each computed every workload's facts again (about 80 ms each at 65,000
    workloads). Past the end, the rows are counted apart."""

    def __init__(
        self, ids: QuerySet[Workload, int], *, page: int | str, per_page: int
    ) -> None:
        self._ids = ids
        self._per_page = per_page
        try:
            number = max(1, int(page))
        except (TypeError, ValueError):
            number = 1  # as Paginator.get_page: not a number, the first page
        self._start = (number - 1) * per_page
        self._rows: list[tuple[int, int]] | None = None

    def _page_rows(self) -> list[tuple[int, int]]:
        if self._rows is None:
            counted = self._ids.annotate(rows=Window(Count("pk"))).values_list(
                "pk", "rows"
            )
            self._rows = list(counted[self._start : self._start + self._per_page])
        return self._rows

    def count(self) -> int:
        """The number of rows."""
        rows = self._page_rows()
        return rows[0][1] if rows else self._ids.count()

    def __getitem__(self, window: slice) -> list[int]:
        if window.start == self._start and window.stop - self._start <= self._per_page:
            return [pk for pk, _ in self._page_rows()][: window.stop - self._start]
        return list(self._ids[window])


def list_workloads(
    *,
    filters: WorkloadFilters,
    page: int | str = 1,
    page_size: int = PAGE_SIZE,
    now: datetime,
    prices: Prices,
) -> Page[Workload]:
    """One page of active workloads, filtered and sorted, each with its facts.

    Rows carry ``status``, ``savings``, ``recent_ooms``, ``shortfall``, ``risk``,
    ``missing_count`` and ``no_data_count`` (as ``Workload.objects.with_provisioning``
    annotates them; computed by ``_add_facts``), their policy and their containers
    (with latest recommendations) prefetched: a page costs a fixed few queries.
    """
    filters = filters.cleaned()
    rules = risk_rules(now)
    qs = Workload.objects.shown()
    if filters.cluster:
        qs = qs.filter(cluster__name=filters.cluster)
    if filters.namespace:
        qs = qs.filter(namespace=filters.namespace)
    if filters.kind:
        qs = qs.filter(kind=filters.kind)
    if filters.mode:
        qs = qs.in_mode(filters.mode)
    if filters.q:
        qs = qs.search(filters.q)
    if filters.label_selector:
        qs = label_filter.with_labels(qs, filters.label_selector)
    # The facts are aggregates over every row: compute them for all rows only when a
    # filter or the sort needs them; the page's rows are then loaded (annotated) by id.
    order = sorting.workload_order(sorting.parse_ordering(filters.ordering))
    per_page = max(1, min(page_size, MAX_PAGE_SIZE))
    # The number of rows: no fact narrows them when only the sort reads the facts,
    # so they are counted without computing any (a count over the annotated rows
    # computed every workload's facts again: 0.2 s at 65,000 workloads).
    count = None if filters.narrows_by_facts else qs.count
    if filters.needs_facts:
        # From the rows the refresh stores, when complete (workload_totals).
        annotated = workload_totals.with_facts(qs, prices=prices, rules=rules)
        if filters.status:
            annotated = annotated.with_status(filters.status)
        if filters.at_risk:
            annotated = annotated.at_risk(filters.at_risk == "true")
        if filters.wasteful:
            annotated = annotated.wasteful(filters.wasteful == "true")
        if filters.missing_requests:
            annotated = annotated.missing_requests(filters.missing_requests == "true")
        ids: Any = annotated.order_by(*order).values_list("pk", flat=True)
        if count is None:
            ids = _CountedIds(ids, page=page, per_page=per_page)
    elif order == sorting.DEFAULT_WORKLOAD_ORDERING:
        by_cluster = sorting.ByCluster(qs)
        ids, count = by_cluster, by_cluster.count
    else:
        ids = qs.order_by(*order).values_list("pk", flat=True)
    paginator = _Paginator(ids, per_page, count=count)
    id_page = paginator.get_page(page)
    page_ids = list(id_page.object_list)
    rows = {
        w.pk: w
        for w in Workload.objects.filter(pk__in=page_ids)
        .select_related("cluster", "policy")
        .prefetch_related(
            Prefetch(
                "containers",
                queryset=Container.objects.recommended()
                .select_related("latest_recommendation")
                .order_by("position", "name"),
            )
        )
    }
    _add_facts(list(rows.values()), prices=prices, rules=rules)
    # The page's numbering comes from the paginator of ids (a Page reads only its count
    # and page count); the page holds the workloads of those ids.
    return Page(
        [rows[pk] for pk in page_ids if pk in rows],
        id_page.number,
        cast("Paginator[Workload]", paginator),
    )


def _add_facts(workloads: list[Workload], *, prices: Prices, rules: RiskRules) -> None:
    """Set on each loaded workload (its recommended containers prefetched with their
    latest recommendations) the attributes ``with_provisioning`` annotates, from the
    Python form of the rule (``container_facts``/``workload_facts``, held to the SQL
    by tests/services/test_provisioning_parity.py), plus one query for the page's
    recent OOM kills. Annotating the page's rows in SQL re-ran the OOM-kill subquery
    over the whole kill table (about 30 ms at 100,000 containers); the API's plain
    pages do the same (api/workload_rows.py)."""
    kills = recent_oom_counts(
        (c.pk for w in workloads for c in w.containers.all()), rules
    )
    for workload in workloads:
        containers = [
            container_facts(
                c,
                recent_ooms=kills.get(c.pk, 0),
                replicas=pods_billed(workload.replicas, workload.running_hours_month),
                prices=prices.of(workload),
                rules=rules,
            )
            for c in workload.containers.all()
        ]
        facts = workload_facts(containers)
        for name, value in (
            ("status", facts.status),
            ("savings", facts.savings),
            ("recent_ooms", facts.recent_ooms),
            ("shortfall", facts.shortfall_percent),
            ("risk", facts.risk),
            ("missing_count", sum(c.missing_requests for c in containers)),
            ("no_data_count", sum(c.no_data for c in containers)),
        ):
            setattr(workload, name, value)


def filter_choices() -> dict[str, list[str]]:
    """Values for the list's filter drop-downs: clusters and namespaces that exist."""
    clusters = list(
        Cluster.objects.filter(is_enabled=True)
        .order_by("name")
        .values_list("name", flat=True)
    )
    return {
        "clusters": clusters,
        # As the refresh last stored them (namespace_totals.store).
        "namespaces": namespace_totals.namespaces(),
        "kinds": list(Workload.Kind.values),
        "modes": list(Policy.Mode.values),
    }
