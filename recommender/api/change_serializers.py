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
from recommender.services.actuation import approvals
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


class ResizeChangeListSerializer(serializers.ListSerializer):
    """Reads the rejection reasons of a whole page in one query."""

    def to_representation(self, data: Any) -> list[Any]:
        items = list(data.all() if hasattr(data, "all") else data)
        self.context["rejection_reasons"] = approvals.rejection_reasons(
            c.pk for c in items if c.status == ResizeChange.Status.REJECTED
        )
        return super().to_representation(items)


class ResizeChangeSerializer(serializers.ModelSerializer):
    """A proposed (or decided, or applied) resize of one pod."""

    workload = serializers.SerializerMethodField()
    resources_before = serializers.SerializerMethodField()
    resources_after = serializers.SerializerMethodField()
    observed = serializers.SerializerMethodField()
    decided_by = serializers.SerializerMethodField(
        help_text="who approved or rejected it: a user (a token's owner), a token "
        "without owner as token:<name>, or the policy's automatic approval"
    )
    rejection_reason = serializers.SerializerMethodField(
        help_text="why it was rejected (the operator's reason, or its withdrawal)"
    )
    hpa_changes = serializers.ListField(
        child=serializers.DictField(),
        read_only=True,
        help_text="coordinated HPA mode: the HPA target changes that go with this "
        "resize, one per metric: hpa, index, path (JSON pointer), resource, "
        "container, before and after (MetricTargets as autoscaling/v2 writes them; "
        "before = after: the HPA is already there), reason; [] for a plain resize",
    )

    class Meta:
        model = ResizeChange
        list_serializer_class = ResizeChangeListSerializer
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
            "rejection_reason",
            "snooze",
            "snoozed_until",
            "applied_at",
            "error",
            "approval",
            "pod_uid",
            "attempts",
            "try_later_count",
            "verified_at",
            "observed",
            "hpa_changes",
            "hpa_state",
            "reverted_at",
            "revert_pod",
            "revert_evicted_at",
            "updated_at",
        ]

    def get_decided_by(self, obj: ResizeChange) -> str | None:
        if obj.decided_by is not None:
            return obj.decided_by.get_username()
        return obj.decided_by_label or None

    def get_rejection_reason(self, obj: ResizeChange) -> str | None:
        if obj.status != ResizeChange.Status.REJECTED:
            return None
        reasons = self.context.get("rejection_reasons")
        if reasons is None:
            reasons = approvals.rejection_reasons([obj.pk])
        return str(reasons.get(obj.pk, ""))

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


class BulkDecisionResultSerializer(serializers.Serializer):
    """What a bulk rejection or withdrawal did."""

    decided = serializers.ListField(child=serializers.IntegerField())
    skipped = BulkSkippedSerializer(many=True)


class RejectSerializer(ClosedSerializer):
    """Why a change is rejected (optional, kept in the audit log), and how long the
    same resize is not proposed again."""

    snooze = serializers.ChoiceField(
        choices=ResizeChange.Snooze.choices,
        required=False,
        default=ResizeChange.Snooze.UNTIL_CHANGED,
        help_text="1d, 7d, or until_changed (the default): no new proposal of the "
        "same resize for these containers until then, unless the recommendation "
        "moves by the updater's own threshold",
    )

    reason = StrictCharField(required=False, allow_blank=True, max_length=2000)
