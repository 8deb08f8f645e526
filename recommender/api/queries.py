"""Query parameters and querysets the API views share: pagination, filters, workloads.

A bad, empty or repeated query parameter is a 400 naming it, never silently ignored.
"""

from __future__ import annotations

import re
from typing import Any

from django.db.models import Prefetch, Q, QuerySet
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

from recommender.errors import InvalidInput
from recommender.models import Container, Workload
from recommender.services.dashboard.provisioning import mode_q, with_status

MAX_PAGE_SIZE = 1000


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
            0 if raw is None else _whole_number(self.offset_query_param, raw, 0, None)
        )

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.limit_query_param:
                parameter["schema"].update(minimum=1, maximum=MAX_PAGE_SIZE)
            else:
                parameter["schema"].update(minimum=0, maximum=10**19 - 1)
        return parameters


def query_filters(serializer_class: type, request: Request) -> dict[str, Any]:
    """Validated query filters; a bad, empty or repeated value is a 400 naming it."""
    serializer = serializer_class(data=request.query_params)
    for name in serializer.fields:
        single_query_value(request, name)
    serializer.is_valid(raise_exception=True)
    return {k: v for k, v in serializer.validated_data.items() if v not in (None, "")}


def workload_queryset() -> QuerySet[Workload]:
    """Workloads with all their serializer reads, in a constant number of queries."""
    return Workload.objects.select_related("cluster", "policy").prefetch_related(
        Prefetch(
            "containers",
            queryset=Container.objects.select_related("latest_recommendation"),
        )
    )


def filter_workloads(
    queryset: QuerySet[Workload], filters: dict[str, Any]
) -> QuerySet[Workload]:
    """Apply the cluster/namespace/kind/mode/status/search filters.

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
        queryset = queryset.filter(mode_q(filters["mode"]))
    if "is_active" in filters:
        queryset = queryset.filter(is_active=filters["is_active"])
    if "status" in filters:
        # The dashboard's statuses and rule (services.dashboard.provisioning), in SQL.
        queryset = with_status(queryset, filters["status"])
    if "search" in filters:
        term = filters["search"]
        queryset = queryset.filter(
            Q(name__icontains=term) | Q(namespace__icontains=term)
        )
    return queryset
