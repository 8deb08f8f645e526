"""Validation of what people type into a policy: container policies (upstream's
``resourcePolicy.containerPolicies``), profile overrides with the bounds of typed
fractions, and eviction requirements. Every error names its field; nothing here
writes."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import Any

from recommender.engine import Profile, get_profile
from recommender.engine.capping import MODE_AUTO, MODES, ContainerPolicy
from recommender.engine.limits import CONTROLLED_VALUES
from recommender.engine.quantity import (
    format_cpu,
    format_memory,
    parse_cpu_millicores,
    parse_memory_bytes,
)
from recommender.engine.resources import CPU, MEMORY, RESOURCE_NAMES, Resources
from recommender.engine.startup_boost import parse_boost
from recommender.errors import InvalidInput
from recommender.models import Policy, Workload
from recommender.services.policy.windows import parse_windows

# Profile fields an override may set: every knob, but not the name (the profile's
# identity, stored in Policy.profile).
OVERRIDABLE_FIELDS = tuple(
    f.name for f in dataclasses.fields(Profile) if f.name != "name"
)
# Keys of one containerPolicies entry, as upstream spells them.
CONTAINER_POLICY_KEYS = (
    "containerName",
    "mode",
    "minAllowed",
    "maxAllowed",
    "controlledResources",
    "controlledValues",
)
CONTAINER_MODES = MODES
# Bounds of the fractions and factors people type, tighter than the engine's (which
# takes any finite margin): a margin above 100 % or an OOM bump above 3x is a typo
# (``15`` meaning 15 %), not a tuning. The API takes fractions; the dashboard shows the
# margin in percent. Percentiles are fractions in [0, 1] (the engine's bound).
OVERRIDE_BOUNDS: dict[str, tuple[float, float, str]] = {
    "margin_fraction": (0.0, 1.0, "a fraction from 0 to 1 (0-100 %; 0.15 = +15 %)"),
    "oom_bump_ratio": (1.0, 3.0, "a factor from 1 to 3"),
}


def _quantities(
    raw: object, *, field: str, errors: dict[str, list[str]]
) -> tuple[Resources, dict[str, str]]:
    """Parse a ResourceList ``{"cpu": "100m"}`` into Resources and canonical text."""
    if raw is None:
        return Resources(), {}
    if not isinstance(raw, dict):
        errors.setdefault(field, []).append(
            'must be an object such as {"cpu": "100m", "memory": "128Mi"}'
        )
        return Resources(), {}
    amounts = Resources()
    canonical: dict[str, str] = {}
    for resource, text in raw.items():
        key = f"{field}.{resource}"
        if resource not in RESOURCE_NAMES:
            errors.setdefault(key, []).append("only cpu and memory can be set")
            continue
        if text is None or text == "":
            continue
        # Numbers are accepted too: JSON clients send 1 or 0.5 for cores.
        is_number = isinstance(text, int | float) and not isinstance(text, bool)
        as_text = str(text) if is_number else text
        try:
            if resource == CPU:
                value = parse_cpu_millicores(as_text)
                canonical[CPU] = format_cpu(value)
            else:
                value = parse_memory_bytes(as_text)
                canonical[MEMORY] = format_memory(value)
        except ValueError as exc:
            errors.setdefault(key, []).append(str(exc))
            continue
        amounts = amounts.with_amount(resource, value)
    return amounts, canonical


def _container_policy(
    raw: object, *, index: int, container_names: set[str], errors: dict[str, list[str]]
) -> dict[str, Any] | None:
    """Validate one containerPolicies entry; return it in canonical form or None."""
    field = f"container_policies[{index}]"
    if not isinstance(raw, dict):
        errors.setdefault(field, []).append("must be an object with a containerName")
        return None
    before = sum(len(v) for v in errors.values())
    for key in raw:
        if key not in CONTAINER_POLICY_KEYS:
            errors.setdefault(f"{field}.{key}", []).append(
                f"unknown key; expected one of {', '.join(CONTAINER_POLICY_KEYS)}"
            )
    name = raw.get("containerName")
    if not isinstance(name, str) or not name:
        errors.setdefault(f"{field}.containerName", []).append(
            'is required: a container of this workload, or "*" for all'
        )
    elif name != "*" and name not in container_names:
        known = ", ".join(sorted(container_names)) or "none"
        errors.setdefault(f"{field}.containerName", []).append(
            f"{name!r} is not a container of this workload (containers: {known})"
        )
    mode = raw.get("mode", MODE_AUTO)
    if mode not in CONTAINER_MODES:
        errors.setdefault(f"{field}.mode", []).append(
            f"must be Auto or Off, not {mode!r}"
        )
    min_allowed, min_text = _quantities(
        raw.get("minAllowed"), field=f"{field}.minAllowed", errors=errors
    )
    max_allowed, max_text = _quantities(
        raw.get("maxAllowed"), field=f"{field}.maxAllowed", errors=errors
    )
    for resource in RESOURCE_NAMES:
        low, high = min_allowed.get(resource), max_allowed.get(resource)
        if low is not None and high is not None and high < low:
            errors.setdefault(f"{field}.maxAllowed.{resource}", []).append(
                f"is lower than minAllowed "
                f"({max_text[resource]} < {min_text[resource]})"
            )
    controlled = raw.get("controlledResources", [CPU, MEMORY])
    if not isinstance(controlled, list | tuple) or any(
        r not in RESOURCE_NAMES for r in controlled
    ):
        errors.setdefault(f"{field}.controlledResources", []).append(
            f'must be a list of "cpu" and "memory", not {controlled!r}'
        )
        controlled = [CPU, MEMORY]
    controlled = [
        r for r in RESOURCE_NAMES if r in controlled
    ]  # canonical order, no dupes
    values = raw.get("controlledValues")
    if values is not None and values not in CONTROLLED_VALUES:
        errors.setdefault(f"{field}.controlledValues", []).append(
            f"must be one of {', '.join(CONTROLLED_VALUES)}, not {values!r}"
        )
        values = None
    if sum(len(v) for v in errors.values()) > before:
        return None
    try:
        # The engine holds the upstream validation rules (e.g. Off with
        # RequestsAndLimits).
        ContainerPolicy(
            # A str by now: anything else was an error above, and returned.
            container_name=str(name),
            mode=mode,
            min_allowed=min_allowed,
            max_allowed=max_allowed,
            controlled_resources=tuple(controlled),
            controlled_values=values,
        )
    except ValueError as exc:
        errors.setdefault(field, []).append(str(exc))
        return None
    entry: dict[str, Any] = {"containerName": name, "mode": mode}
    if min_text:
        entry["minAllowed"] = min_text
    if max_text:
        entry["maxAllowed"] = max_text
    entry["controlledResources"] = controlled
    if values is not None:
        entry["controlledValues"] = values
    return entry


def validate_container_policies(
    raw: object, *, container_names: set[str]
) -> list[dict[str, Any]]:
    """Check upstream-shaped containerPolicies; return them canonical or raise."""
    errors: dict[str, list[str]] = {}
    if not isinstance(raw, list):
        raise InvalidInput(
            "container_policies must be a list of containerPolicies entries",
            field="container_policies",
        )
    result = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        entry = _container_policy(
            item, index=index, container_names=container_names, errors=errors
        )
        if entry is None:
            continue
        if entry["containerName"] in seen:
            errors.setdefault(f"container_policies[{index}].containerName", []).append(
                f"{entry['containerName']!r} has more than one policy"
            )
        seen.add(entry["containerName"])
        result.append(entry)
    if errors:
        field, messages = next(iter(errors.items()))
        raise InvalidInput(f"{field}: {messages[0]}", fields=errors) from None
    return result


def parse_container_policies(stored: list[dict[str, Any]]) -> list[ContainerPolicy]:
    """Stored (canonical) containerPolicies as engine ``ContainerPolicy`` objects."""
    policies = []
    for entry in stored:
        policies.append(
            ContainerPolicy(
                container_name=entry["containerName"],
                mode=entry.get("mode", MODE_AUTO),
                min_allowed=Resources(
                    _maybe(parse_cpu_millicores, entry.get("minAllowed", {}).get(CPU)),
                    _maybe(parse_memory_bytes, entry.get("minAllowed", {}).get(MEMORY)),
                ),
                max_allowed=Resources(
                    _maybe(parse_cpu_millicores, entry.get("maxAllowed", {}).get(CPU)),
                    _maybe(parse_memory_bytes, entry.get("maxAllowed", {}).get(MEMORY)),
                ),
                controlled_resources=tuple(
                    entry.get("controlledResources", (CPU, MEMORY))
                ),
                controlled_values=entry.get("controlledValues"),
            )
        )
    return policies


def _maybe(parse: Any, text: str | None) -> int | None:
    return None if text is None else parse(text)


def validate_profile(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInput("profile must be a profile name", field="profile")
    try:
        get_profile(value)
    except ValueError as exc:
        raise InvalidInput(str(exc), field="profile") from None
    return value


def _engine_message(exc: Exception, name: str) -> str:
    """The engine's ValueError text without its ``name: `` prefix (the key says it)."""
    text = str(exc)
    prefix = f"{name}: "
    return text[len(prefix) :] if text.startswith(prefix) else text


def validate_profile_overrides(raw: object, *, profile_name: str) -> dict[str, Any]:
    """Check overrides of ``profile_name``'s fields with the engine; return those that
    differ from the profile (so ``{}`` means the profile as is), or raise InvalidInput
    keyed ``profile_overrides.<field>``."""
    if not isinstance(raw, dict):
        raise InvalidInput(
            'profile_overrides must be an object such as {"cpu_target_percentile": '
            "0.95}",
            field="profile_overrides",
        )
    base = get_profile(profile_name)
    errors: dict[str, list[str]] = {}
    values: dict[str, Any] = {}
    for name, value in raw.items():
        field = f"profile_overrides.{name}"
        if name not in OVERRIDABLE_FIELDS:
            errors.setdefault(field, []).append(
                "unknown profile field; fields that can be overridden are "
                + ", ".join(OVERRIDABLE_FIELDS)
            )
            continue
        # One field at a time, so every bad field is named, not just the first. An error
        # about another field (lower <= target <= upper) is a clash between fields,
        # judged below with all of them together.
        try:
            base.with_overrides(**{name: value})
        except (ValueError, TypeError) as exc:
            if str(exc).split(":", 1)[0] in (name, str(exc)):
                errors.setdefault(field, []).append(_engine_message(exc, name))
                continue
        if name in OVERRIDE_BOUNDS:
            low, high, what = OVERRIDE_BOUNDS[name]
            if not low <= value <= high:
                errors.setdefault(field, []).append(f"must be {what}, not {value!r}")
                continue
        # JSON has one number type: store 1 as 1.0 where the engine's field is a float.
        if isinstance(getattr(base, name), float) and isinstance(value, int):
            value = float(value)
        values[name] = value
    if errors:
        field, messages = next(iter(errors.items()))
        raise InvalidInput(f"{field}: {messages[0]}", fields=errors)
    # And all together: the engine checks that each band holds its target.
    try:
        base.with_overrides(**values)
    except (ValueError, TypeError) as exc:
        name = str(exc).split(":", 1)[0]
        if name not in values:
            # Blame a field the caller sent that the message names (e.g. a target
            # raised above the profile's upper bound).
            name = next((n for n in values if n in str(exc)), name)
        field = f"profile_overrides.{name}" if name in values else "profile_overrides"
        raise InvalidInput(str(exc), field=field) from None
    return {
        name: values[name]
        for name in OVERRIDABLE_FIELDS
        if name in values and values[name] != getattr(base, name)
    }


def overridden_fields(profile: Profile) -> dict[str, dict[str, Any]]:
    """``{field: {"profile": named profile's value, "override": value}}`` for each
    field of ``profile`` that differs from the profile it is named after."""
    try:
        base = get_profile(profile.name)
    except ValueError:
        return {}
    return {
        name: {"profile": getattr(base, name), "override": getattr(profile, name)}
        for name in OVERRIDABLE_FIELDS
        if getattr(profile, name) != getattr(base, name)
    }


def effective_overrides(policy: Policy | None) -> dict[str, dict[str, Any]]:
    """The policy's overrides as :func:`overridden_fields` gives them, i.e. what the
    next refresh applies; ``{}`` without a policy or with unusable stored values."""
    if policy is None:
        return {}
    try:
        profile = get_profile(policy.profile).with_overrides(
            **(policy.profile_overrides or {})
        )
    except (ValueError, TypeError):
        return {}  # the refresh falls back to upstream's profile too
    return overridden_fields(profile)


CHANGE_REQUIREMENTS = ("TargetHigherThanRequests", "TargetLowerThanRequests")


def validate_eviction_requirements(raw: object) -> list[dict[str, Any]]:
    """Upstream's ``updatePolicy.evictionRequirements``, canonical; errors named."""
    field = "eviction_requirements"
    if not isinstance(raw, list):
        raise InvalidInput(f"{field} must be a list, not {raw!r}", field=field)
    clean: list[dict[str, Any]] = []
    errors: dict[str, list[str]] = {}
    for index, entry in enumerate(raw):
        where = f"{field}[{index}]"
        if not isinstance(entry, dict) or set(entry) - {
            "resources",
            "changeRequirement",
        }:
            errors.setdefault(where, []).append(
                "must be an object with resources and changeRequirement only"
            )
            continue
        resources = entry.get("resources")
        if (
            not isinstance(resources, list)
            or not resources
            or any(r not in ("cpu", "memory") for r in resources)
        ):
            errors.setdefault(f"{where}.resources", []).append(
                f"must be a non-empty list of cpu and memory, not {resources!r}"
            )
            continue
        change = entry.get("changeRequirement")
        if change not in CHANGE_REQUIREMENTS:
            errors.setdefault(f"{where}.changeRequirement", []).append(
                f"must be one of {', '.join(CHANGE_REQUIREMENTS)}, not {change!r}"
            )
            continue
        clean.append({"resources": sorted(set(resources)), "changeRequirement": change})
    if errors:
        raise InvalidInput("invalid eviction requirements", fields=errors)
    return clean


def validate_startup_boost(raw: object) -> dict[str, Any]:
    """A CPU startup boost (factor or quantity, and duration), canonical; {} is off."""
    try:
        spec = parse_boost(raw)
    except ValueError as exc:
        raise InvalidInput(str(exc), field="startup_boost") from exc
    return {} if spec is None else spec.as_json()


def named_profile(name: str, overrides: dict[str, Any] | None) -> Profile:
    """A policy's profile: the named one with the policy's field overrides."""
    return get_profile(name).with_overrides(**(overrides or {}))


def profile_or_default(workload: Workload) -> Profile:
    """The workload's profile, or upstream's when its policy is unusable."""
    try:
        policy = workload.policy
        return named_profile(policy.profile, policy.profile_overrides)
    except (ValueError, TypeError, Policy.DoesNotExist):
        return get_profile("vpa")


# --- A policy change as a whole (update_policy, rules, annotations) ---------------

# The keys of ``changes`` that update_policy accepts.
CHANGEABLE_FIELDS = (
    "mode",
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
)


def _one_of(field: str, choices: list[str]) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if value not in choices:
            raise InvalidInput(
                f"must be one of {', '.join(choices)}, not {value!r}", field=field
            )
        return str(value)

    return check


def _true_or_false(field: str) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        if not isinstance(value, bool):
            raise InvalidInput(f"must be true or false, not {value!r}", field=field)
        return value

    return check


def _min_replicas(value: Any) -> int | None:
    if value in (None, ""):
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(
            f"must be a whole number of at least 1, or empty, not {value!r}",
            field="min_replicas",
        )
    return value


def _maintenance_windows(value: Any) -> list[Any]:
    parse_windows(value)
    return list(value or [])


def validate_changes(
    changes: dict[str, Any], *, container_names: set[str], policy: Policy
) -> dict[str, Any]:
    """The validated, canonical ``changes``; InvalidInput names every bad field."""
    if not isinstance(changes, dict):
        raise InvalidInput("changes must be an object", field="changes")
    errors: dict[str, list[str]] = {}
    clean: dict[str, Any] = {}
    for key in changes:
        if key not in CHANGEABLE_FIELDS:
            errors.setdefault(key, []).append(
                "cannot be changed; changeable fields are "
                f"{', '.join(CHANGEABLE_FIELDS)}"
            )
    rules: dict[str, Callable[[Any], Any]] = {
        "mode": _one_of("mode", Policy.Mode.values),
        "profile": validate_profile,
        "min_replicas": _min_replicas,
        "approval": _one_of("approval", Policy.Approval.values),
        "eviction_requirements": validate_eviction_requirements,
        "maintenance_windows": _maintenance_windows,
        "window_bypasses_quick_oom": _true_or_false("window_bypasses_quick_oom"),
        "hpa_coordination": _one_of("hpa_coordination", Policy.HpaCoordination.values),
        "startup_boost": validate_startup_boost,
        "container_policies": partial(
            validate_container_policies, container_names=container_names
        ),
    }
    for name, rule in rules.items():
        if name in changes:
            try:
                clean[name] = rule(changes[name])
            except InvalidInput as exc:
                for field, messages in exc.fields.items():
                    errors.setdefault(field, []).extend(messages)
    # Overrides are checked against the profile they will apply to: the new one when
    # the same call changes it. A profile change alone re-checks (and re-trims) the
    # stored overrides, so they stay valid and keep only real differences.
    if "profile_overrides" in changes or "profile" in clean:
        is_stored = "profile_overrides" not in changes
        raw = policy.profile_overrides if is_stored else changes["profile_overrides"]
        try:
            clean["profile_overrides"] = validate_profile_overrides(
                raw, profile_name=clean.get("profile", policy.profile)
            )
        except InvalidInput as exc:
            for field, messages in exc.fields.items():
                errors.setdefault(field, []).extend(
                    f"{m} (stored override: send profile_overrides to change it)"
                    if is_stored
                    else m
                    for m in messages
                )
    if errors:
        field, messages = next(iter(errors.items()))
        raise InvalidInput(f"{field}: {messages[0]}", fields=errors)
    return clean


def validate_policy_fields(changes: dict[str, Any]) -> dict[str, Any]:
    """Policy fields given without a workload (a rule, an annotation), validated and
    canonical as :func:`update_policy` validates them; container policies may name
    any container (or ``*``)."""
    raw = changes.get("container_policies") if isinstance(changes, dict) else None
    names = {
        str(entry.get("containerName"))
        for entry in (raw if isinstance(raw, list) else [])
        if isinstance(entry, dict) and entry.get("containerName")
    }
    return validate_changes(changes, container_names=names, policy=Policy())
