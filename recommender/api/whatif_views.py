"""POST /api/v1/workloads/{id}/what-if: a workload's last days under another profile.

Synchronous: the replay of one workload is short (docs/replay.md gives the measured
figures); ``days`` is bounded so a request stays bounded in time and memory.
"""

from __future__ import annotations

import time
from typing import Any

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
from recommender.api.views import WorkloadLookupMixin
from recommender.engine import PROFILES
from recommender.services.access import heavy_jobs
from recommender.services.replay.whatif import DEFAULT_DAYS, MAX_DAYS, what_if


class WhatIfRequestSerializer(ClosedSerializer):
    """The profile to try, its overrides, and how many days of history to replay."""

    profile = serializers.ChoiceField(
        choices=sorted(PROFILES), help_text="the profile to try, e.g. recurring-peaks"
    )
    profile_overrides = ProfileOverridesField(
        required=False,
        help_text="overrides of that profile, checked as the policy editor checks them",
    )
    days = serializers.FloatField(
        required=False,
        min_value=0.01,
        max_value=MAX_DAYS,
        help_text=f"days of history to replay (default {DEFAULT_DAYS:g})",
    )


class WhatIfRowSerializer(serializers.Serializer):
    """One profile's replay metrics (docs/replay.md defines each)."""

    role = serializers.ChoiceField(choices=["current", "candidate"])
    profile = serializers.CharField()
    container_days = serializers.IntegerField()
    memory_slack_mean = serializers.FloatField(allow_null=True)
    memory_slack_median = serializers.FloatField(allow_null=True)
    cpu_slack_mean = serializers.FloatField(allow_null=True)
    cpu_slack_median = serializers.FloatField(allow_null=True)
    memory_overrun_days_pct = serializers.FloatField(allow_null=True)
    memory_over_upper_days_pct = serializers.FloatField(allow_null=True)
    memory_over_1_2_target_days_pct = serializers.FloatField(allow_null=True)
    cpu_above_target_pct = serializers.FloatField(allow_null=True)
    changes_per_day_p50 = serializers.FloatField(allow_null=True)
    changes_per_day_p99 = serializers.FloatField(allow_null=True)
    big_changes_per_day_p50 = serializers.FloatField(allow_null=True)
    big_changes_per_day_p99 = serializers.FloatField(allow_null=True)
    days_without_memory_change_pct = serializers.FloatField(allow_null=True)
    updater_proposals = serializers.IntegerField(
        help_text="resizes upstream's updater would have proposed (see updater_rule)"
    )


class WhatIfContainerSerializer(serializers.Serializer):
    """One container: its proposal counts and hourly chart data."""

    name = serializers.CharField()
    updater_proposals = serializers.DictField(child=serializers.IntegerField())
    chart = serializers.DictField(
        help_text=(
            "t (hourly, ISO 8601 UTC), usage_cpu (millicores) and usage_memory "
            "(bytes): each hour's peak; current/candidate: "
            "{target,lower,upper}_{cpu,memory}"
        )
    )


class WhatIfSerializer(serializers.Serializer):
    """The current profile and the candidate, side by side."""

    workload = serializers.DictField()
    days = serializers.FloatField()
    every_s = serializers.FloatField()
    warmup_s = serializers.FloatField()
    current = serializers.DictField()
    candidate = serializers.DictField()
    rows = WhatIfRowSerializer(many=True)
    containers = WhatIfContainerSerializer(many=True)
    updater_rule = serializers.CharField()
    timing_s = serializers.DictField(child=serializers.FloatField())


class WhatIfView(WorkloadLookupMixin, APIView):
    """Replay the workload's last days from its source under another profile."""

    permission_classes = [CanRead]
    parser_classes = [JSONParser]

    @extend_schema(
        summary="What-if: the workload's last days under another profile",
        description=(
            "Reads the workload's history from its cluster's source (Prometheus or the "
            "simulated cluster), replays it under its current profile and under "
            "`profile` with `profile_overrides`, and returns the replay metrics, the "
            "number of resizes upstream's updater would have proposed, and hourly "
            "chart data. Nothing is stored and nothing is written to the cluster."
        ),
        request=WhatIfRequestSerializer,
        responses=WhatIfSerializer,
        tags=["workloads"],
        examples=[
            OpenApiExample(
                "try recurring-peaks with a 10 % margin over 3 days",
                value={
                    "profile": "recurring-peaks",
                    "profile_overrides": {"margin_fraction": 0.1},
                    "days": 3,
                },
                request_only=True,
            )
        ],
    )
    def post(self, request: Request, **kwargs: Any) -> Response:
        workload = self.get_workload()
        body = WhatIfRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        # Within the requester's budget of expensive requests (429 past it).
        with heavy_jobs.slot(who=requester_of(request), now_s=time.time()):
            out = what_if(
                workload_id=workload.pk,
                profile=data["profile"],
                overrides=data.get("profile_overrides"),
                days=data.get("days"),
                now=timezone.now(),
            )
        return Response(out)
