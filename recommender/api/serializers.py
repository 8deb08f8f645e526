"""API serializers: output shapes (documented in the OpenAPI schema) and input checks.

Recommendations use the VPA status format exactly (camelCase, quantities as canonical
Kubernetes strings); everything else is snake_case like the rest of Django.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from recommender.api.fields import (
    ClosedSerializer,
    QueryTextField,
    StrictCharField,
    StrictIntegerField,
)
from recommender.api.queries import LookupFilterSerializer
from recommender.api.rollup_serializers import ClusterFailureSerializer
from recommender.api.workload_rows import template_resources
from recommender.models import (
    Cluster,
    Container,
    Policy,
    ProvisioningStatus,
    Recommendation,
    RefreshRun,
    ResizeChange,
    Workload,
)
from recommender.services.actuation import control, permissions
from recommender.services.actuation.vpa_status import container_recommendation_entry
from recommender.services.advice.pod_spec import resource_list
from recommender.services.operations.cluster_health import cluster_failure
from recommender.services.readmodels.provisioning import per_run, runs_a_month

# The dashboard's headline statuses (recommender/models/provisioning.py):
# under (at risk), over (wasteful), missing, no-data, within. Deleted workloads are
# ``is_active`` false, a separate field/filter.
WORKLOAD_STATUSES = tuple(ProvisioningStatus.LABELS)
MAX_ID = 2**63 - 1


class ResourceListSerializer(serializers.Serializer):
    """A Kubernetes ResourceList: absent resources are left out."""

    cpu = serializers.CharField(
        required=False, help_text="CPU quantity, e.g. `250m` or `2`"
    )
    memory = serializers.CharField(
        required=False, help_text="memory quantity, e.g. `256Mi` or `1Gi`"
    )


class ContainerRecommendationSerializer(serializers.Serializer):
    """One ``status.recommendation.containerRecommendations[]`` entry of a VPA."""

    containerName = serializers.CharField()
    target = ResourceListSerializer()
    lowerBound = ResourceListSerializer(required=False)
    upperBound = ResourceListSerializer(required=False)
    uncappedTarget = ResourceListSerializer(required=False)


class RecommendedPodResourcesSerializer(serializers.Serializer):
    """``status.recommendation`` of a VPA object."""

    containerRecommendations = ContainerRecommendationSerializer(many=True)


def recommendation_entry(name: str, rec: Recommendation) -> dict[str, Any]:
    """A stored recommendation as a containerRecommendations entry (the same entry
    vpaweb writes into the status of VPA objects naming it)."""
    return container_recommendation_entry(name, rec)


class WritePathSerializer(serializers.Serializer):
    """One way vpaweb writes to a cluster, and whether it may."""

    path = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]  # a field, not Field.label
    allowed = serializers.BooleanField(
        allow_null=True, help_text="null: not checked yet (or actuation not allowed)"
    )
    reason = serializers.CharField(help_text="why it is missing, as the review said")
    stopped_until = serializers.DateTimeField(
        allow_null=True, help_text="stopped after a 403 until then (back-off)"
    )
    error = serializers.CharField(help_text="the 403's message")


class ClusterSerializer(serializers.ModelSerializer):
    """A cluster, how many workloads vpaweb knows in it, which namespaces it reads and
    whether its refreshes are failing."""

    workload_count = serializers.IntegerField(read_only=True)
    write_paths = serializers.SerializerMethodField(
        help_text="each way vpaweb writes to the cluster: permitted or missing "
        "(SelfSubjectAccessReview, while actuation is allowed), and stopped after a "
        "403 until when"
    )
    refresh_failure = serializers.SerializerMethodField(
        help_text="set while the cluster's latest refresh failed: the error and "
        "since when; null once a refresh succeeds"
    )
    write_block_reason = serializers.SerializerMethodField(
        help_text="why the updater writes nothing to this cluster now: the kill "
        "switch, updates paused for the cluster, or dry run; null when none holds"
    )

    class Meta:
        model = Cluster
        fields = [
            "id",
            "name",
            "kind",
            "context",
            "is_enabled",
            "last_discovered_at",
            "created_at",
            "workload_count",
            "vpa_objects_without_target",
            "oom_history_missing_since",
            "namespace_selector",
            "refresh_failure",
            "updates_paused",
            "write_block_reason",
            "actuation_allowed",
            "write_paths",
        ]
        read_only_fields = [
            "vpa_objects_without_target",
            "oom_history_missing_since",
            "namespace_selector",
            "updates_paused",
            "actuation_allowed",
        ]

    @extend_schema_field(WritePathSerializer(many=True))
    def get_write_paths(self, obj: Cluster) -> list[dict[str, Any]]:
        return [p.as_dict() for p in permissions.write_paths(obj)]

    @extend_schema_field(ClusterFailureSerializer(allow_null=True))
    def get_refresh_failure(self, obj: Cluster) -> dict[str, Any] | None:
        failure = cluster_failure(obj)
        if failure is None:
            return None
        return dict(ClusterFailureSerializer(failure.as_dict()).data)

    def get_write_block_reason(self, obj: Cluster) -> str | None:
        if "kill_switch" not in self.context:  # read once for a whole list
            self.context["kill_switch"] = control.kill_switch_reason()
        return control.cluster_block_reason(
            obj, kill_switch=self.context["kill_switch"]
        )


class LatestRecommendationSerializer(serializers.Serializer):
    """A container's latest recommendation, in VPA quantities."""

    created_at = serializers.DateTimeField()
    target = ResourceListSerializer()
    lowerBound = ResourceListSerializer()
    upperBound = ResourceListSerializer()
    uncappedTarget = ResourceListSerializer()


class TemplateResourcesSerializer(serializers.Serializer):
    """The pod template's own requests and limits."""

    requests = ResourceListSerializer()
    limits = ResourceListSerializer()


class ContainerSerializer(serializers.ModelSerializer):
    """A container: the requests and limits its live pods carry (LimitRanger's
    defaults included), where each came from, the template's own values, and its
    latest recommendation."""

    requests = serializers.SerializerMethodField()
    limits = serializers.SerializerMethodField()
    sources = serializers.SerializerMethodField()
    template = serializers.SerializerMethodField()
    recommendation = serializers.SerializerMethodField()

    class Meta:
        model = Container
        fields = [
            "name",
            "kind",
            "position",
            "requests",
            "limits",
            "sources",
            "template",
            "recommendation",
        ]

    @extend_schema_field(
        serializers.DictField(
            child=serializers.ChoiceField(choices=Container.Source.values),
            help_text='e.g. {"requests.cpu": "limitrange", "limits.memory": '
            '"template"}: template, limitrange (a LimitRange default the API server '
            "filled in) or pod (set on the pod after the template: a webhook, an "
            "in-place resize)",
        )
    )
    def get_sources(self, obj: Container) -> dict[str, str]:
        return dict(obj.resource_sources or {})

    @extend_schema_field(TemplateResourcesSerializer)
    def get_template(self, obj: Container) -> dict[str, dict[str, str]]:
        return template_resources(obj.template_resources)

    @extend_schema_field(ResourceListSerializer)
    def get_requests(self, obj: Container) -> dict[str, str]:
        return resource_list(obj.requests)

    @extend_schema_field(ResourceListSerializer)
    def get_limits(self, obj: Container) -> dict[str, str]:
        return resource_list(obj.limits)

    @extend_schema_field(LatestRecommendationSerializer(allow_null=True))
    def get_recommendation(self, obj: Container) -> dict[str, Any] | None:
        rec = obj.latest_recommendation
        if rec is None:
            return None
        entry = recommendation_entry(obj.name, rec)
        del entry["containerName"]
        return {
            "created_at": serializers.DateTimeField().to_representation(rec.created_at),
            **entry,
        }


class WorkloadBriefSerializer(serializers.Serializer):
    """A workload's id and natural key."""

    id = serializers.IntegerField()
    cluster = serializers.CharField()
    namespace = serializers.CharField()
    kind = serializers.CharField()
    name = serializers.CharField()


def workload_brief(workload: Workload) -> dict[str, Any]:
    """The brief form of a workload (its cluster must be loaded)."""
    return {
        "id": workload.pk,
        "cluster": workload.cluster.name,
        "namespace": workload.namespace,
        "kind": workload.kind,
        "name": workload.name,
    }


class HpaConflictSerializer(serializers.Serializer):
    """An HPA scaling the workload on resources its policy also controls."""

    name = serializers.CharField(help_text="The HorizontalPodAutoscaler's name.")
    resources = serializers.ListField(
        child=serializers.CharField(),
        help_text='Resources ("cpu", "memory") the HPA scales on that the policy '
        "controls.",
    )
    metrics = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text='its metrics on those resources: {"resource", "container", '
        '"target_type", "average_utilization", "average_value" (millicores or '
        "bytes)}",
    )


class WorkloadSerializer(serializers.ModelSerializer):
    """A workload with its policy mode, provisioning facts and containers.

    The facts are the annotations of ``api.queries.workload_queryset()``
    (``Workload.objects.with_provisioning``): risk, waste and missing requests apart,
    as on the dashboard.
    """

    cluster: serializers.SlugRelatedField[Cluster] = serializers.SlugRelatedField(
        slug_field="name", read_only=True
    )
    hpa_conflicts = HpaConflictSerializer(many=True, read_only=True)
    status = serializers.ChoiceField(
        choices=WORKLOAD_STATUSES,
        read_only=True,
        help_text=(
            "headline status: under (at risk), else over (wasteful), else missing "
            "(a request is missing), else no-data, else within (right-sized); the "
            "separate facts are at_risk, wasteful and missing_requests"
        ),
    )
    savings_monthly = serializers.SerializerMethodField(
        help_text=(
            "monthly savings of moving every container's requests to its target, "
            "all replicas (a Job or CronJob: its running_hours_month), at the prices "
            "of price_source, in VPAWEB_CURRENCY; negative when the targets cost "
            "more; as on the dashboard"
        )
    )
    runs_a_month = serializers.SerializerMethodField(
        help_text="CronJobs: the runs a month of the schedule; null otherwise"
    )
    savings_per_run = serializers.SerializerMethodField(
        help_text="CronJobs: savings_monthly over runs_a_month; null otherwise"
    )
    risk = serializers.IntegerField(
        read_only=True,
        help_text=(
            "risk score: 1000 x OOM kills of the last 7 days + shortfall_percent; "
            "0 = not at risk"
        ),
    )
    recent_ooms = serializers.IntegerField(
        read_only=True, help_text="OOM kills of the last 7 days, all containers"
    )
    shortfall_percent = serializers.IntegerField(
        source="shortfall",
        read_only=True,
        help_text=(
            "the largest request shortfall below its usage floor (the lower bound "
            "without the pod minimum's share), in percent; counted from 10 %, else 0"
        ),
    )
    at_risk = serializers.SerializerMethodField(
        help_text="recent OOM kills or a request at least 10 % below its usage floor"
    )
    wasteful = serializers.SerializerMethodField(
        help_text="savings_monthly > 0: the requests cost more than the targets"
    )
    missing_requests = serializers.SerializerMethodField(
        help_text="a container has no CPU or no memory request (not a risk by itself)"
    )
    mode = serializers.SerializerMethodField()
    profile = serializers.SerializerMethodField()
    containers = ContainerSerializer(many=True, read_only=True)
    price_source = serializers.CharField(
        read_only=True,
        help_text=(
            "where savings_monthly's prices come from: opencost (the node cost "
            "metrics of the nodes its pods run on, in Prometheus), table "
            "(VPAWEB_PRICE_TABLE) or default (VPAWEB_PRICE_PER_CORE_HOUR, "
            "_PER_GIB_HOUR)"
        ),
    )
    running_hours_month = serializers.FloatField(
        read_only=True,
        allow_null=True,
        help_text=(
            "Jobs and CronJobs: the hours per month their pods run (all pods), from "
            "the runs discovery saw over the last 8 days; the savings count these "
            "hours instead of 730 per replica. null for other kinds"
        ),
    )

    class Meta:
        model = Workload
        fields = [
            "id",
            "cluster",
            "namespace",
            "kind",
            "name",
            "uid",
            "replicas",
            "running_hours_month",
            "runs_a_month",
            "savings_per_run",
            "labels",
            "is_active",
            "status",
            "savings_monthly",
            "price_source",
            "at_risk",
            "risk",
            "recent_ooms",
            "shortfall_percent",
            "wasteful",
            "missing_requests",
            "mode",
            "profile",
            "first_seen_at",
            "last_seen_at",
            "hpa_conflicts",
            "containers",
        ]

    @extend_schema_field(serializers.FloatField())
    def get_savings_monthly(self, obj: Workload) -> float:
        return round(float(obj.savings), 2)  # type: ignore[attr-defined]

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_runs_a_month(self, obj: Workload) -> float | None:
        runs = runs_a_month(obj.schedule)
        return None if runs is None else round(runs, 2)

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_savings_per_run(self, obj: Workload) -> float | None:
        share = per_run(float(obj.savings), obj.schedule)  # type: ignore[attr-defined]
        return None if share is None else round(share, 2)

    @extend_schema_field(serializers.BooleanField())
    def get_at_risk(self, obj: Workload) -> bool:
        return bool(obj.risk > 0)  # type: ignore[attr-defined]

    @extend_schema_field(serializers.BooleanField())
    def get_wasteful(self, obj: Workload) -> bool:
        return bool(obj.savings > 0)  # type: ignore[attr-defined]

    @extend_schema_field(serializers.BooleanField())
    def get_missing_requests(self, obj: Workload) -> bool:
        return bool(obj.missing_count > 0)  # type: ignore[attr-defined]

    @extend_schema_field(serializers.ChoiceField(choices=Policy.Mode.choices))
    def get_mode(self, obj: Workload) -> str:
        policy = getattr(obj, "policy", None)
        return policy.mode if policy is not None else Policy.Mode.OFF

    def get_profile(self, obj: Workload) -> str:
        policy = getattr(obj, "policy", None)
        return policy.profile if policy is not None else "vpa"


class ContainerExplanationSerializer(serializers.Serializer):
    """The engine's explanation of one container's latest recommendation."""

    containerName = serializers.CharField()
    created_at = serializers.DateTimeField()
    profile = serializers.CharField()
    explanation = serializers.JSONField()


class HpaAdjustmentSerializer(serializers.Serializer):
    """The HPA change that keeps one Utilization metric scaling at the same usage
    once the recommended requests are applied."""

    hpa = serializers.CharField(help_text="The HorizontalPodAutoscaler's name.")
    resource = serializers.CharField(help_text='"cpu" or "memory"')
    container = serializers.CharField(
        help_text='the container of a ContainerResource metric; "" for the pod'
    )
    before = serializers.DictField(
        help_text='the metric\'s target now: {"type": "Utilization", '
        '"averageUtilization": 70}'
    )
    after = serializers.DictField(
        allow_null=True,
        help_text="the target that triggers at the same usage per pod: "
        "averageUtilization = before x old request / new request (a whole percent, "
        'at least 1), else {"type": "AverageValue", "averageValue": "175m"}; null '
        "when a container has no request",
    )
    changed = serializers.BooleanField(help_text="after differs from before")
    scales_out_at = serializers.CharField(
        allow_null=True, help_text="the usage per pod at which the HPA scales out"
    )
    reason = serializers.CharField()


class WorkloadRecommendationSerializer(serializers.Serializer):
    """A workload's current recommendation in VPA status format, with explanations."""

    workload = WorkloadBriefSerializer()
    recommendation = RecommendedPodResourcesSerializer()
    explanations = ContainerExplanationSerializer(many=True)
    hpaAdjustments = HpaAdjustmentSerializer(
        many=True,
        help_text="for each cpu/memory Utilization metric of an HPA scaling the "
        "workload: the target that keeps it scaling as before at the written requests",
    )


class RecommendationHistorySerializer(serializers.ModelSerializer):
    """One stored recommendation of one container."""

    containerName = serializers.CharField(source="container.name")
    target = serializers.SerializerMethodField()
    lowerBound = serializers.SerializerMethodField()
    upperBound = serializers.SerializerMethodField()
    uncappedTarget = serializers.SerializerMethodField()

    class Meta:
        model = Recommendation
        fields = [
            "id",
            "containerName",
            "created_at",
            "profile",
            "target",
            "lowerBound",
            "upperBound",
            "uncappedTarget",
            "explanation",
        ]

    @extend_schema_field(ResourceListSerializer)
    def get_target(self, obj: Recommendation) -> dict[str, str]:
        return resource_list(obj.target)

    @extend_schema_field(ResourceListSerializer)
    def get_lowerBound(self, obj: Recommendation) -> dict[str, str]:
        return resource_list(obj.lower_bound)

    @extend_schema_field(ResourceListSerializer)
    def get_upperBound(self, obj: Recommendation) -> dict[str, str]:
        return resource_list(obj.upper_bound)

    @extend_schema_field(ResourceListSerializer)
    def get_uncappedTarget(self, obj: Recommendation) -> dict[str, str]:
        return resource_list(obj.uncapped_target)


class RefreshRunSerializer(serializers.ModelSerializer):
    """One background run: refresh, back-fill or expiry."""

    cluster: serializers.SlugRelatedField[Cluster] = serializers.SlugRelatedField(
        slug_field="name", read_only=True, allow_null=True
    )
    duration_s = serializers.FloatField(read_only=True, allow_null=True)

    class Meta:
        model = RefreshRun
        fields = [
            "id",
            "cluster",
            "kind",
            "shard",
            "status",
            "started_at",
            "finished_at",
            "duration_s",
            "progress",
            "counts",
            "timings",
            "error",
        ]


class ChangeFilterSerializer(LookupFilterSerializer):
    """Query filters of the resize change list."""

    lookups = {
        "workload": "workload_id",
        "status": "status",
        "cluster": "workload__cluster__name",
        "namespace": "workload__namespace",
    }

    workload = StrictIntegerField(required=False, min_value=1, max_value=MAX_ID)
    status = serializers.ChoiceField(
        choices=ResizeChange.Status.choices, required=False
    )
    cluster = QueryTextField(required=False)
    namespace = QueryTextField(required=False)


class RunFilterSerializer(LookupFilterSerializer):
    """Query filters of the refresh run list."""

    lookups = {"cluster": "cluster__name", "kind": "kind", "status": "status"}

    cluster = QueryTextField(required=False)
    kind = serializers.ChoiceField(choices=RefreshRun.Kind.choices, required=False)
    status = serializers.ChoiceField(choices=RefreshRun.Status.choices, required=False)


class HistoryFilterSerializer(LookupFilterSerializer):
    """Query filters of a workload's recommendation history."""

    lookups = {"container": "container__name"}

    container = QueryTextField(required=False)


class QueryOwnerSerializer(ClosedSerializer):
    """The workload owning the pod."""

    kind = serializers.ChoiceField(choices=Workload.Kind.choices)
    name = StrictCharField(max_length=253)


class QueryMetadataSerializer(serializers.Serializer):
    """Metadata of a RecommendationQuery."""

    namespace = StrictCharField(required=False, max_length=253)


# What the schema can say of a query's pod: an object with containers, each named, at
# .spec.containers (a Pod) or at .containers (a bare PodSpec). The rest (DNS-1123
# names, quantities) is checked by the service, naming the field.
_POD_CONTAINERS = {
    "type": "array",
    "minItems": 1,
    "items": {
        "type": "object",
        "required": ["name"],
        "properties": {"name": {"type": "string", "minLength": 1}},
    },
}


@extend_schema_field(
    {
        "type": "object",
        "description": "a Pod (with .spec.containers) or a bare PodSpec",
        "anyOf": [
            {
                "type": "object",
                "required": ["spec"],
                "properties": {
                    "spec": {
                        "type": "object",
                        "required": ["containers"],
                        "properties": {"containers": _POD_CONTAINERS},
                    }
                },
            },
            {
                "type": "object",
                "required": ["containers"],
                "properties": {"containers": _POD_CONTAINERS},
            },
        ],
    }
)
class PodField(serializers.JSONField):
    """A query's pod: any JSON to DRF, checked by the service; the schema says what it
    needs."""


class QuerySpecSerializer(ClosedSerializer):
    """What to recommend for: a pod (need not exist), its owner and cluster."""

    pod = PodField(help_text="a Pod (with .spec.containers) or a bare PodSpec")
    owner = QueryOwnerSerializer(
        required=False, help_text="default: the pod's controller ownerReference"
    )
    cluster = StrictCharField(required=False, max_length=63)


class RecommendationQuerySerializer(ClosedSerializer):
    """A RecommendationQuery as in the Kubernetes VPA design proposal."""

    apiVersion = StrictCharField(required=False, max_length=100)
    kind = serializers.ChoiceField(choices=["RecommendationQuery"], required=False)
    metadata = QueryMetadataSerializer(required=False)
    spec = QuerySpecSerializer()


class QueryContainerSerializer(serializers.Serializer):
    """How one container's recommendation was made."""

    containerName = serializers.CharField()
    # A field named like Field.source (the attribute path): the stubs object.
    source = serializers.ChoiceField(  # type: ignore[assignment]
        choices=["recommendation", "static_coefficient", "none"]
    )
    reason = serializers.CharField()
    caps = serializers.ListField(child=serializers.CharField())
    explanation = serializers.JSONField(allow_null=True)


class QueryStatusSerializer(serializers.Serializer):
    """The answer: recommended resources per container."""

    recommendation = RecommendedPodResourcesSerializer()
    workload = WorkloadBriefSerializer(allow_null=True)
    containers = QueryContainerSerializer(many=True)
    hpaAdjustments = HpaAdjustmentSerializer(
        many=True,
        help_text="the owner's HPA targets that keep it scaling as before at the "
        "requests to write ([] without a cpu/memory Utilization HPA)",
    )


class RecommendationQueryAnswerSerializer(RecommendationQuerySerializer):
    """The query as sent, with ``status`` filled in."""

    status = QueryStatusSerializer()


# Export memory columns of recommended amounts: a canonical quantity rounded UP to a
# readable unit (engine.quantity.readable_memory_bytes); the *_bytes fields are exact.
_READABLE = (
    "rounded up to whole MiB (KiB below 1 MiB, GiB above 100 GiB), never below the "
    "exact amount in the matching *_bytes field"
)


class ExportRowSerializer(serializers.Serializer):
    """One row of the recommendation export: one container."""

    cluster = serializers.CharField()
    namespace = serializers.CharField()
    kind = serializers.CharField()
    workload = serializers.CharField()
    container = serializers.CharField()
    container_kind = serializers.ChoiceField(
        choices=["app", "sidecar", "init"],
        help_text="app: a regular container; sidecar: a native sidecar (an init "
        "container with restartPolicy Always); init: an init container, which runs "
        "to completion first and is never sized (its status is no-data)",
    )
    mode = serializers.CharField()
    replicas = serializers.IntegerField(allow_null=True)
    status = serializers.ChoiceField(
        choices=WORKLOAD_STATUSES, help_text="this container's provisioning status"
    )
    savings_monthly = serializers.FloatField(
        help_text="this container's monthly savings at the target, all replicas"
    )
    request_cpu = serializers.CharField(allow_null=True)
    request_memory = serializers.CharField(allow_null=True)
    limit_cpu = serializers.CharField(allow_null=True)
    limit_memory = serializers.CharField(allow_null=True)
    target_cpu = serializers.CharField(allow_null=True)
    target_memory = serializers.CharField(allow_null=True, help_text=_READABLE)
    lower_cpu = serializers.CharField(allow_null=True)
    lower_memory = serializers.CharField(allow_null=True, help_text=_READABLE)
    upper_cpu = serializers.CharField(allow_null=True)
    upper_memory = serializers.CharField(allow_null=True, help_text=_READABLE)
    request_cpu_millicores = serializers.IntegerField(allow_null=True)
    request_memory_bytes = serializers.IntegerField(allow_null=True)
    target_cpu_millicores = serializers.IntegerField(allow_null=True)
    target_memory_bytes = serializers.IntegerField(
        allow_null=True, help_text="the exact target in bytes"
    )
    lower_memory_bytes = serializers.IntegerField(
        allow_null=True, help_text="the exact lower bound in bytes"
    )
    upper_memory_bytes = serializers.IntegerField(
        allow_null=True, help_text="the exact upper bound in bytes"
    )
    recommended_at = serializers.DateTimeField(allow_null=True)


class ExportPageSerializer(serializers.Serializer):
    """A page of the export (``?limit=`` or ``?offset=``): the paginated envelope."""

    count = serializers.IntegerField(help_text="workloads that match the filters")
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = ExportRowSerializer(many=True)


# The export answers its rows, or with limit/offset a page of them in the envelope.
EXPORT_ANSWER = PolymorphicProxySerializer(
    component_name="ExportAnswer",
    serializers=[ExportRowSerializer(many=True), ExportPageSerializer],
    resource_type_field_name=None,
    many=False,
)


class ErrorDetailSerializer(serializers.Serializer):
    """The body of every error."""

    code = serializers.CharField()
    message = serializers.CharField()
    fields = serializers.DictField(  # type: ignore[assignment]  # the error field map
        child=serializers.ListField(child=serializers.CharField())
    )


class ErrorSerializer(serializers.Serializer):
    """``{"error": {"code", "message", "fields"}}``: the one error shape of the API."""

    error = ErrorDetailSerializer()
