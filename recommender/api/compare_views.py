"""POST /api/v1/clusters/{cluster}/namespaces/{namespace}/compare-profiles.

Every workload of a namespace replayed under profile A and profile B: the totals and
the workloads B does worst on (``services/replay/namespace_compare.py``).
Synchronous: one replay vectorised over the namespace's containers (docs/replay.md
gives the measured time); ``days`` is bounded.
"""

from __future__ import annotations

import time

from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from recommender.api.auth import CanRead, requester_of
from recommender.api.fields import ClosedSerializer
from recommender.api.formats import JSONParser
from recommender.api.policy_serializers import ProfileOverridesField
from recommender.api.whatif_views import WhatIfRowSerializer
from recommender.engine import PROFILES
from recommender.models import Cluster
from recommender.services.access import heavy_jobs
from recommender.services.replay.namespace_compare import (
    DEFAULT_WORST,
    MAX_WORST,
    compare_namespace,
)
from recommender.services.replay.whatif import DEFAULT_DAYS, MAX_DAYS


class CompareRequestSerializer(ClosedSerializer):
    """Profiles A and B with their overrides, the days to replay, the rows to list."""

    profile_a = serializers.ChoiceField(
        choices=sorted(PROFILES),
        help_text="profile A, e.g. vpa (the current default)",
    )
    profile_b = serializers.ChoiceField(
        choices=sorted(PROFILES), help_text="profile B, e.g. adaptive-margin"
    )
    profile_a_overrides = ProfileOverridesField(required=False)
    profile_b_overrides = ProfileOverridesField(required=False)
    days = serializers.FloatField(
        required=False,
        min_value=0.01,
        max_value=MAX_DAYS,
        help_text=f"days of history to replay (default {DEFAULT_DAYS:g})",
    )
    worst = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_WORST,
        help_text=f"workloads to list, worst for B first (default {DEFAULT_WORST})",
    )


class CompareRowSerializer(WhatIfRowSerializer):
    """One profile's totals over the namespace."""

    role = serializers.ChoiceField(choices=["a", "b"])


class CompareSerializer(serializers.Serializer):
    """The two profiles' totals, then the workloads B does worst on."""

    cluster = serializers.CharField()
    namespace = serializers.CharField()
    days = serializers.FloatField()
    every_s = serializers.FloatField()
    warmup_s = serializers.FloatField()
    a = serializers.DictField()
    b = serializers.DictField()
    rows = CompareRowSerializer(many=True)
    workload_count = serializers.IntegerField()
    container_count = serializers.IntegerField()
    worst = serializers.ListField(
        child=serializers.DictField(),
        help_text=(
            "per workload: container_days, {a,b}_memory_slack_mean, "
            "{a,b}_memory_overrun_days_pct, {a,b}_cpu_slack_mean, "
            "{a,b}_updater_proposals"
        ),
    )
    timing_s = serializers.DictField(child=serializers.FloatField())


class CompareProfilesView(APIView):
    """Replay a namespace's last days under two profiles."""

    permission_classes = [CanRead]
    parser_classes = [JSONParser]

    @extend_schema(
        summary="Compare two profiles over a namespace",
        description=(
            "Reads the namespace's history from its cluster's source, replays every "
            "workload under `profile_a` and `profile_b` (with their overrides) and "
            "returns both profiles' totals and the workloads B does worst on (most "
            "memory overrun days added, then most memory slack added). Nothing is "
            "stored and nothing is written to the cluster."
        ),
        request=CompareRequestSerializer,
        responses=CompareSerializer,
        tags=["clusters"],
        examples=[
            OpenApiExample(
                "vpa against adaptive-margin over 8 days",
                value={"profile_a": "vpa", "profile_b": "adaptive-margin", "days": 8},
                request_only=True,
            )
        ],
    )
    def post(self, request: Request, cluster: str, namespace: str) -> Response:
        found = get_object_or_404(Cluster, name=cluster)
        body = CompareRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        # Within the requester's budget of expensive requests (429 past it).
        with heavy_jobs.slot(who=requester_of(request), now_s=time.time()):
            out = compare_namespace(
                cluster_id=found.pk,
                namespace=namespace,
                profile_a=data["profile_a"],
                profile_b=data["profile_b"],
                overrides_a=data.get("profile_a_overrides"),
                overrides_b=data.get("profile_b_overrides"),
                days=data.get("days"),
                worst=data.get("worst"),
                now=timezone.now(),
            )
        return Response(out)
