"""The engine's explanation in plain words.

``Recommendation.explanation`` is ``Explanation.to_dict()``
(recommender/engine/explanation.py) plus ``caps`` added by the refresh service. Rows
written by older or newer engines may lack keys or have others: known keys get a
sentence, missing ones are skipped, and unknown top-level keys are still shown as "name:
value" rather than dropped.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from recommender.engine.quantity import humanize_cpu, humanize_memory

DAY_S = 86400.0
# The multiplication sign, for people (ruff would flag the literal as an ambiguous "x").
TIMES = "\u00d7"
# Keys rendered by describe_explanation; anything else is listed as is.
_KNOWN = {
    "profile",
    "margin_fraction",
    "containers_in_pod",
    "sample_count",
    "first_sample_s",
    "last_sample_s",
    "history_span_s",
    "memory_peaks_weight",
    "resources",
    "reason",
    "notes",
    "caps",
    "profile_overrides",
}
_BOUND_NAMES = (
    ("target", "Target"),
    ("lower_bound", "Lower bound"),
    ("upper_bound", "Upper bound"),
)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _span(seconds: float) -> str:
    if seconds >= DAY_S:
        return f"{seconds / DAY_S:.1f} days".replace(".0 days", " days")
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} hours".replace(".0 hours", " hours")
    return f"{seconds / 60:.0f} minutes"


def _amount(resource: str, value: Any) -> str:
    number = _number(value)
    if number is None:
        return "—"
    # Exact quantities ("215785635") are unreadable: the same humanizers as the
    # dashboard's cells, rounded, never truncated.
    if resource == "cpu":
        return humanize_cpu(number)
    return humanize_memory(number)


def _raw(resource: str, value: Any) -> str:
    """The histogram value read: cores for CPU, bytes for memory."""
    number = _number(value)
    if number is None:
        return "—"
    return _amount(resource, number * 1000 if resource == "cpu" else number)


def _bound(resource: str, bound: dict[str, Any], margin: float | None) -> str:
    """One bound as a chain: read → margin → confidence → pod minimum → value."""
    parts = []
    percentile = _number(bound.get("percentile"))
    if bound.get("source") == "peak":
        parts.append(f"highest stored peak {_raw(resource, bound.get('raw'))}")
    elif percentile is not None:
        parts.append(
            f"p{percentile * 100:g} of the decayed usage = "
            f"{_raw(resource, bound.get('raw'))}"
        )
    if "with_margin" in bound:
        margin_text = (
            f"+{margin * 100:g}% margin" if margin is not None else "with margin"
        )
        parts.append(f"{margin_text} → {_amount(resource, bound['with_margin'])}")
    multiplier = _number(bound.get("multiplier"))
    if bound.get("multiplier_infinite"):
        parts.append(f"{TIMES} an unbounded confidence multiplier (no history yet)")
    elif multiplier is not None and multiplier != 1.0:
        parts.append(
            f"{TIMES} confidence multiplier {multiplier:.4g} → "
            f"{_amount(resource, bound.get('after_confidence'))}"
        )
    if bound.get("pod_minimum_applied"):
        parts.append(
            "raised to the pod minimum share "
            f"{_amount(resource, bound.get('pod_minimum'))}"
        )
    if "value" in bound:
        parts.append(f"= {_amount(resource, bound['value'])}")
    return ", ".join(parts) if parts else "—"


def _time(seconds: Any) -> str | None:
    number = _number(seconds)
    if number is None:
        return None
    return datetime.fromtimestamp(number, tz=UTC).strftime("%b %-d, %H:%M UTC")


def _caps(caps: Any) -> str:
    lines = []
    for cap in caps if isinstance(caps, list) else []:
        if not isinstance(cap, dict):
            lines.append(str(cap))
            continue
        resource = str(cap.get("resource", ""))
        text = f"{cap.get('bound', '')}: {cap.get('reason', 'capped')}".strip(": ")
        if "before" in cap and "after" in cap:
            before, after = (
                _amount(resource, cap["before"]),
                _amount(resource, cap["after"]),
            )
            text += f" ({before} → {after})"
        lines.append(text)
    return "; ".join(lines) if lines else "none: the policy did not change any value"


# Profile fields (engine Profile) as the dashboard names them.
OVERRIDE_LABELS = {
    "cpu_target_percentile": "CPU target percentile",
    "cpu_lower_percentile": "CPU lower-bound percentile",
    "cpu_upper_percentile": "CPU upper-bound percentile",
    "memory_target_percentile": "Memory target percentile",
    "memory_lower_percentile": "Memory lower-bound percentile",
    "memory_upper_percentile": "Memory upper-bound percentile",
    "memory_estimator": "Memory estimator",
    "margin_fraction": "Safety margin",
    "cpu_half_life_s": "CPU half-life",
    "memory_half_life_s": "Memory half-life",
    "memory_window_s": "Memory peak window",
    "memory_window_count": "Memory peak windows kept",
    "confidence_interval_cpu_s": "CPU confidence interval",
    "confidence_interval_memory_s": "Memory confidence interval",
    "pod_min_cpu_millicores": "Pod minimum CPU",
    "pod_min_memory_bytes": "Pod minimum memory",
    "oom_bump_ratio": "OOM bump ratio",
    "oom_min_bump_bytes": "Smallest OOM bump",
}


def _override_value(name: str, value: Any) -> str:
    """One profile field's value as people read it: p95, +10%, 12 hours, 256Mi."""
    number = _number(value)
    if number is None:
        return _value(value)
    if name.endswith("_percentile"):
        return f"p{number * 100:g}"
    if name == "margin_fraction":
        return f"+{number * 100:g}%"
    if name.endswith("_s"):
        return _span(number).replace("1 days", "1 day")
    if name.endswith("_bytes"):
        return _amount("memory", number)
    if name.endswith("_millicores"):
        return _amount("cpu", number)
    return _value(value)


def describe_overrides(overrides: Any) -> list[str]:
    """``{field: {"profile": a, "override": b}}``
    (services.policy_validation.overridden_fields) as "CPU target percentile p90 →
    p95" lines, in the given order."""
    lines = []
    for name, change in overrides.items() if isinstance(overrides, dict) else []:
        label = OVERRIDE_LABELS.get(str(name), str(name))
        if isinstance(change, dict):
            before = _override_value(str(name), change.get("profile"))
            after = _override_value(str(name), change.get("override"))
            lines.append(f"{label} {before} → {after}")
        else:
            lines.append(f"{label}: {_value(change)}")
    return lines


def is_profile_stale(
    recommendation: Any, *, profile_name: str, overrides: dict[str, Any]
) -> bool:
    """True when ``recommendation`` was computed with another profile or other
    overrides than the policy's now: rows are stored only when a value moves."""
    if recommendation is None:
        return False
    explanation = recommendation.explanation or {}
    stored = (
        explanation.get("profile_overrides", {})
        if isinstance(explanation, dict)
        else {}
    )
    return bool(recommendation.profile != profile_name or stored != overrides)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return ", ".join(_value(v) for v in value) or "none"
    if value is None:
        return "—"
    return str(value)


def describe_explanation(explanation: dict[str, Any] | None) -> list[tuple[str, str]]:
    """(label, sentence) pairs for the workload page, in a stable order."""
    if not explanation or not isinstance(explanation, dict):
        return []
    lines: list[tuple[str, str]] = []
    if explanation.get("reason"):
        lines.append(("Why no recommendation", str(explanation["reason"])))
    margin = _number(explanation.get("margin_fraction"))
    resources = explanation.get("resources")
    for name, data in resources.items() if isinstance(resources, dict) else []:
        if not isinstance(data, dict):
            continue
        label = "CPU" if name == "cpu" else "Memory" if name == "memory" else name
        confidence = _number(data.get("confidence"))
        if confidence is not None:
            interval = _number(data.get("confidence_interval_s")) or DAY_S
            lines.append(
                (
                    f"{label} confidence",
                    f"{confidence:.2f}: history worth {_span(confidence * interval)} "
                    "(the smaller of the history span and the sample count); "
                    "bounds are widened by "
                    f"{TIMES} {_value(data.get('lower_multiplier'))} (lower) "
                    + (
                        "and unbounded (upper)"
                        if data.get("upper_multiplier_infinite")
                        else f"and {TIMES} {_value(data.get('upper_multiplier'))} "
                        "(upper)"
                    ),
                )
            )
        for key, bound_label in _BOUND_NAMES:
            bound = data.get(key)
            if isinstance(bound, dict):
                lines.append(
                    (f"{label} {bound_label.lower()}", _bound(name, bound, margin))
                )
    if margin is not None:
        lines.append(("Safety margin", f"+{margin * 100:g}% on top of each value read"))
    if _number(explanation.get("sample_count")) is not None:
        lines.append(("Samples", f"{int(explanation['sample_count']):,}"))
    span = _number(explanation.get("history_span_s"))
    if span is not None:
        first, last = (
            _time(explanation.get("first_sample_s")),
            _time(explanation.get("last_sample_s")),
        )
        text = _span(span)
        if first and last:
            text += f" (from {first} to {last})"
        lines.append(("History span", text))
    if explanation.get("containers_in_pod"):
        lines.append(
            (
                "Pod minimum",
                f"split over {explanation['containers_in_pod']} container(s) "
                "of the pod",
            )
        )
    if explanation.get("profile"):
        lines.append(("Profile", str(explanation["profile"])))
    overridden = describe_overrides(explanation.get("profile_overrides"))
    if overridden:
        lines.append(("Profile overrides", "; ".join(overridden)))
    if "caps" in explanation:
        lines.append(("Policy caps applied", _caps(explanation["caps"])))
    notes = explanation.get("notes")
    if isinstance(notes, list) and notes:
        lines.append(("Notes", "; ".join(str(n) for n in notes)))
    for key, value in explanation.items():
        if key not in _KNOWN:
            lines.append((key.replace("_", " ").capitalize(), _value(value)))
    return lines


def audit_fields(data: Any) -> list[tuple[str, str]]:
    """An audit event's ``before``/``after`` as ``(field, value)`` rows people read:
    nested objects become dotted fields (``profile_overrides.margin_fraction``), lists
    of objects compact JSON, an empty object ``none``."""
    if not isinstance(data, dict):
        return [] if data in (None, "") else [("", _value(data))]
    rows: list[tuple[str, str]] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            if not value:
                rows.append((prefix, "none"))
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), inner)
        elif isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
            rows.append((prefix, json.dumps(value, separators=(", ", ": "))))
        else:
            rows.append((prefix, _value(value)))

    walk("", data)
    return rows
