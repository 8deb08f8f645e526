"""POST /api/v1/workloads/{id}/what-if: a workload's last days under another profile.

Answered in the request (200) while its estimated cost (containers x days) is within
``VPAWEB_WHATIF_SYNC_CONTAINER_DAYS``; past it, 202 with ``Location`` naming a job,
``GET /api/v1/what-if-jobs/{job}``: 202 while it runs, then 200 with the same answer, or
the error the request would have given (services/replay/whatif_jobs.py).
"""

from __future__ import annotations

import time
from typing import Any

from django.urls import reverse
from django.utils import timezone
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from recommender import tasks
from recommender.api.auth import CanRead, requester_of
from recommender.api.errors import error_body
from recommender.api.fields import ClosedSerializer
from recommender.api.formats import JSONParser
from recommender.api.policy_serializers import ProfileOverridesField
from recommender.api.views import WorkloadLookupMixin
from recommender.engine import PROFILES
from recommender.errors import NotFound
from recommender.services.access import heavy_jobs
from recommender.services.replay import whatif_jobs
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
    hpa_replicas = serializers.ListField(
        child=serializers.DictField(),
        help_text=(
            "per Utilization metric of the workload's HPAs: the replicas seen and "
            "those it would have run at the requests now and at each profile's targets "
            "(mean and max; docs/replay.md)"
        ),
    )
    timing_s = serializers.DictField(child=serializers.FloatField())


class WhatIfJobSerializer(serializers.Serializer):
    """A what-if running in the background (202): where to poll for its answer."""

    job = serializers.CharField()
    state = serializers.ChoiceField(choices=["queued", "running"])
    url = serializers.CharField(help_text="GET it: 202 while it runs, then 200")


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
        responses={200: WhatIfSerializer, 202: WhatIfJobSerializer},
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
        who = requester_of(request)
        if whatif_jobs.runs_in_background(
            workload_id=workload.pk, days=data.get("days")
        ):
            return self._queue(workload.pk, data, who)
        # Within the requester's budget of expensive requests (429 past it).
        with heavy_jobs.slot(who=who, now_s=time.time()):
            out = what_if(
                workload_id=workload.pk,
                profile=data["profile"],
                overrides=data.get("profile_overrides"),
                days=data.get("days"),
                now=timezone.now(),
            )
        return Response(out)

    def _queue(self, workload_id: int, data: dict[str, Any], who: str) -> Response:
        params = {
            "workload_id": workload_id,
            "profile": data["profile"],
            "overrides": data.get("profile_overrides"),
            "days": data.get("days"),
        }
        token = tasks.start_what_if(params, who=who, now=timezone.now())
        return _job_answer(token, {"state": "queued"})


def _job_answer(token: str, state: dict[str, Any]) -> Response:
    url = reverse("what-if-job", kwargs={"job": token})
    return Response(
        {"job": token, "state": state["state"], "url": url},
        status=202,
        headers={"Location": url, "Retry-After": "1"},
    )


class WhatIfJobView(APIView):
    """A what-if run in the background: its state, then its answer."""

    permission_classes = [CanRead]

    @extend_schema(
        summary="A background what-if: 202 while it runs, then its answer",
        description=(
            "The job a what-if past `VPAWEB_WHATIF_SYNC_CONTAINER_DAYS` answered 202 "
            "with (its `Location`). 202 with `state` queued or running (poll again "
            "after `Retry-After`); 200 with the what-if's answer when done; the "
            "error the request would have given when it failed; 404 once expired "
            "(an hour)."
        ),
        responses={200: WhatIfSerializer, 202: WhatIfJobSerializer},
        tags=["workloads"],
    )
    def get(self, request: Request, job: str) -> Response:
        state = whatif_jobs.stored(job)
        if state is None:
            raise NotFound(f"what-if job {job!r} is unknown or has expired (an hour)")
        if state["state"] == "done":
            return Response(state["result"])
        if state["state"] == "failed":
            error = whatif_jobs.failure(state)
            if error is None:
                return Response(
                    error_body("server_error", state.get("message", "")), status=500
                )
            raise error
        return _job_answer(job, state)
