"""Dashboard forms: the policy editor turns fields into update_policy ``changes``,
the rule editor into what ``rule_edits.save_rule`` takes.

The form only shapes input; every rule lives in ``services.policy.changes`` (shared
with the API), and the service's field paths (``container_policies[0].minAllowed.cpu``)
are mapped back onto the form's fields so errors show next to what was typed.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django import forms
from django.contrib.auth import get_user_model

from recommender.engine import DEFAULT_PROFILE, PROFILES, get_profile
from recommender.engine.capping import MODE_AUTO, MODES
from recommender.engine.profiles import MEMORY_ESTIMATORS
from recommender.models import ApiToken, Policy, Workload
from recommender.roles import ROLE_ORDER
from recommender.services.policy.validation import CHANGEABLE_FIELDS
from recommender.web.presenters import OVERRIDE_LABELS

CONTROLLED_VALUES_CHOICES = [
    ("", "default (RequestsAndLimits)"),
    ("RequestsAndLimits", "RequestsAndLimits"),
    ("RequestsOnly", "RequestsOnly"),
]
# Form field of each containerPolicies key (per container row).
_FIELD_OF_PATH = {
    "mode": "mode",
    "minAllowed.cpu": "min_cpu",
    "minAllowed.memory": "min_memory",
    "maxAllowed.cpu": "max_cpu",
    "maxAllowed.memory": "max_memory",
    "controlledResources": "controlled_cpu",
    "controlledValues": "controlled_values",
    "containerName": "mode",
    "": "mode",
}
_PATH = re.compile(r"^container_policies\[(\d+)\]\.?(.*)$")
# The profile fields operators tune most, editable in the dashboard (the API takes
# every field; overrides of the others are kept as they are when the form is saved).
OVERRIDE_FIELDS = (
    "cpu_target_percentile",
    "cpu_lower_percentile",
    "cpu_upper_percentile",
    "memory_target_percentile",
    "memory_lower_percentile",
    "memory_upper_percentile",
    "margin_fraction",
    "memory_estimator",
)
OVERRIDE_PREFIX = "ov-"
# Fields shown and typed in percent (the service and the API keep fractions): people
# think of a margin as "15 %", and typing 15 into a fraction field meant +1500 %.
PERCENT_FIELDS = ("margin_fraction",)


def _to_percent(fraction: float) -> float:
    return round(fraction * 100, 6)


def _to_fraction(percent: float) -> float:
    return round(percent / 100, 10)


def profile_choices() -> list[tuple[str, str]]:
    """The engine's profiles."""
    return [(name, name) for name in PROFILES]


class PolicyForm(forms.Form):
    """Mode, profile, min replicas and a container policy row per container and "*"."""

    mode = forms.ChoiceField(choices=Policy.Mode.choices)
    profile = forms.ChoiceField(choices=())
    min_replicas = forms.IntegerField(required=False, min_value=1)
    approval = forms.ChoiceField(choices=Policy.Approval.choices, required=False)
    hpa_coordination = forms.ChoiceField(
        choices=Policy.HpaCoordination.choices, required=False
    )

    def __init__(self, *args: Any, workload: Workload, policy: Policy, **kwargs: Any):
        self.workload = workload
        self.policy = policy
        self.container_names = ["*", *(c.name for c in workload.containers.all())]
        initial = {
            "mode": policy.mode,
            "profile": policy.profile,
            "min_replicas": policy.min_replicas,
            "approval": policy.approval,
            "hpa_coordination": policy.hpa_coordination,
        }
        stored = {
            entry.get("containerName"): entry for entry in policy.container_policies
        }
        for index, name in enumerate(self.container_names):
            entry = stored.get(name, {})
            controlled = entry.get("controlledResources", ["cpu", "memory"])
            initial.update(
                {
                    f"cp{index}-mode": entry.get("mode", MODE_AUTO),
                    f"cp{index}-min_cpu": entry.get("minAllowed", {}).get("cpu", ""),
                    f"cp{index}-min_memory": entry.get("minAllowed", {}).get(
                        "memory", ""
                    ),
                    f"cp{index}-max_cpu": entry.get("maxAllowed", {}).get("cpu", ""),
                    f"cp{index}-max_memory": entry.get("maxAllowed", {}).get(
                        "memory", ""
                    ),
                    f"cp{index}-controlled_cpu": "cpu" in controlled,
                    f"cp{index}-controlled_memory": "memory" in controlled,
                    f"cp{index}-controlled_values": entry.get("controlledValues", ""),
                }
            )
        # Overrides are pre-filled with the effective values; a field left at the
        # profile's value (or emptied) is no override, so it follows the profile.
        try:
            self.base_profile = get_profile(policy.profile)
        except ValueError:  # a name no engine profile has: the service names it
            self.base_profile = get_profile(DEFAULT_PROFILE)
        stored_overrides = policy.profile_overrides or {}
        for name in OVERRIDE_FIELDS:
            value = stored_overrides.get(name, getattr(self.base_profile, name))
            if name in PERCENT_FIELDS and isinstance(value, int | float):
                value = _to_percent(value)
            initial[f"{OVERRIDE_PREFIX}{name}"] = value
        kwargs.setdefault("initial", initial)
        super().__init__(*args, **kwargs)
        profile_field = self.fields["profile"]
        assert isinstance(profile_field, forms.ChoiceField)
        profile_field.choices = profile_choices()
        for name in OVERRIDE_FIELDS:
            default = getattr(self.base_profile, name)
            field: forms.Field
            if name == "memory_estimator":
                field = forms.ChoiceField(
                    choices=[(e, e) for e in MEMORY_ESTIMATORS], required=False
                )
            elif name in PERCENT_FIELDS:
                # The service's bound (0-1) in the unit typed here.
                default = _to_percent(default)
                field = forms.FloatField(
                    required=False,
                    min_value=0,
                    max_value=100,
                    widget=forms.NumberInput(
                        attrs={
                            "step": "any",
                            "min": "0",
                            "max": "100",
                            "placeholder": f"{default:g}",
                        }
                    ),
                )
            else:
                field = forms.FloatField(
                    required=False,
                    widget=forms.NumberInput(
                        attrs={"step": "any", "placeholder": f"{default:g}"}
                    ),
                )
            field.label = OVERRIDE_LABELS[name]
            field.help_text = f"profile {self.base_profile.name}: {default}"
            if name in PERCENT_FIELDS:
                field.label = f"{field.label} (%)"
                field.help_text = (
                    f"profile {self.base_profile.name}: {default:g} %; 0 to 100"
                )
            self.fields[f"{OVERRIDE_PREFIX}{name}"] = field
        for index, _name in enumerate(self.container_names):
            self.fields[f"cp{index}-mode"] = forms.ChoiceField(
                choices=[(m, m) for m in MODES]
            )
            self.fields[f"cp{index}-min_cpu"] = forms.CharField(
                required=False, max_length=40
            )
            self.fields[f"cp{index}-min_memory"] = forms.CharField(
                required=False, max_length=40
            )
            self.fields[f"cp{index}-max_cpu"] = forms.CharField(
                required=False, max_length=40
            )
            self.fields[f"cp{index}-max_memory"] = forms.CharField(
                required=False, max_length=40
            )
            self.fields[f"cp{index}-controlled_cpu"] = forms.BooleanField(
                required=False
            )
            self.fields[f"cp{index}-controlled_memory"] = forms.BooleanField(
                required=False
            )
            self.fields[f"cp{index}-controlled_values"] = forms.ChoiceField(
                choices=CONTROLLED_VALUES_CHOICES, required=False
            )
        self._row_of_entry: list[int] = []

    def container_rows(self) -> list[dict[str, Any]]:
        """Bound fields grouped per container row, for the template."""
        rows = []
        for index, name in enumerate(self.container_names):
            rows.append(
                {
                    "name": "all containers (*)" if name == "*" else name,
                    "fields": {
                        key: self[f"cp{index}-{key}"]
                        for key in (
                            "mode",
                            "min_cpu",
                            "min_memory",
                            "max_cpu",
                            "max_memory",
                            "controlled_cpu",
                            "controlled_memory",
                            "controlled_values",
                        )
                    },
                }
            )
        return rows

    def override_fields(self) -> list[forms.BoundField]:
        """The profile override inputs, for the template."""
        return [self[f"{OVERRIDE_PREFIX}{name}"] for name in OVERRIDE_FIELDS]

    def has_overrides(self) -> bool:
        """True when the policy overrides any profile field (the section opens)."""
        return bool(self.policy.profile_overrides) or any(
            field.errors for field in self.override_fields()
        )

    def other_overrides(self) -> dict[str, Any]:
        """Stored overrides of fields the form does not show (kept on save)."""
        return {
            name: value
            for name, value in (self.policy.profile_overrides or {}).items()
            if name not in OVERRIDE_FIELDS
        }

    def profile_overrides(self) -> dict[str, Any]:
        """The overrides to store: form fields that differ from the profile the form
        showed, plus stored overrides of fields the form does not show."""
        data = self.cleaned_data
        overrides = self.other_overrides()
        for name in OVERRIDE_FIELDS:
            value = data.get(f"{OVERRIDE_PREFIX}{name}")
            if name in PERCENT_FIELDS and isinstance(value, int | float):
                value = _to_fraction(value)
            if value not in (None, "") and value != getattr(self.base_profile, name):
                overrides[name] = value
        return overrides

    def changes(self) -> dict[str, Any]:
        """The cleaned form as update_policy ``changes`` (default rows left out)."""
        data = self.cleaned_data
        entries = []
        self._row_of_entry = []
        for index, name in enumerate(self.container_names):

            def get(key: str, i: int = index) -> Any:
                return data.get(f"cp{i}-{key}")

            controlled = [r for r in ("cpu", "memory") if get(f"controlled_{r}")]
            entry: dict[str, Any] = {
                "containerName": name,
                "mode": get("mode") or MODE_AUTO,
            }
            minimum = {
                k: v
                for k, v in (("cpu", get("min_cpu")), ("memory", get("min_memory")))
                if v
            }
            maximum = {
                k: v
                for k, v in (("cpu", get("max_cpu")), ("memory", get("max_memory")))
                if v
            }
            if minimum:
                entry["minAllowed"] = {k: v.strip() for k, v in minimum.items()}
            if maximum:
                entry["maxAllowed"] = {k: v.strip() for k, v in maximum.items()}
            entry["controlledResources"] = controlled
            if get("controlled_values"):
                entry["controlledValues"] = get("controlled_values")
            is_default = (
                entry["mode"] == MODE_AUTO
                and not minimum
                and not maximum
                and controlled == ["cpu", "memory"]
                and "controlledValues" not in entry
            )
            if not is_default:
                entries.append(entry)
                self._row_of_entry.append(index)
        return {
            "mode": data["mode"],
            "profile": data["profile"],
            "min_replicas": data.get("min_replicas"),
            "approval": data.get("approval") or self.policy.approval,
            "hpa_coordination": data.get("hpa_coordination")
            or self.policy.hpa_coordination,
            "container_policies": entries,
            "profile_overrides": self.profile_overrides(),
        }

    def add_service_errors(self, fields: dict[str, list[str]]) -> None:
        """Show update_policy's InvalidInput errors next to the matching form fields."""
        for path, messages in fields.items():
            match = _PATH.match(path)
            if match:
                row = self._row_of_entry[int(match.group(1))]
                rest = match.group(2)
                key = _FIELD_OF_PATH.get(
                    rest, _FIELD_OF_PATH.get(rest.split(".")[0], "mode")
                )
                if (
                    rest.startswith(("minAllowed", "maxAllowed"))
                    and rest.count(".") == 1
                ):
                    key = _FIELD_OF_PATH.get(rest, "mode")
                target = f"cp{row}-{key}"
            elif path.startswith("profile_overrides."):
                name = path.removeprefix("profile_overrides.")
                target = f"{OVERRIDE_PREFIX}{name}"
                if target not in self.fields:
                    # An override the form does not show (set through the API).
                    target, messages = None, [f"{path}: {m}" for m in messages]
            else:
                target = path if path in self.fields else None
            for message in messages:
                self.add_error(target, message)


class RoleForm(forms.Form):
    """An admin gives a user a role (or takes every role away)."""

    user_id = forms.IntegerField(widget=forms.HiddenInput)
    role = forms.ChoiceField(
        choices=[("", "no role"), *((r.value, r.value) for r in ROLE_ORDER)],
        required=False,
    )


class ActiveForm(forms.Form):
    """An admin deactivates a user or reactivates one."""

    user_id = forms.IntegerField(widget=forms.HiddenInput)
    active = forms.TypedChoiceField(
        choices=[("true", "active"), ("false", "inactive")],
        coerce=lambda value: value == "true",
    )


class PasswordForm(forms.Form):
    """An admin gives a user a new password."""

    user_id = forms.IntegerField(widget=forms.HiddenInput)
    password = forms.CharField(widget=forms.PasswordInput, min_length=8, strip=False)


class NewUserForm(forms.Form):
    """An admin creates a user with a role."""

    username = forms.CharField(max_length=150)
    password = forms.CharField(widget=forms.PasswordInput, min_length=8)
    role = forms.ChoiceField(choices=[(r.value, r.value) for r in ROLE_ORDER])

    def clean_username(self) -> str:
        """Refuse a name that is taken."""
        name: str = self.cleaned_data["username"].strip()
        if get_user_model().objects.filter(username=name).exists():
            raise forms.ValidationError(f"a user named {name!r} already exists")
        return name


class TokenForm(forms.Form):
    """A new API token: a name and a scope the user's role allows.

    Names and scopes are checked by ``services.tokens.create_token`` (shared with
    ``manage.py apitoken``); the form only refuses a known scope the role may not have.
    """

    name = forms.CharField(required=False, strip=False)
    scope = forms.CharField(required=False)

    def __init__(self, *args: Any, allowed_scopes: list[str], role: str, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.allowed_scopes = allowed_scopes
        self.role = role
        labels = dict(ApiToken.Scope.choices)
        self.fields["scope"].widget = forms.Select(
            choices=[(s, labels[s]) for s in allowed_scopes]
        )
        self.fields["name"].widget.attrs.update(
            {"maxlength": 100, "placeholder": "ci-deploy", "autocomplete": "off"}
        )

    def clean_scope(self) -> str:
        """Refuse a scope above the role; unknown scopes are left to the service."""
        scope: str = self.cleaned_data["scope"]
        if scope in ApiToken.Scope.values and scope not in self.allowed_scopes:
            raise forms.ValidationError(
                f"the {self.role} role may create "
                f"{' or '.join(self.allowed_scopes)} tokens only, not {scope}"
            )
        return scope


# The policy fields the rules page edits one by one; the others go in its JSON field.
RULE_POLICY_INPUTS = ("mode", "profile", "approval", "min_replicas")
_NOT_SET = [("", "not set")]


class RuleForm(forms.Form):
    """A policy rule on the rules page; :meth:`rule_data` is what
    ``rule_edits.save_rule`` takes (its ``RULE_KEYS``).

    The form only shapes input (lists split at commas and spaces, the further policy
    fields read as a JSON object); the service checks every value, and
    :meth:`add_service_errors` puts its errors next to the inputs.
    """

    name = forms.CharField(max_length=100)
    priority = forms.IntegerField(initial=0)
    is_enabled = forms.BooleanField(required=False, initial=True, label="Enabled")
    cluster = forms.ChoiceField(required=False)
    namespaces = forms.CharField(required=False, max_length=13000)
    namespace_selector = forms.CharField(required=False, max_length=1000)
    workload_selector = forms.CharField(required=False, max_length=1000)
    kinds = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple
    )
    mode = forms.ChoiceField(required=False, choices=_NOT_SET + Policy.Mode.choices)
    profile = forms.ChoiceField(required=False)
    approval = forms.ChoiceField(
        required=False, choices=_NOT_SET + Policy.Approval.choices
    )
    min_replicas = forms.IntegerField(required=False)
    more_policy = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 4, "cols": 60})
    )

    def __init__(
        self, *args: Any, clusters: list[str], kinds: tuple[str, ...], **kw: Any
    ) -> None:
        super().__init__(*args, **kw)
        cluster_field = self.fields["cluster"]
        assert isinstance(cluster_field, forms.ChoiceField)
        cluster_field.choices = [("", "every cluster")] + [(c, c) for c in clusters]
        kinds_field = self.fields["kinds"]
        assert isinstance(kinds_field, forms.MultipleChoiceField)
        kinds_field.choices = [(k, k) for k in kinds]
        profile_field = self.fields["profile"]
        assert isinstance(profile_field, forms.ChoiceField)
        profile_field.choices = _NOT_SET + profile_choices()

    @staticmethod
    def initial_of(rule: dict[str, Any]) -> dict[str, Any]:
        """The form's initial values from a rule as ``rule_snapshot`` gives it."""
        policy = dict(rule["policy"])
        initial = {
            key: rule[key]
            for key in (
                "name",
                "priority",
                "is_enabled",
                "namespace_selector",
                "workload_selector",
                "kinds",
            )
        }
        initial["cluster"] = rule["cluster"] or ""
        initial["namespaces"] = ", ".join(rule["namespaces"])
        for name in RULE_POLICY_INPUTS:
            initial[name] = policy.pop(name, "")
        initial["more_policy"] = (
            json.dumps(policy, indent=2, sort_keys=True) if policy else ""
        )
        return initial

    def clean_more_policy(self) -> dict[str, Any]:
        text = self.cleaned_data["more_policy"].strip()
        if not text:
            return {}
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise forms.ValidationError(
                'a JSON object of policy fields, e.g. {"hpa_coordination": "off"}'
            )
        return value

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        more = cleaned.get("more_policy") or {}
        for name in RULE_POLICY_INPUTS:
            if cleaned.get(name) not in ("", None) and name in more:
                self.add_error(
                    "more_policy", f"{name} is set above: leave it out of the JSON"
                )
        return cleaned

    def rule_data(self) -> dict[str, Any]:
        """The rule as ``save_rule`` takes it (call after ``is_valid()``)."""
        cleaned = self.cleaned_data
        policy = dict(cleaned["more_policy"])
        for name in RULE_POLICY_INPUTS:
            if cleaned[name] not in ("", None):
                policy[name] = cleaned[name]
        return {
            "name": cleaned["name"],
            "priority": cleaned["priority"],
            "is_enabled": cleaned["is_enabled"],
            "cluster": cleaned["cluster"] or None,
            "namespaces": [n for n in re.split(r"[\s,]+", cleaned["namespaces"]) if n],
            "namespace_selector": cleaned["namespace_selector"],
            "workload_selector": cleaned["workload_selector"],
            "kinds": list(cleaned["kinds"]),
            "policy": policy,
        }

    def add_service_errors(self, fields: dict[str, list[str]]) -> None:
        """The service's errors next to the inputs: a rule key or an edited policy
        field on its own input, any other policy field on the JSON."""
        for path, messages in fields.items():
            head = re.split(r"[.\[]", path, maxsplit=1)[0]
            if head in self.fields and head != "more_policy":
                target: str | None = head
            elif head in CHANGEABLE_FIELDS:
                target = "more_policy"
            else:
                target = None
            for message in messages:
                self.add_error(
                    target, message if target == head else f"{path}: {message}"
                )
