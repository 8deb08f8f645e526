"""Serializers of the right-sizing endpoints: options, report, static coefficients.

The CI/CD side of the API (``POST /api/v1/rightsize``, ``/api/v1/static-coefficients``);
``serializers.py`` holds the resources.
"""

from __future__ import annotations

from django.core.validators import RegexValidator
from rest_framework import serializers

from recommender.api.fields import (
    ClosedSerializer,
    FactorField,
    QueryTextField,
    StrictCharField,
)
from recommender.api.serializers import WorkloadBriefSerializer
from recommender.models import StaticCoefficient
from recommender.services.advice.rightsize import (
    NAMESPACE_MAX_LENGTH,
    NAMESPACE_PATTERN,
)


class StaticCoefficientSerializer(serializers.ModelSerializer):
    """A namespace's first-deploy coefficient ("" = the global default)."""

    class Meta:
        model = StaticCoefficient
        fields = ["namespace", "cpu_factor", "memory_factor", "updated_at"]


class StaticCoefficientInputSerializer(ClosedSerializer):
    """Set a namespace's coefficient; both factors null removes it."""

    namespace = StrictCharField(
        allow_blank=True,
        max_length=NAMESPACE_MAX_LENGTH,
        trim_whitespace=False,
        validators=[
            RegexValidator(
                NAMESPACE_PATTERN,
                "must be a Kubernetes namespace name (lower-case letters, digits and "
                '"-", starting and ending with a letter or digit), or "" for all',
            )
        ],
        help_text='a namespace (DNS-1123 label), or "" for the global default',
    )
    cpu_factor = FactorField(help_text="in [0.01, 1]; null = leave CPU")
    memory_factor = FactorField(help_text="in [0.01, 1]; null = leave memory")


class RightsizeOptionsSerializer(serializers.Serializer):
    """Query options of ``POST /api/v1/rightsize`` (seed 004's correction rules)."""

    cluster = QueryTextField(
        required=False,
        help_text="where to look workloads up (default: any)",
    )
    namespace = QueryTextField(
        required=False,
        default="default",
        help_text="namespace of manifests without metadata.namespace",
    )
    multiplier = serializers.FloatField(
        required=False,
        default=1.0,
        min_value=0.01,
        max_value=10.0,
        help_text="scale recommendations before capping, e.g. 1.2 for 20 % headroom",
    )
    never_raise = serializers.BooleanField(
        required=False,
        default=False,
        help_text="never set a request above the original one",
    )
    leave_memory = serializers.BooleanField(
        required=False,
        default=False,
        help_text="change CPU only; leave memory as it is",
    )


class ChangeSerializer(serializers.Serializer):
    """One value changed in a manifest, and why."""

    field = serializers.CharField(
        help_text="requests.cpu, requests.memory, limits.cpu, …"
    )
    before = serializers.CharField(allow_null=True)
    after = serializers.CharField()
    reason = serializers.CharField()


class ContainerReportSerializer(serializers.Serializer):
    """What happened to one container."""

    name = serializers.CharField()
    source = serializers.ChoiceField(  # type: ignore[assignment]  # a field named source
        choices=["recommendation", "static_coefficient", "none"]
    )
    reason = serializers.CharField()
    changes = ChangeSerializer(many=True)
    notes = serializers.ListField(child=serializers.CharField())


class HpaChangeSerializer(serializers.Serializer):
    """One HPA metric target rewritten to keep its scaling, and why."""

    field = serializers.CharField(help_text="spec.metrics[i].target")
    before = serializers.DictField(
        help_text='{"type": "Utilization", "averageUtilization": 70}'
    )
    after = serializers.DictField(
        help_text='{"type": "Utilization", "averageUtilization": 140}, or '
        '{"type": "AverageValue", "averageValue": "175m"}'
    )
    reason = serializers.CharField()


class DocumentReportSerializer(serializers.Serializer):
    """What happened to one manifest."""

    path = serializers.CharField(
        help_text="documents[i], or documents[i].items[j] in a List"
    )
    kind = serializers.CharField()
    namespace = serializers.CharField()
    name = serializers.CharField(allow_null=True)
    status = serializers.ChoiceField(
        choices=["rightsized", "unchanged", "passed_through"]
    )
    reason = serializers.CharField(required=False)
    workload = WorkloadBriefSerializer(allow_null=True)
    containers = ContainerReportSerializer(many=True)
    hpa_changes = HpaChangeSerializer(
        many=True,
        required=False,
        help_text="HorizontalPodAutoscaler documents only: the Utilization targets "
        "rewritten because the workload they scale was right-sized in the same "
        "manifests",
    )


class RightsizeSummarySerializer(serializers.Serializer):
    """Counts of a rightsize call."""

    documents = serializers.IntegerField()
    rightsized = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    passed_through = serializers.IntegerField()
    containers_changed = serializers.IntegerField()


class RightsizeResponseSerializer(serializers.Serializer):
    """The manifests to deploy and a report of every change."""

    manifests = serializers.ListField(child=serializers.JSONField())
    documents = DocumentReportSerializer(many=True)
    summary = RightsizeSummarySerializer()
