"""vpaweb's data: clusters, their workloads and containers, policies, recommendations
and the engine state behind them, background runs, resize changes and the audit trail.

One module per group; this package exposes every model as ``recommender.models.X``.
"""

from recommender.models.access import ApiToken, AuditEvent
from recommender.models.actuation import (
    OPEN_RESIZE_STATUSES,
    RESIZE_TRANSITIONS,
    ActuationControl,
    AdmissionChange,
    AdmissionCount,
    ResizeChange,
    ResizeChangeStatus,
    SimulatedHpaState,
    SimulatedPodState,
    SimulatedWorkloadState,
    UpdaterLock,
    WebhookAck,
)
from recommender.models.fleet import (
    Cluster,
    Container,
    NamespaceLimitRange,
    NamespaceTotals,
    SavingsSnapshot,
    Workload,
    WorkloadPod,
    WorkloadTotals,
)
from recommender.models.nodes import NodePool
from recommender.models.notifications import NotificationChannel, NotificationDelivery
from recommender.models.policy import (
    Policy,
    PolicyQuerySet,
    PolicyRule,
    StaticCoefficient,
)
from recommender.models.provisioning import (
    ContainerQuerySet,
    ProvisioningFacts,
    ProvisioningStatus,
    RiskRules,
    WorkloadQuerySet,
    container_facts,
    workload_facts,
)
from recommender.models.recommendation import (
    Checkpoint,
    OomKill,
    Recommendation,
    RecommendationQuerySet,
    UsageHour,
)
from recommender.models.rollups import GroupTotals, WorkloadAmounts
from recommender.models.runs import RefreshRun

__all__ = [
    "OPEN_RESIZE_STATUSES",
    "RESIZE_TRANSITIONS",
    "ActuationControl",
    "AdmissionChange",
    "AdmissionCount",
    "ApiToken",
    "AuditEvent",
    "Checkpoint",
    "Cluster",
    "Container",
    "ContainerQuerySet",
    "GroupTotals",
    "NamespaceLimitRange",
    "NamespaceTotals",
    "NodePool",
    "NotificationChannel",
    "NotificationDelivery",
    "OomKill",
    "Policy",
    "PolicyQuerySet",
    "PolicyRule",
    "ProvisioningFacts",
    "ProvisioningStatus",
    "Recommendation",
    "RecommendationQuerySet",
    "RefreshRun",
    "ResizeChange",
    "ResizeChangeStatus",
    "RiskRules",
    "SavingsSnapshot",
    "SimulatedHpaState",
    "SimulatedPodState",
    "SimulatedWorkloadState",
    "StaticCoefficient",
    "UpdaterLock",
    "UsageHour",
    "WebhookAck",
    "Workload",
    "WorkloadAmounts",
    "WorkloadPod",
    "WorkloadQuerySet",
    "WorkloadTotals",
    "container_facts",
    "workload_facts",
]
