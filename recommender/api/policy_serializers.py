"""API serializers of policies: the policy as shown, the PATCH body, profile overrides
and per-container policies (closed: unknown keys are refused).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from recommender.api.fields import (
    ClosedSerializer,
    ModeField,
)
from recommender.api.serializers import ResourceListSerializer
from recommender.engine.capping import MODES
from recommender.engine.profiles import MEMORY_ESTIMATORS, PROFILES
from recommender.models import (
    Policy,
)
from recommender.services.policy.changes import policy_consequence
from recommender.services.policy.rules import field_sources
from recommender.services.policy.validation import CHANGEABLE_FIELDS
from recommender.services.policy.windows import DAYS


class ContainerPolicyEntrySerializer(serializers.Serializer):
    """One ``resourcePolicy.containerPolicies[]`` entry, as upstream VPA spells it."""

    # Not blank and no NUL: a non-space character (the schema's pattern says so).
    containerName = serializers.RegexField(
        r"^[^\x00]*\S[^\x00]*$",
        max_length=253,
        help_text='a container of the workload, or "*" for every container',
    )
    mode = serializers.ChoiceField(choices=list(MODES), required=False)
    minAllowed = ResourceListSerializer(required=False)
    maxAllowed = ResourceListSerializer(required=False)
    controlledResources = serializers.ListField(
        child=serializers.ChoiceField(choices=["cpu", "memory"]), required=False
    )
    controlledValues = serializers.ChoiceField(
        choices=["RequestsAndLimits", "RequestsOnly"], required=False
    )


def _percentile(text: str) -> serializers.FloatField:
    return serializers.FloatField(
        required=False, min_value=0.0, max_value=1.0, help_text=text
    )


def _seconds(text: str) -> serializers.FloatField:
    return serializers.FloatField(required=False, help_text=f"{text}; seconds, > 0")


class ProfileOverridesSerializer(serializers.Serializer):
    """Fields of the profile set differently for one workload; absent fields keep the
    profile's value."""

    # The schema's description only:
    # services.policy_validation.validate_profile_overrides checks the values (with
    # the engine), through ProfileOverridesField.

    cpu_target_percentile = _percentile("CPU target percentile (vpa profile: 0.9)")
    cpu_lower_percentile = _percentile("CPU lower-bound percentile (vpa: 0.5)")
    cpu_upper_percentile = _percentile("CPU upper-bound percentile (vpa: 0.95)")
    memory_target_percentile = _percentile("memory target percentile (vpa: 0.9)")
    memory_lower_percentile = _percentile("memory lower-bound percentile (vpa: 0.5)")
    memory_upper_percentile = _percentile("memory upper-bound percentile (vpa: 0.95)")
    memory_estimator = serializers.ChoiceField(
        choices=list(MEMORY_ESTIMATORS),
        required=False,
        help_text="`percentile` (vpa) or `peak`: the highest stored daily peak",
    )
    margin_fraction = serializers.FloatField(
        required=False,
        min_value=0.0,
        max_value=1.0,
        help_text=(
            "safety margin added to every value read, a fraction from 0 to 1 "
            "(vpa: 0.15 = +15%; 15 is refused, not read as 15%)"
        ),
    )
    cpu_half_life_s = _seconds("CPU histogram decay half-life (vpa: 86400)")
    memory_half_life_s = _seconds("memory histogram decay half-life (vpa: 86400)")
    memory_window_s = _seconds("memory peak aggregation interval (vpa: 86400)")
    memory_window_count = serializers.IntegerField(
        required=False,
        min_value=1,
        help_text="memory aggregation intervals kept (vpa: 8)",
    )
    confidence_interval_cpu_s = _seconds("CPU confidence interval (vpa: 86400)")
    confidence_interval_memory_s = _seconds("memory confidence interval (vpa: 86400)")
    pod_min_cpu_millicores = serializers.IntegerField(
        required=False, min_value=0, help_text="pod minimum CPU (vpa: 25)"
    )
    pod_min_memory_bytes = serializers.IntegerField(
        required=False, min_value=0, help_text="pod minimum memory (vpa: 262144000)"
    )
    oom_bump_ratio = serializers.FloatField(
        required=False,
        min_value=1.0,
        max_value=3.0,
        help_text="OOM kill memory bump, a factor from 1 to 3 (vpa: 1.2)",
    )
    oom_min_bump_bytes = serializers.IntegerField(
        required=False, min_value=0, help_text="smallest OOM bump (vpa: 104857600)"
    )
    memory_margin_spread = serializers.FloatField(
        required=False,
        min_value=0.0,
        help_text=(
            "adaptive memory margin per unit of daily-peak spread (highest / median"
            " peak - 1); 0 = off, margin_fraction as upstream (vpa: 0)"
        ),
    )
    memory_margin_base = serializers.FloatField(
        required=False,
        min_value=0.0,
        help_text="adaptive memory margin at zero spread, a fraction (vpa: 0.15)",
    )
    memory_margin_max = serializers.FloatField(
        required=False,
        min_value=0.0,
        help_text="largest adaptive memory margin, a fraction (vpa: 1.0)",
    )
    memory_margin_min_bytes = serializers.IntegerField(
        required=False,
        min_value=0,
        help_text=(
            "smallest memory margin in bytes: every memory value gets at least base +"
            " this; 0 = off, as upstream (vpa: 0)"
        ),
    )
    throttling_boost = serializers.FloatField(
        required=False,
        min_value=0.0,
        help_text=(
            "raise the CPU target by this fraction when the container is throttled"
            " in more than throttling_threshold of its CFS periods; 0 = off (vpa: 0)"
        ),
    )
    throttling_threshold = serializers.FloatField(
        required=False,
        min_value=0.0,
        max_value=1.0,
        help_text="throttled share of CFS periods above which to boost (vpa: 0.25)",
    )


@extend_schema_field(ProfileOverridesSerializer)
class ProfileOverridesField(serializers.JSONField):
    """``profile_overrides``: any JSON through the parser, checked by the service (so
    an unknown or bad field is a 400 naming ``profile_overrides.<field>``)."""


class StartupBoostSerializer(serializers.Serializer[Any]):
    """``startup_boost``, for the schema: ``{}`` is off; else exactly one of factor or
    quantity, and how long the pod stays boosted once Ready."""

    factor = serializers.FloatField(
        required=False, help_text="CPU request times this (above 1, at most 10)"
    )
    quantity = serializers.CharField(
        required=False, help_text="CPU added to the request, e.g. 500m (upstream's)"
    )
    duration = serializers.CharField(
        required=False, help_text="input: e.g. 5m, 90s or 1h; or duration_s"
    )
    duration_s = serializers.IntegerField(
        required=False, help_text="seconds the pod stays boosted once Ready (0-86400)"
    )


@extend_schema_field(StartupBoostSerializer)
class StartupBoostField(serializers.JSONField):
    """``startup_boost``: any JSON through the parser, checked by the service (so a bad
    value is a 400 naming ``startup_boost``)."""


class PolicySerializer(serializers.ModelSerializer):
    """A workload's policy. Changing it writes nothing to the cluster by itself."""

    mode_consequence = serializers.SerializerMethodField()
    notes = serializers.SerializerMethodField(
        help_text="what the request's values were taken as, e.g. mode Auto as Recreate"
    )
    profile_overrides = ProfileOverridesField(
        help_text="fields that differ from the profile; {} means the profile as is"
    )
    container_policies = ContainerPolicyEntrySerializer(many=True)
    startup_boost = StartupBoostField(
        help_text="CPU startup boost; {} = off (docs/webhook.md, docs/updater.md)"
    )
    updated_by: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    is_actionable = serializers.BooleanField(
        read_only=True,
        help_text=(
            "may vpaweb act on this workload (source vpaweb and mode not Off); a "
            "policy that mirrors a VPA object never is"
        ),
    )
    has_vpa_conflict = serializers.BooleanField(
        read_only=True,
        help_text=(
            "vpaweb's policy, but the VPA object vpa_object is still in a non-Off "
            "mode: both would act on the pods"
        ),
    )

    own_fields = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="fields set on this workload in vpaweb: they win over annotations "
        "and rules (send inherit to give one back)",
    )
    provenance = serializers.SerializerMethodField(
        help_text="where each field comes from: own, annotation (name: the "
        "annotation), rule (name, rule_id, level), default or vpa-object; "
        "given_by says it in words"
    )
    ignored_annotations = serializers.ListField(
        child=serializers.DictField(child=serializers.CharField()),
        read_only=True,
        help_text="vpaweb.io/* annotations not used, each with its reason",
    )

    class Meta:
        model = Policy
        fields = [
            "mode",
            "mode_consequence",
            "profile",
            "profile_overrides",
            "container_policies",
            "min_replicas",
            "approval",
            "eviction_requirements",
            "maintenance_windows",
            "window_bypasses_quick_oom",
            "hpa_coordination",
            "startup_boost",
            "source",
            "vpa_object",
            "vpa_object_mode",
            "is_actionable",
            "has_vpa_conflict",
            "own_fields",
            "provenance",
            "ignored_annotations",
            "notes",
            "updated_at",
            "updated_by",
        ]
        extra_kwargs = {
            "source": {
                "help_text": (
                    "vpaweb: an operator's (or the default); vpa-object: mirrors the "
                    "VPA object vpa_object, shown and never acted on (adopt it to "
                    "change it)"
                )
            },
            "vpa_object": {
                "help_text": "namespace/name of the VPA object targeting the workload"
            },
            "vpa_object_mode": {"help_text": "that object's updateMode"},
        }

    def get_mode_consequence(self, obj: Policy) -> str:
        return policy_consequence(obj)

    @extend_schema_field(
        serializers.DictField(child=serializers.DictField(allow_empty=True))
    )
    def get_provenance(self, obj: Policy) -> dict[str, dict[str, Any]]:
        return field_sources(obj)

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_notes(self, obj: Policy) -> list[str]:
        return list(self.context.get("notes", []))


class EvictionRequirementSerializer(ClosedSerializer):
    """One upstream ``EvictionRequirement``."""

    refuses_unknown_fields = True
    resources = serializers.ListField(
        child=serializers.ChoiceField(choices=["cpu", "memory"]),
        min_length=1,
        max_length=2,
    )
    changeRequirement = serializers.ChoiceField(
        choices=["TargetHigherThanRequests", "TargetLowerThanRequests"]
    )


# A local time as the windows' parser reads it (services/policy/windows.py): hours 0-23
# in one or two digits, minutes 00-59.
CLOCK = r"^([01]?[0-9]|2[0-3]):[0-5][0-9]$"


class MaintenanceWindowSerializer(ClosedSerializer):
    """When approved changes may be applied: the days a window starts on, its local
    start and end (an end not after the start runs past midnight), its time zone."""

    refuses_unknown_fields = True
    days = serializers.ListField(
        child=serializers.ChoiceField(choices=list(DAYS)),
        required=False,
        max_length=7,
        help_text="all seven when absent",
    )
    start = serializers.RegexField(CLOCK, help_text="HH:MM, local")
    end = serializers.RegexField(CLOCK, help_text="HH:MM, local")
    time_zone = serializers.CharField(
        required=False, max_length=64, help_text="IANA name, e.g. Europe/Berlin (UTC)"
    )


class PolicyUpdateSerializer(ClosedSerializer):
    """The changeable fields of a policy; absent fields are left as they are."""

    # validate() refuses any other key; the schema says so (api/schema.py).
    refuses_unknown_fields = True

    maintenance_windows = MaintenanceWindowSerializer(  # type: ignore[call-arg]
        many=True,
        required=False,
        max_length=20,
        help_text="approved changes wait outside these windows; [] = any time",
    )
    window_bypasses_quick_oom = serializers.BooleanField(
        required=False,
        help_text="a pod OOM-killed within 10 minutes of starting is resized even "
        "outside the windows (upstream's quick-OOM rule)",
    )

    hpa_coordination = serializers.ChoiceField(
        choices=Policy.HpaCoordination.values,
        required=False,
        help_text="leave: the updater and the webhook leave a resource an HPA of the "
        "workload scales on to the HPA (upstream VPA's rule); coordinated "
        "(InPlaceOrRecreate): the updater resizes it in place together with the HPA "
        "target change that keeps the HPA scaling at the same usage per pod",
    )

    startup_boost = StartupBoostField(
        required=False,
        help_text="new pods get CPU times factor (or plus quantity), shrunk in place "
        "to the recommendation once Ready for the duration; {} turns it off",
    )

    mode = ModeField(required=False)
    inherit = serializers.ListField(
        child=serializers.ChoiceField(choices=list(CHANGEABLE_FIELDS)),
        required=False,
        max_length=len(CHANGEABLE_FIELDS),
        help_text="fields that stop being this workload's own: they take what its "
        "annotations, the policy rules or the default give",
    )
    profile = serializers.ChoiceField(choices=sorted(PROFILES), required=False)
    profile_overrides = ProfileOverridesField(
        required=False,
        help_text=(
            "fields of the profile set differently for this workload, checked against "
            "the profile (the new one when `profile` changes in the same request); "
            "fields equal to the profile's are not stored; `{}` removes every override"
        ),
    )
    container_policies = ContainerPolicyEntrySerializer(many=True, required=False)
    min_replicas = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=2**31 - 1
    )
    confirm_large_increase = serializers.BooleanField(
        required=False,
        default=False,
        help_text=(
            "must be true to save a change that would raise any container's target "
            "by more than 2x (else 409 `confirmation_required`, the containers named "
            "in `fields.confirm_large_increase`); not stored"
        ),
    )
    approval = serializers.ChoiceField(
        choices=Policy.Approval.choices,
        required=False,
        help_text="manual (the default): changes wait for an operator; automatic: "
        "they are approved as proposed",
    )
    eviction_requirements = EvictionRequirementSerializer(  # type: ignore[call-arg]
        many=True,  # max_length goes to the ListSerializer; the stubs miss it
        required=False,
        max_length=10,
        help_text="upstream updatePolicy.evictionRequirements: a pod is evicted only "
        "when every requirement holds for some container",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(self.initial_data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError(
                {
                    key: [
                        "cannot be changed; changeable fields are "
                        + ", ".join(self.fields)
                    ]
                    for key in unknown
                }
            )
        return attrs
