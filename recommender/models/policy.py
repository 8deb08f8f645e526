"""Per-workload policies and the static coefficients an operator sets.

Resource amounts are stored as upstream VPA keeps them: CPU in integer millicores,
memory in integer bytes; ``None`` means "not set".
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from recommender.engine.capping import (
    MODE_IN_PLACE,
    MODE_IN_PLACE_OR_RECREATE,
    MODE_INITIAL,
    MODE_OFF,
    MODE_RECREATE,
)
from recommender.models.fleet import Workload


class PolicyQuerySet(models.QuerySet["Policy"]):
    """Reads over policies."""

    def actionable(self) -> PolicyQuerySet:
        """The policies vpaweb may act on (webhook, updater):
        :attr:`Policy.is_actionable` as a filter, so a candidate list and a single
        check agree."""
        return self.filter(actionable_q())


def actionable_q(prefix: str = "") -> models.Q:
    """:attr:`Policy.is_actionable` as a ``Q`` on the policy's own columns, reached
    through ``prefix`` from another model (``"policy__"`` from a Workload,
    ``"workload__policy__"`` from a Container): a plain join, where
    ``policy__in=Policy.objects.actionable()`` is a subquery SQLite takes seconds over
    at 10,000 pods."""
    return models.Q(**{f"{prefix}source": Policy.Source.VPAWEB}) & ~models.Q(
        **{f"{prefix}mode": Policy.Mode.OFF}
    )


def updater_policy_q(workload_prefix: str = "") -> models.Q:
    """Workloads whose running pods the updater may change: an actionable policy
    (:attr:`Policy.is_actionable`) in one of :data:`ACTING_MODES` (Initial is the
    webhook's alone), reached through ``workload_prefix`` (``"workload__"`` from a
    Container or a ResizeChange)."""
    return actionable_q(f"{workload_prefix}policy__") & models.Q(
        **{f"{workload_prefix}policy__mode__in": ACTING_MODES}
    )


class Policy(models.Model):
    """How vpaweb treats one workload: mode, profile and per-container policies.

    Every policy has one owner (``source``):

    - ``vpaweb``: an operator chose it in vpaweb (or nobody has: the default, mode Off).
      vpaweb may act on it: :attr:`is_actionable` is true when its mode is not Off.
    - ``vpa-object``: it mirrors the upstream VerticalPodAutoscaler ``vpa_object``
      (mode, container policies, min replicas, kept in step by discovery). It is shown
      with the object's mode, and vpaweb never acts on it, whatever the mode: the
      upstream VPA does. An operator can adopt it
      (``services.policy.changes.adopt_policy``): it becomes vpaweb's, starting in Off.

    The webhook and the updater ask ONE question before they touch a pod:
    ``policy.is_actionable`` (or ``Policy.objects.actionable()``); never ``mode``
    alone, since a mirrored policy carries a non-Off mode vpaweb must not act on.
    """

    class Mode(models.TextChoices):
        # Labels spelt as upstream's updateMode values, everywhere they are shown.
        OFF = MODE_OFF, MODE_OFF
        INITIAL = MODE_INITIAL, MODE_INITIAL
        RECREATE = MODE_RECREATE, MODE_RECREATE
        IN_PLACE_OR_RECREATE = MODE_IN_PLACE_OR_RECREATE, MODE_IN_PLACE_OR_RECREATE
        IN_PLACE = MODE_IN_PLACE, MODE_IN_PLACE

    class Source(models.TextChoices):
        VPAWEB = "vpaweb", "vpaweb"
        VPA_OBJECT = "vpa-object", "Imported VPA object"

    workload = models.OneToOneField(
        Workload, on_delete=models.CASCADE, related_name="policy"
    )
    mode = models.CharField(max_length=20, choices=Mode.choices, default=Mode.OFF)
    profile = models.CharField(max_length=64, default="vpa")
    # Field overrides of the profile (engine Profile.with_overrides), e.g. percentiles.
    profile_overrides = models.JSONField(default=dict, blank=True)
    # Upstream containerPolicies: [{"containerName": "*", "minAllowed": {...}, ...}].
    container_policies = models.JSONField(default=list, blank=True)
    min_replicas = models.PositiveIntegerField(null=True, blank=True)

    class Approval(models.TextChoices):
        MANUAL = "manual", "Manual (an operator approves each change)"
        AUTOMATIC = "automatic", "Automatic (changes are approved as proposed)"

    # Whether the updater's resize changes wait for an operator (docs/updater.md).
    approval = models.CharField(
        max_length=10, choices=Approval.choices, default=Approval.MANUAL
    )
    # Upstream updatePolicy.evictionRequirements:
    # [{"resources": ["cpu"], "changeRequirement": "TargetHigherThanRequests"}].
    eviction_requirements = models.JSONField(default=list, blank=True)
    # When approved changes may be applied (services/policy/windows.py): [] = any
    # time; and whether a quick OOM (upstream's rule) may be applied outside them.
    maintenance_windows = models.JSONField(default=list, blank=True)
    window_bypasses_quick_oom = models.BooleanField(default=False)

    class HpaCoordination(models.TextChoices):
        LEAVE = "leave", "Leave an HPA's resources to the HPA (upstream VPA's rule)"
        COORDINATED = (
            "coordinated",
            ("Coordinated: resize them in place together with the HPA target change"),
        )

    # What the updater does with a resource an HPA of the workload scales on
    # (docs/updater.md "Coordinated HPA mode").
    hpa_coordination = models.CharField(
        max_length=12, choices=HpaCoordination.choices, default=HpaCoordination.LEAVE
    )
    # CPU startup boost (engine/startup_boost.py): {} = off, else
    # {"factor": 2.0, "duration_s": 300} or {"quantity": "500m", "duration_s": 300}.
    startup_boost = models.JSONField(default=dict, blank=True)
    source = models.CharField(
        max_length=20, choices=Source.choices, default=Source.VPAWEB
    )
    # The upstream VerticalPodAutoscaler targeting the workload ("namespace/name"), and
    # its spec.updatePolicy.updateMode as upstream reads it (absent or Auto: Recreate);
    # both "" when none does. Set by discovery for every policy, mirrored or vpaweb's
    # own: a vpaweb policy next to an object in a non-Off mode is a conflict.
    vpa_object = models.CharField(max_length=320, blank=True)
    vpa_object_mode = models.CharField(max_length=32, blank=True)
    # The fields an operator set on this workload in vpaweb (names from
    # services.policy.validation.CHANGEABLE_FIELDS): they win over annotations and
    # rules. Every other field is materialized from the workload's annotations, the
    # rules that select it, or the default (services/policy/rules.py).
    own_fields = models.JSONField(default=list, blank=True)
    # Where each field's value comes from: {field: {"source": "own" | "annotation"
    # | "rule" | "default" | "vpa-object", "name": annotation key or rule name,
    # "rule_id": int (rules only)}}; {} until the first resolution.
    provenance = models.JSONField(default=dict, blank=True)
    # The workload's vpaweb.io/* annotations that were not used, each with why:
    # [{"annotation", "value", "reason"}].
    ignored_annotations = models.JSONField(default=list, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    objects = PolicyQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "policies"

    def __str__(self) -> str:
        return f"{self.workload}: {self.mode}"

    @property
    def is_off(self) -> bool:
        """Off means off: nothing is ever written to the cluster for this workload."""
        return self.mode == self.Mode.OFF

    @property
    def is_mirrored(self) -> bool:
        """True when the policy mirrors an upstream VPA object (vpaweb never acts)."""
        return self.source == self.Source.VPA_OBJECT

    @property
    def is_actionable(self) -> bool:
        """THE predicate of actuation: may vpaweb (webhook, updater) act on this
        workload's pods? Only when the policy is vpaweb's own and its mode is not Off.
        A mirrored VPA object's policy is never actionable, whatever its mode.
        ``PolicyQuerySet.actionable()`` is the same rule as a filter."""
        return self.source == self.Source.VPAWEB and self.mode != self.Mode.OFF

    @property
    def in_acting_mode(self) -> bool:
        """The mode is one in which the updater changes running pods
        (``ACTING_MODES``); whether it may is ``is_actionable``'s question."""
        return self.mode in ACTING_MODES

    @property
    def managed_by(self) -> str:
        """The upstream object a mirrored policy follows, as the dashboard and errors
        name it: ``VerticalPodAutoscaler <namespace>/<name> (mode <mode>)``."""
        name = self.vpa_object or "(name not read yet)"
        return (
            f"VerticalPodAutoscaler {name} (mode {self.vpa_object_mode or self.mode})"
        )

    @property
    def has_vpa_conflict(self) -> bool:
        """A vpaweb policy whose workload an upstream VPA object still acts on (its
        mode is not Off): two updaters would fight over the same pods."""
        return (
            self.source == self.Source.VPAWEB
            and bool(self.vpa_object)
            and self.vpa_object_mode not in ("", self.Mode.OFF)
        )


# THE modes in which the updater changes running pods (docs/updater.md "Modes").
ACTING_MODES: tuple[str, ...] = (
    Policy.Mode.RECREATE,
    Policy.Mode.IN_PLACE_OR_RECREATE,
    Policy.Mode.IN_PLACE,
)
# The modes whose changes resize in place; InPlace never evicts.
IN_PLACE_MODES: tuple[str, ...] = (
    Policy.Mode.IN_PLACE_OR_RECREATE,
    Policy.Mode.IN_PLACE,
)


class PolicyRule(models.Model):
    """A named rule that gives policy fields to every workload it selects.

    Scope: a cluster (None: every cluster), namespace names and/or a namespace label
    selector, a workload label selector, workload kinds; an empty part selects
    everything. ``policy_fields`` holds the policy fields the rule sets, validated as a
    workload's policy change is (``services.policy.changes``), e.g. ``{"mode":
    "Recreate", "approval": "automatic"}``. A rule with a workload selector is a
    label rule, one with namespaces (names or selector) a namespace rule, any other a
    cluster rule; the more specific kind wins field by field, then the higher
    ``priority``, then the older rule (``services/policy/rules.py``).
    """

    name = models.CharField(max_length=100, unique=True)
    priority = models.IntegerField(default=0)
    is_enabled = models.BooleanField(default=True)
    cluster = models.ForeignKey(
        "recommender.Cluster",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="policy_rules",
    )
    namespaces = models.JSONField(default=list, blank=True)
    namespace_selector = models.CharField(max_length=1000, blank=True)
    workload_selector = models.CharField(max_length=1000, blank=True)
    kinds = models.JSONField(default=list, blank=True)
    policy_fields = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"policy rule {self.name}"

    @property
    def level(self) -> str:
        """How specific the rule is: "label", "namespace" or "cluster"."""
        if self.workload_selector.strip():
            return "label"
        if self.namespaces or self.namespace_selector.strip():
            return "namespace"
        return "cluster"


class StaticCoefficient(models.Model):
    """First-deploy coefficient for workloads without a recommendation.

    ``namespace`` "" is the global default; a namespace's own row wins over it. A
    missing factor leaves that resource's request alone (a common choice is CPU
    only).
    """

    namespace = models.CharField(max_length=63, blank=True, unique=True)
    # New request = original request × factor, in (0, 1]; None = leave resource alone.
    cpu_factor = models.FloatField(null=True, blank=True)
    memory_factor = models.FloatField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        ordering = ["namespace"]

    def __str__(self) -> str:
        scope = self.namespace or "(global default)"
        return (
            f"coefficient {scope}: cpu {self.cpu_factor}, memory {self.memory_factor}"
        )
