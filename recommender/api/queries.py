"""Query parameters and querysets the API views share: pagination, the workload
filters and ordering, workloads.

A bad, empty or repeated query parameter is a 400 naming it, never silently ignored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar, TypeVar

from django.db.models import Model, Prefetch, QuerySet
from django.utils import timezone
from rest_framework import serializers
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

from recommender.api.fields import LabelSelectorField, ModeField, QueryTextField
from recommender.api.workload_rows import FACT_COLUMNS
from recommender.errors import InvalidInput
from recommender.models import (
    Container,
    ProvisioningStatus,
    Workload,
    WorkloadQuerySet,
)
from recommender.services.dashboard import ordering as sorting
from recommender.services.readmodels import label_filter, workload_totals
from recommender.services.readmodels.provisioning import Prices, risk_rules

MAX_PAGE_SIZE = 1000
# The largest ?offset= (19 digits): what the schema declares and the parser takes.
MAX_OFFSET = 10**19 - 1


def single_query_value(request: Request, name: str) -> str | None:
    """The one value of a query parameter, or None; repeated or empty is a 400."""
    values = request.query_params.getlist(name)
    if not values:
        return None
    if len(values) > 1:
        raise InvalidInput(
            f"{name} was given {len(values)} times; give it once", field=name
        )
    if values[0] == "":
        raise InvalidInput(
            f"{name} must not be empty; leave it out instead", field=name
        )
    return values[0]


def _whole_number(name: str, raw: str, minimum: int, maximum: int | None) -> int:
    if (
        re.fullmatch(r"[0-9]{1,19}", raw) is None
        or int(raw) < minimum
        or (maximum is not None and int(raw) > maximum)
    ):
        bound = f" and at most {maximum}" if maximum is not None else ""
        raise InvalidInput(
            f"{name} must be a whole number of at least {minimum}{bound}, not {raw!r}",
            field=name,
        )
    return int(raw)


class Pagination(LimitOffsetPagination):
    """``?limit=`` (default 100, 1 to 1000) and ``?offset=`` (from 0); else a 400."""

    max_limit = MAX_PAGE_SIZE

    def get_limit(self, request: Request) -> int:
        raw = single_query_value(request, self.limit_query_param)
        if raw is None:
            return int(self.default_limit or MAX_PAGE_SIZE)
        return _whole_number(self.limit_query_param, raw, 1, MAX_PAGE_SIZE)

    def get_offset(self, request: Request) -> int:
        raw = single_query_value(request, self.offset_query_param)
        return (
            0
            if raw is None
            else _whole_number(self.offset_query_param, raw, 0, MAX_OFFSET)
        )

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.limit_query_param:
                parameter["schema"].update(minimum=1, maximum=MAX_PAGE_SIZE)
            else:
                parameter["schema"].update(minimum=0, maximum=MAX_OFFSET)
        return parameters


def query_filters(serializer_class: type, request: Request) -> dict[str, Any]:
    """Validated query filters; a bad, empty or repeated value is a 400 naming it."""
    serializer = serializer_class(data=request.query_params)
    for name in serializer.fields:
        single_query_value(request, name)
    serializer.is_valid(raise_exception=True)
    return {k: v for k, v in serializer.validated_data.items() if v not in (None, "")}


class LookupFilterSerializer(serializers.Serializer):
    """Query filters of a list that each narrow it by one lookup: ``lookups`` maps
    every query parameter (a field, which parses and checks its value) to the ORM
    lookup it filters on. Applied by :func:`filtered`."""

    lookups: ClassVar[Mapping[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared = set(cls._declared_fields)
        if declared != set(cls.lookups):
            raise TypeError(
                f"{cls.__name__}: query parameters {sorted(declared)} need one lookup"
                f" each, not {sorted(cls.lookups)}"
            )


_M = TypeVar("_M", bound=Model)


def filtered(
    queryset: QuerySet[_M],
    serializer_class: type[LookupFilterSerializer],
    request: Request,
) -> QuerySet[_M]:
    """``queryset`` narrowed by the query parameters given, each by its lookup; a
    bad, empty or repeated value is a 400 naming it (``query_filters``)."""
    filters = query_filters(serializer_class, request)
    lookups = serializer_class.lookups
    return queryset.filter(**{lookups[name]: value for name, value in filters.items()})


# ``?ordering=``: the one sort vocabulary of the dashboard and the API.
WORKLOAD_ORDERING = sorting.WORKLOAD_ORDERING
workload_order = sorting.workload_order


class WorkloadFilterSerializer(serializers.Serializer):
    """Query filters of the workload list and the export."""

    cluster = QueryTextField(required=False)
    namespace = QueryTextField(required=False)
    kind = serializers.ChoiceField(choices=Workload.Kind.choices, required=False)
    mode = ModeField(required=False)
    status = serializers.ChoiceField(
        choices=list(ProvisioningStatus.LABELS),
        required=False,
        help_text="headline status: under (at risk), over (wasteful), missing, "
        "no-data, within (right-sized)",
    )
    at_risk = serializers.BooleanField(
        required=False,
        default=None,
        allow_null=True,
        help_text="true: recent OOM kills or a material shortfall; false: neither",
    )
    wasteful = serializers.BooleanField(
        required=False,
        default=None,
        allow_null=True,
        help_text="true: monthly savings > 0; false: savings <= 0",
    )
    missing_requests = serializers.BooleanField(
        required=False,
        default=None,
        allow_null=True,
        help_text="true: a container has no CPU or no memory request",
    )
    is_active = serializers.BooleanField(required=False, default=None, allow_null=True)
    search = QueryTextField(
        required=False,
        help_text="name or namespace contains this text, or `namespace/name` "
        "(as the dashboard writes names) contains it",
    )
    label_selector = LabelSelectorField(required=False)
    ordering = serializers.RegexField(
        sorting.ORDERING_PATTERN,
        required=False,
        max_length=sorting.MAX_ORDERING,
        error_messages={"invalid": sorting.ORDERING_ERROR},
        help_text=(
            "comma-separated sort keys, `-` for descending, ties by id: "
            + ", ".join(WORKLOAD_ORDERING)
            + ". Default: cluster, namespace, kind, name. E.g. "
            "`-savings_monthly` (biggest savings first) or `-risk,-savings_monthly` "
            "(riskiest first). A key given again is ignored."
        ),
    )

    def validate_ordering(self, value: str) -> list[str]:
        return sorting.parse_ordering(value) or []


def workload_queryset(
    *, now: datetime | None = None, listed: bool = False
) -> WorkloadQuerySet:
    """Workloads with all their serializer reads, in a constant number of queries:
    the provisioning facts annotated (``Workload.objects.with_provisioning``).
    ``listed``: only workloads of enabled clusters are read (``filter_workloads``),
    so the facts may come from the rows the refresh stores
    (``workload_totals.with_facts``)."""
    prices = Prices.from_settings()
    rules = risk_rules(now or timezone.now())
    workloads = Workload.objects.all()
    return (
        (
            workload_totals.with_facts(workloads, prices=prices, rules=rules)
            if listed
            else workloads.with_provisioning(prices=prices, rules=rules)
        )
        .select_related("cluster", "policy")
        .prefetch_related(
            Prefetch(
                "containers",
                queryset=Container.objects.select_related("latest_recommendation"),
            )
        )
    )


# Filters and sort keys that read Workload.objects.with_provisioning's annotations.
FACT_FILTERS = ("status", "at_risk", "wasteful", "missing_requests")
FACT_ORDERING = tuple(
    key for key, field in WORKLOAD_ORDERING.items() if field in FACT_COLUMNS
)


def needs_facts(filters: dict[str, Any]) -> bool:
    """True when a filter or the ordering reads the provisioning facts, so the whole
    list must be annotated before it is paged. Otherwise only the page is annotated:
    the facts aggregate every container of every workload they cover."""
    ordering = [key.lstrip("-") for key in filters.get("ordering") or []]
    return any(f in filters for f in FACT_FILTERS) or any(
        key in FACT_ORDERING for key in ordering
    )


def filter_workloads(
    queryset: WorkloadQuerySet, filters: dict[str, Any]
) -> WorkloadQuerySet:
    """Apply the cluster/namespace/kind/mode/status/fact/search filters and the
    ordering to a ``workload_queryset()``.

    Workloads of disabled clusters (``Cluster.is_enabled`` false) are never listed.
    """
    queryset = queryset.filter(cluster__is_enabled=True)
    if "cluster" in filters:
        queryset = queryset.filter(cluster__name=filters["cluster"])
    if "namespace" in filters:
        queryset = queryset.filter(namespace=filters["namespace"])
    if "kind" in filters:
        queryset = queryset.filter(kind=filters["kind"])
    if "mode" in filters:
        queryset = queryset.in_mode(filters["mode"])
    if "is_active" in filters:
        queryset = queryset.filter(is_active=filters["is_active"])
    if "status" in filters:
        # The dashboard's headline status (recommender/models/provisioning.py).
        queryset = queryset.with_status(filters["status"])
    if "at_risk" in filters:
        queryset = queryset.at_risk(filters["at_risk"])
    if "wasteful" in filters:
        queryset = queryset.wasteful(filters["wasteful"])
    if "missing_requests" in filters:
        queryset = queryset.missing_requests(filters["missing_requests"])
    if "label_selector" in filters:
        queryset = label_filter.with_labels(queryset, filters["label_selector"])
    if "search" in filters:
        queryset = queryset.search(filters["search"])
    return queryset.order_by(*workload_order(filters.get("ordering")))
