"""Rollups by cluster, namespace, label or kind, and the savings trend (read-only)."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from recommender.api import rollup_serializers as rs
from recommender.api.auth import CanRead
from recommender.api.queries import query_filters
from recommender.services.readmodels.provisioning import Prices
from recommender.services.readmodels.rollups import rollup
from recommender.services.readmodels.savings_trend import savings_trend


class RollupView(APIView):
    """Requests, recommendations, savings and statuses summed by a grouping."""

    permission_classes = [CanRead]

    @extend_schema(
        summary="Totals by cluster, namespace, label (team) or workload kind",
        parameters=[rs.RollupFilterSerializer],
        responses=rs.RollupSerializer,
        tags=["rollups"],
    )
    def get(self, request: Request) -> Response:
        filters = query_filters(rs.RollupFilterSerializer, request)
        result = rollup(
            by=filters["by"],
            key=filters.get("key", ""),
            cluster=filters.get("cluster", ""),
            label_selector=filters.get("label_selector", ""),
            now=timezone.now(),
            prices=Prices.from_settings(),
        )
        return Response(
            rs.RollupSerializer(
                {
                    "by": result.by,
                    "key": result.key,
                    "cluster": result.cluster,
                    "groups": [group.as_dict() for group in result.groups],
                    "total": result.total.as_dict(),
                    "node_pools": result.node_pools,
                    "node_pools_total": result.node_pool_totals,
                }
            ).data
        )


class SavingsTrendView(APIView):
    """The fleet's monthly savings, requests and recommendations over time."""

    permission_classes = [CanRead]

    @extend_schema(
        summary="Savings trend: hourly (up to VPAWEB_SAVINGS_TREND_HOURLY_DAYS) or "
        "daily points",
        parameters=[rs.TrendFilterSerializer],
        responses=rs.TrendSerializer,
        tags=["rollups"],
    )
    def get(self, request: Request) -> Response:
        filters = query_filters(rs.TrendFilterSerializer, request)
        trend = savings_trend(
            now=timezone.now(),
            days=filters.get("days", 7),
            cluster=filters.get("cluster", ""),
            namespace=filters.get("namespace", ""),
        )
        return Response(
            rs.TrendSerializer(
                {
                    "days": trend.days,
                    "resolution": trend.resolution,
                    "points": [point.as_dict() for point in trend.points],
                    "next_point_after": trend.next_point_after,
                }
            ).data
        )
