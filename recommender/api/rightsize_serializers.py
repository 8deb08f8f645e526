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
    QuantityQueryField,
    QueryTextField,
    StrictCharField,
)
from recommender.api.serializers import WorkloadBriefSerializer
from recommender.models import StaticCoefficient
from recommender.services.advice.namespace_patch import SELECTOR_PATTERN
from recommender.services.advice.patches import (
    MAX_VALUES_PATH,
    OUTPUTS,
    VALUES_PATH_PATTERN,
)
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
    """Query options of ``POST /api/v1/rightsize`` (the correction rules)."""

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
    include_short_history = serializers.BooleanField(
        required=False,
        default=False,
        help_text=(
            "the history gate: a recommendation with less history than "
            "VPAWEB_MIN_HISTORY_HOURS is left out (its container unchanged, with a "
            "note), as the admission webhook and the updater leave it; true gives "
            "its value anyway, the container flagged low_confidence"
        ),
    )
    output = serializers.ChoiceField(
        choices=OUTPUTS,
        required=False,
        default="manifests",
        help_text=(
            "manifests: the right-sized manifests (always in the answer); kustomize: "
            "also strategic-merge patches and a kustomization.yaml fragment naming "
            "them (`patches`); helm: also a values fragment with each changed "
            "container's resources at `values_path` (`values`); diff: also a unified "
            "diff against the posted text (`diff`)"
        ),
    )
    values_path = serializers.RegexField(
        VALUES_PATH_PATTERN,
        required=False,
        default="resources",
        max_length=MAX_VALUES_PATH,
        help_text=(
            "output=helm: where the chart's values keep a container's resources, "
            "dot-separated (resources, server.resources, {container}.resources); "
            "{container} and {workload} stand for the names"
        ),
    )
    hpa_values_path = serializers.RegexField(
        VALUES_PATH_PATTERN,
        required=False,
        default="autoscaling",
        max_length=MAX_VALUES_PATH,
        help_text=(
            "output=helm: where the chart's values keep an HPA's targets "
            "(autoscaling, {workload}.autoscaling); an HPA kept in step gets helm "
            "create's targetCPUUtilizationPercentage / "
            "targetMemoryUtilizationPercentage there, or its whole metrics list "
            "when those keys cannot say the change"
        ),
    )
    diff_path = serializers.RegexField(
        r"^[A-Za-z0-9._/-]{1,253}$",
        required=False,
        default="manifests.yaml",
        help_text="output=diff: the file name in the diff's headers (a/… and b/…)",
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
    low_confidence = serializers.BooleanField(
        help_text="written from a recommendation with less history than "
        "VPAWEB_MIN_HISTORY_HOURS (include_short_history=true only)"
    )


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
    notes = serializers.ListField(
        child=serializers.CharField(),
        help_text="why a document was left as it is: an unknown workload, each "
        "container's reason (the history gate, no recommendation, …)",
    )
    workload = WorkloadBriefSerializer(allow_null=True)
    containers = ContainerReportSerializer(many=True)
    hpa_changes = HpaChangeSerializer(
        many=True,
        required=False,
        help_text="HorizontalPodAutoscaler documents only: the Utilization targets "
        "rewritten because the workload they scale was right-sized in the same "
        "manifests",
    )
    warnings = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="HorizontalPodAutoscaler documents only: each metric whose trigger "
        "per pod sits above the new limit of what it measures (the HPA can never "
        "scale out on it)",
    )


class RightsizeSummarySerializer(serializers.Serializer):
    """Counts of a rightsize call."""

    documents = serializers.IntegerField()
    rightsized = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    passed_through = serializers.IntegerField()
    containers_changed = serializers.IntegerField()


class KustomizePatchSetSerializer(serializers.Serializer):
    """Strategic-merge patches and the kustomization.yaml fragment naming them."""

    files = serializers.DictField(
        child=serializers.CharField(),
        help_text="file name (patches/<kind>-<namespace>-<name>.yaml) → its YAML",
    )
    patches = serializers.ListField(
        child=serializers.DictField(child=serializers.CharField()),
        help_text="the kustomization's patches entries: [{path: …}]",
    )
    kustomization = serializers.CharField(
        help_text="a kustomization.yaml fragment (patches:) naming the files"
    )


class RightsizeResponseSerializer(serializers.Serializer):
    """The manifests to deploy and a report of every change."""

    output = serializers.ChoiceField(choices=OUTPUTS)
    manifests = serializers.ListField(child=serializers.JSONField())
    documents = DocumentReportSerializer(many=True)
    summary = RightsizeSummarySerializer()
    patches = KustomizePatchSetSerializer(required=False, help_text="output=kustomize")
    values = serializers.DictField(
        required=False, help_text="output=helm: the values fragment"
    )
    values_yaml = serializers.CharField(
        required=False, help_text="output=helm: the values fragment as YAML"
    )
    diff = serializers.CharField(
        required=False,
        help_text="output=diff: a unified diff against the posted text ('' when "
        "nothing changed)",
    )


class ToleranceSerializer(serializers.Serializer):
    """The drift check's tolerance, per request (defaults from VPAWEB_CHECK_*)."""

    cpu_percent = serializers.FloatField(
        required=False,
        min_value=0,
        max_value=1000,
        help_text="allowed CPU difference, percent of the recommended request "
        "(default VPAWEB_CHECK_CPU_PERCENT, 20)",
    )
    memory_percent = serializers.FloatField(
        required=False,
        min_value=0,
        max_value=1000,
        help_text="allowed memory difference, percent of the recommended request "
        "(default VPAWEB_CHECK_MEMORY_PERCENT, 20)",
    )
    cpu_floor = QuantityQueryField(
        resource="cpu",
        required=False,
        help_text="allowed CPU difference at least this (a quantity such as 50m; "
        "default VPAWEB_CHECK_CPU_FLOOR_MILLICORES, 50m)",
    )
    memory_floor = QuantityQueryField(
        resource="memory",
        required=False,
        help_text="allowed memory difference at least this (a quantity such as "
        "64Mi; default VPAWEB_CHECK_MEMORY_FLOOR_BYTES, 64Mi)",
    )


class CheckOptionsSerializer(ToleranceSerializer):
    """Query options of ``POST /api/v1/check``: where to look, and the tolerance."""

    cluster = QueryTextField(
        required=False, help_text="where to look workloads up (default: any)"
    )
    namespace = QueryTextField(
        required=False,
        default="default",
        help_text="namespace of manifests without metadata.namespace",
    )
    include_short_history = serializers.BooleanField(
        required=False,
        default=False,
        help_text=(
            "the history gate: a recommendation with less history than "
            "VPAWEB_MIN_HISTORY_HOURS is left out (its container unchanged, with a "
            "note), as the admission webhook and the updater leave it; true gives "
            "the value anyway: the container is checked, flagged low_confidence"
        ),
    )


class NamespacePatchOptionsSerializer(ToleranceSerializer):
    """Query options of the namespace's patch set."""

    selector = serializers.RegexField(
        SELECTOR_PATTERN,
        required=False,
        max_length=1000,
        help_text="only workloads whose labels match: key=value or key terms, "
        "comma-separated, all must hold (app.kubernetes.io/part-of=shop,tier)",
    )
    include_short_history = serializers.BooleanField(
        required=False,
        default=False,
        help_text=(
            "the history gate: a recommendation with less history than "
            "VPAWEB_MIN_HISTORY_HOURS is left out (its container unchanged, with a "
            "note), as the admission webhook and the updater leave it; true gives "
            "the value anyway: the container is patched, flagged low_confidence"
        ),
    )


class ResourceVerdictSerializer(serializers.Serializer):
    """One request of a container against its recommended value."""

    resource = serializers.ChoiceField(choices=["cpu", "memory"])
    posted = serializers.CharField(allow_null=True, help_text="null: no request")
    recommended = serializers.CharField()
    allowed_difference = serializers.CharField()
    difference_percent = serializers.FloatField(required=False, allow_null=True)
    change_percent = serializers.FloatField(
        required=False,
        allow_null=True,
        help_text="the change from the request to the recommendation, in percent of "
        "the request (500m -> 203m: -59.4); null without a request",
    )
    verdict = serializers.ChoiceField(choices=["ok", "drift"])
    message = serializers.CharField()


class ContainerVerdictSerializer(serializers.Serializer):
    """One container's verdict."""

    path = serializers.CharField()
    kind = serializers.CharField()
    namespace = serializers.CharField()
    name = serializers.CharField(allow_null=True)
    container = serializers.CharField()
    verdict = serializers.ChoiceField(choices=["ok", "drift", "unchecked"])
    reason = serializers.CharField()
    low_confidence = serializers.BooleanField(
        help_text="checked against a recommendation with less history than "
        "VPAWEB_MIN_HISTORY_HOURS (include_short_history=true only)"
    )
    resources = ResourceVerdictSerializer(
        many=True, help_text="only the requests vpaweb would change"
    )


class CheckSummarySerializer(serializers.Serializer):
    """Containers by verdict."""

    containers = serializers.IntegerField()
    ok = serializers.IntegerField()
    drift = serializers.IntegerField()
    unchecked = serializers.IntegerField()


class CheckResponseSerializer(serializers.Serializer):
    """The drift check: a verdict per container and for the whole request."""

    verdict = serializers.ChoiceField(choices=["ok", "drift", "nothing_checked"])
    exit_code = serializers.ChoiceField(
        choices=[0, 1, 2],
        help_text="0 ok, 1 drift, 2 nothing checked (also in the Vpaweb-Exit-Code "
        "header)",
    )
    message = serializers.CharField(
        required=False,
        help_text="verdict nothing_checked: why no container was checked (an "
        "unknown workload, the history gate, …)",
    )
    tolerance = serializers.DictField()
    summary = CheckSummarySerializer()
    containers = ContainerVerdictSerializer(many=True)


class NamespacePatchSerializer(serializers.Serializer):
    """The patch set of every workload outside tolerance, and its summary."""

    cluster = serializers.CharField()
    namespace = serializers.CharField()
    selector = serializers.CharField()
    tolerance = serializers.DictField()
    checked = CheckSummarySerializer(help_text="every container checked, by verdict")
    workloads = serializers.ListField(
        child=serializers.DictField(),
        help_text="each workload outside tolerance: workload, url (dashboard), "
        "savings_monthly, recent_ooms, containers (their verdicts)",
    )
    savings_monthly = serializers.FloatField()
    patches = KustomizePatchSetSerializer()
    summary_markdown = serializers.CharField(
        help_text="what, why, savings and risk, for a pull request's description"
    )
