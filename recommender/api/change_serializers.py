"""API serializers of resize changes: the change, its resources, bulk approval and
rejection bodies.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from recommender.api.fields import (
    ClosedSerializer,
    StrictCharField,
)
from recommender.api.serializers import (
    ResourceListSerializer,
    WorkloadBriefSerializer,
    workload_brief,
)
from recommender.engine.resources import Resources
from recommender.models import (
    ResizeChange,
)
from recommender.services.advice.pod_spec import resource_list


def change_resources(raw: dict[str, Any]) -> dict[str, Any]:
    """ResizeChange resources (ints) as quantities: {container: {requests, limits}}."""
    out: dict[str, Any] = {}
    for container, kinds in (raw or {}).items():
        if not isinstance(kinds, dict):
            continue
        out[container] = {}
        for kind in ("requests", "limits"):
            amounts = kinds.get(kind) or {}
            out[container][kind] = resource_list(
                Resources(amounts.get("cpu"), amounts.get("memory"))
            )
    return out


class ChangeResourcesSerializer(serializers.Serializer):
    """One container's requests and limits."""

    requests = ResourceListSerializer()
    limits = ResourceListSerializer()


class ResizeChangeSerializer(serializers.ModelSerializer):
    """A proposed (or decided, or applied) resize of one pod."""

    workload = serializers.SerializerMethodField()
    resources_before = serializers.SerializerMethodField()
    resources_after = serializers.SerializerMethodField()
    observed = serializers.SerializerMethodField()
    decided_by: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )

    class Meta:
        model = ResizeChange
        fields = [
            "id",
            "workload",
            "pod",
            "method",
            "status",
            "resources_before",
            "resources_after",
            "reason",
            "priority",
            "created_at",
            "decided_by",
            "decided_at",
            "applied_at",
            "error",
            "approval",
            "pod_uid",
            "attempts",
            "try_later_count",
            "verified_at",
            "observed",
            "updated_at",
        ]

    @extend_schema_field(WorkloadBriefSerializer)
    def get_workload(self, obj: ResizeChange) -> dict[str, Any]:
        return workload_brief(obj.workload)

    @extend_schema_field(serializers.DictField(child=ChangeResourcesSerializer()))
    def get_resources_before(self, obj: ResizeChange) -> dict[str, Any]:
        return change_resources(obj.resources_before)

    @extend_schema_field(serializers.DictField(child=ChangeResourcesSerializer()))
    def get_resources_after(self, obj: ResizeChange) -> dict[str, Any]:
        return change_resources(obj.resources_after)

    @extend_schema_field(serializers.DictField(child=ChangeResourcesSerializer()))
    def get_observed(self, obj: ResizeChange) -> dict[str, Any]:
        return change_resources(obj.observed or {})


class BulkSkippedSerializer(serializers.Serializer):
    """A change a bulk approval left alone, and why."""

    id = serializers.IntegerField()
    reason = serializers.CharField()


class BulkApproveResultSerializer(serializers.Serializer):
    """What a bulk approval did."""

    approved = serializers.ListField(child=serializers.IntegerField())
    skipped = BulkSkippedSerializer(many=True)


class RejectSerializer(ClosedSerializer):
    """Why a change is rejected (optional, kept in the audit log)."""

    reason = StrictCharField(required=False, allow_blank=True, max_length=2000)
