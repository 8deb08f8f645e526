"""Serializers of the rollups and the savings trend (``rollup_views.py``)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from recommender.api.fields import LabelSelectorField, QueryTextField
from recommender.models import ProvisioningStatus
from recommender.services.readmodels.rollups import BY_CHOICES, LABEL_KEY, MAX_LABEL_KEY

MAX_TREND_DAYS = 400


@extend_schema_field(
    {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_LABEL_KEY,
        "pattern": LABEL_KEY.pattern,
    }
)
class LabelKeyField(serializers.CharField):
    """A label key: an optional DNS prefix and '/', then a name of 63 characters."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", MAX_LABEL_KEY)
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        text = super().to_internal_value(data)
        if not LABEL_KEY.match(text):
            raise serializers.ValidationError(
                f"{text!r} is not a label key (e.g. team or app.kubernetes.io/part-of)"
            )
        return text


class RollupFilterSerializer(serializers.Serializer):
    """Query parameters of the rollups."""

    by = serializers.ChoiceField(
        choices=list(BY_CHOICES),
        help_text="what to group by: cluster, namespace, label (a workload label, "
        "see key) or kind",
    )
    key = LabelKeyField(
        required=False,
        help_text="by=label: the label key, e.g. team or app.kubernetes.io/part-of "
        "(default VPAWEB_ROLLUP_LABEL_KEY); the other groupings have no key and "
        'answer "key": ""',
    )
    cluster = QueryTextField(required=False, help_text="only this cluster")
    label_selector = LabelSelectorField(required=False)


class StatusCountsSerializer(serializers.Serializer):
    """Workloads per headline status (the dashboard's: under = at risk, over =
    wasteful, missing = a request missing, no-data, within = right-sized)."""

    under = serializers.IntegerField()
    over = serializers.IntegerField()
    missing = serializers.IntegerField()
    no_data = serializers.IntegerField()
    within = serializers.IntegerField()

    def to_representation(self, instance: dict[str, int]) -> dict[str, int]:
        return {name: instance.get(name, 0) for name in ProvisioningStatus.LABELS}


# "no-data" is not an identifier: declare it by name.
StatusCountsSerializer._declared_fields["no-data"] = (
    StatusCountsSerializer._declared_fields.pop("no_data")
)


class RollupGroupSerializer(serializers.Serializer):
    """One group's totals, all replicas of its workloads."""

    name = serializers.CharField(
        help_text='the cluster, namespace, label value ("" for workloads without '
        "the label) or kind"
    )
    cluster = serializers.CharField(
        help_text="by=namespace: the namespace's cluster; otherwise empty"
    )
    workloads = serializers.IntegerField()
    containers = serializers.IntegerField(help_text="init containers left out")
    covered = serializers.IntegerField(help_text="containers with a recommendation")
    requested_cpu_millicores = serializers.IntegerField()
    requested_memory_bytes = serializers.IntegerField()
    covered_requested_cpu_millicores = serializers.IntegerField(
        help_text="requests of the containers with a CPU target"
    )
    covered_requested_memory_bytes = serializers.IntegerField(
        help_text="requests of the containers with a memory target"
    )
    recommended_cpu_millicores = serializers.IntegerField()
    recommended_memory_bytes = serializers.IntegerField()
    savings_monthly = serializers.FloatField(
        help_text="as the workloads' savings_monthly, summed"
    )
    realized_savings_monthly = serializers.FloatField(
        help_text="what the applied (verified) changes that still hold save per "
        "month; savings_monthly is what moving to the targets would still save "
        "(potential)"
    )
    at_risk = serializers.IntegerField(
        help_text="workloads at risk, as GET workloads/?at_risk=true counts them"
    )
    wasteful = serializers.IntegerField(
        help_text="workloads with savings_monthly > 0 (?wasteful=true)"
    )
    missing_requests = serializers.IntegerField(
        help_text="workloads with a container missing a request "
        "(?missing_requests=true); a workload may count in several of these three"
    )
    statuses = StatusCountsSerializer(
        help_text="workloads per headline status (one each: under, over, missing, "
        "no-data, within); the facts apart are at_risk, wasteful, missing_requests"
    )


class NodePoolSerializer(serializers.Serializer):
    """One node pool's nodes needed by its pods' requests now and at the
    recommendations (docs/dashboard.md, "Nodes you can free")."""

    cluster = serializers.CharField(source="cluster.name")
    name = serializers.CharField(
        help_text='the pool label\'s value (VPAWEB_NODE_POOL_LABEL); "" for nodes '
        "without a pool label"
    )
    nodes = serializers.IntegerField(help_text="the pool's nodes now")
    cordoned = serializers.IntegerField(
        help_text="of nodes, those cordoned (spec.unschedulable): no pod is packed "
        "onto them"
    )
    node_source = serializers.CharField(
        help_text="where the nodes were read: api-server (Node objects), "
        "kube-state-metrics or simulated"
    )
    node_source_note = serializers.CharField(
        help_text="why not from the API server (e.g. the read role has no list "
        'nodes: HTTP 403), else ""'
    )
    node_cpu_millicores = serializers.IntegerField(
        help_text="allocatable of the pool's most common node"
    )
    node_memory_bytes = serializers.IntegerField()
    node_pods = serializers.IntegerField()
    pods = serializers.IntegerField(help_text="pods packed (DaemonSet pods apart)")
    cannot_model = serializers.CharField(
        help_text='why the pool cannot be modelled ("" when it can); then '
        "nodes_freed and monthly_cost_freed are null"
    )
    nodes_needed_now = serializers.IntegerField(
        help_text="nodes the pods' current requests need (first-fit decreasing onto "
        "the pool's nodes, each less the DaemonSets it runs)"
    )
    nodes_needed_after = serializers.IntegerField(
        help_text="nodes the pods need at the recommendations"
    )
    nodes_freed = serializers.IntegerField(
        allow_null=True,
        help_text="max(0, nodes_needed_now - nodes_needed_after); null when the pool "
        "cannot be modelled",
    )
    nodes_added = serializers.IntegerField(
        allow_null=True,
        help_text="max(0, nodes_needed_after - nodes_needed_now): nodes the "
        "recommendations would need beyond today's",
    )
    unplaceable_now = serializers.IntegerField(
        help_text="pods no node of the pool holds (left out of the counts)"
    )
    unplaceable_after = serializers.IntegerField()
    held_after = serializers.IntegerField(
        help_text="pods kept at their requests after: their recommendation fits no "
        "node of the cluster, and vpaweb writes no such request"
    )
    node_monthly_cost = serializers.FloatField(
        help_text="mean price of one of the pool's nodes a month"
    )
    monthly_cost_freed = serializers.FloatField(
        allow_null=True, help_text="nodes_freed x node_monthly_cost"
    )
    price_source = serializers.CharField(
        help_text="opencost, table or default: what priced most of its nodes"
    )
    computed_at = serializers.DateTimeField(help_text="when the pool was packed")
    checked_at = serializers.DateTimeField(
        allow_null=True,
        help_text="when its inputs (nodes, pods, requests, recommendations) were "
        "last read; equal inputs are not packed again",
    )


class NodePoolTotalSerializer(serializers.Serializer):
    """The node pools summed (services/readmodels/node_pools.py)."""

    pools = serializers.IntegerField()
    nodes = serializers.IntegerField()
    nodes_freed = serializers.IntegerField(
        help_text="summed over the pools that can be modelled"
    )
    monthly_cost_freed = serializers.FloatField(
        help_text="summed over the pools that can be modelled"
    )
    unmodelled = serializers.IntegerField(help_text="pools that cannot be modelled")


class RollupSerializer(serializers.Serializer):
    """Groups, largest savings first, and their total."""

    by = serializers.CharField()
    key = serializers.CharField(help_text="the label key (by=label), else empty")
    cluster = serializers.CharField()
    groups = RollupGroupSerializer(many=True)
    total = RollupGroupSerializer()
    node_pools = NodePoolSerializer(
        many=True, help_text="the node pools (of cluster when given)"
    )
    node_pools_total = NodePoolTotalSerializer(help_text="the node pools summed")


class TrendFilterSerializer(serializers.Serializer):
    """Query parameters of the savings trend."""

    days = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_TREND_DAYS,
        default=7,
        help_text="how far back; up to VPAWEB_SAVINGS_TREND_HOURLY_DAYS (14) the "
        "points are hourly, beyond daily",
    )
    cluster = QueryTextField(required=False)
    namespace = QueryTextField(required=False)


class TrendPointSerializer(serializers.Serializer):
    """The totals at one hour or day."""

    at = serializers.DateTimeField()
    workloads = serializers.IntegerField()
    requested_cpu_millicores = serializers.IntegerField(
        help_text="requests compared with a recommendation"
    )
    requested_memory_bytes = serializers.IntegerField()
    recommended_cpu_millicores = serializers.IntegerField()
    recommended_memory_bytes = serializers.IntegerField()
    savings_monthly = serializers.FloatField(
        help_text="potential: what moving to the targets would still save"
    )
    realized_savings_monthly = serializers.FloatField(
        help_text="realized: what the applied changes that held then saved"
    )


class TrendSerializer(serializers.Serializer):
    """The savings trend, oldest point first."""

    days = serializers.IntegerField()
    resolution = serializers.ChoiceField(choices=["hour", "day"])
    points = TrendPointSerializer(many=True)
    next_point_after = serializers.DateTimeField(
        allow_null=True,
        help_text="with fewer than 2 points (no line yet): the start of the hour (or "
        "day) whose first successful refresh records the next point; else null",
    )


class ClusterFailureSerializer(serializers.Serializer):
    """A cluster's refreshes failing: since when and why."""

    error = serializers.CharField(help_text="the latest failed refresh's error")
    shard = serializers.CharField(
        help_text="the namespace that refresh covered; empty for the whole cluster"
    )
    since = serializers.DateTimeField(
        help_text="the first failed refresh after the last successful one"
    )
    last_failed_at = serializers.DateTimeField()
    last_succeeded_at = serializers.DateTimeField(allow_null=True)
    failed_runs = serializers.IntegerField()
