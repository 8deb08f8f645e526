"""The engine's explanation in plain words.

``Recommendation.explanation`` is ``Explanation.to_dict()``
(recommender/engine/explanation.py) plus ``caps`` added by the refresh service. Rows
written by older or newer engines may lack keys or have others: known keys get a
sentence, missing ones are skipped, and unknown top-level keys are still shown as "name:
value" rather than dropped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from recommender.engine.profiles import PROFILES
from recommender.engine.quantity import humanize_cpu, humanize_memory

DAY_S = 86400.0
# The recommendation history is drawn once it spans this long (the workload page says
# "an hour"): a fresh install's first refreshes, seconds apart, would make a chart of a
# few seconds.
MIN_HISTORY_SPAN_S = 3600.0
# The multiplication sign, for people (ruff would flag the literal as an ambiguous "x").
TIMES = "\u00d7"


def history_span_s(history: Sequence[Any]) -> float:
    """Seconds between the oldest and the newest row of a recommendation history."""
    times = [row.created_at for row in history]
    return (max(times) - min(times)).total_seconds() if len(times) > 1 else 0.0


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
    "omitted",
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


def _bound(
    resource: str, bound: dict[str, Any], margin: float | None, margin_floor: int = 0
) -> str:
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
        # The adaptive memory margin (memory_margin_spread > 0) differs per container
        # from the profile's margin_fraction: say the one applied (bytes are large
        # enough that truncation does not blur it).
        base, with_margin = (
            _number(bound.get("base")),
            _number(bound.get("with_margin")),
        )
        if (
            resource == "memory"
            and base
            and with_margin is not None
            and margin is not None
        ):
            applied = with_margin / base - 1
            if margin_floor and with_margin - base == margin_floor:
                # headroom's smallest margin in bytes (memory_margin_min_bytes).
                margin_text = (
                    f"+{_amount(resource, margin_floor)} margin (the smallest,"
                    f" {applied * 100:.1f}%)"
                )
            elif abs(applied - margin) > 0.001:
                margin_text = f"+{applied * 100:.1f}% adaptive margin"
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
    "memory_margin_spread": "Memory margin per peak spread",
    "memory_margin_base": "Memory margin at no spread",
    "memory_margin_max": "Largest memory margin",
    "memory_margin_min_bytes": "Smallest memory margin",
    "throttling_boost": "CPU boost when throttled",
    "throttling_threshold": "Throttling threshold",
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


def describe_oom_effect(
    effect: dict[str, Any] | None, explanation: dict[str, Any] | None
) -> str | None:
    """How OOM kills raised (or did not raise) the memory target, in words, from
    ``engine.oom.oom_effect`` and the explanation's memory target; None without
    kills."""
    if not isinstance(effect, dict) or not effect.get("count"):
        return None
    count = int(effect["count"])
    ratio = _number(effect.get("bump_ratio"))
    low, high = effect.get("sample_low_bytes"), effect.get("sample_high_bytes")
    samples = (
        _amount("memory", low)
        if low == high
        else f"{_amount('memory', low)} to {_amount('memory', high)}"
    )
    text = (
        f"{count:,} OOM kill{'s' if count != 1 else ''} in the memory history "
        "before this recommendation. Each adds a memory sample of at least "
        f"max(request + {_amount('memory', effect.get('min_bump_bytes'))}, "
        f"request {TIMES} {_value(ratio)}): {samples} here (largest request at a "
        f"kill {_amount('memory', effect.get('largest_request_bytes'))})."
    )
    target: Any = explanation
    for key in ("resources", "memory", "target"):
        target = target.get(key) if isinstance(target, dict) else None
    if not isinstance(target, dict):
        return text
    read = _raw("memory", target.get("raw"))
    percentile = _number(target.get("percentile"))
    where = (
        "the highest stored peak"
        if target.get("source") == "peak" or percentile is None
        else f"the p{percentile * 100:g} read"
    )
    value = _amount("memory", target.get("value"))
    kind = effect.get("effect")
    if kind == "at":
        text += (
            f" {where.capitalize()}, {read}, lies among these samples: the OOM kills "
            f"raised the memory target to {value}."
        )
    elif kind == "below":
        text += (
            f" These samples lie above {where} ({read}): they count among the "
            f"highest peaks and lift the percentile, and the target is {value}."
        )
    elif kind == "above":
        text += (
            f" {where.capitalize()}, {read}, is above these samples: usage peaks, "
            f"not the OOM kills, set the target of {value} (unless usage at a kill "
            "exceeded its request, which makes that sample larger)."
        )
    return text


def _omitted(explanation: dict[str, Any]) -> list[tuple[str, str]]:
    """What the engine left out for lack of samples, and why."""
    lines = []
    omitted = explanation.get("omitted")
    for item in omitted if isinstance(omitted, list) else []:
        if isinstance(item, dict) and item.get("reason"):
            resource = "CPU" if item.get("resource") == "cpu" else "Memory"
            lines.append((f"{resource}: not recommended", str(item["reason"])))
    return lines


def _margin_floor(explanation: dict[str, Any]) -> int:
    """The smallest memory margin in bytes the explanation's profile (with its
    overrides) applied; 0 when off or unknown."""
    change = (explanation.get("profile_overrides") or {}).get("memory_margin_min_bytes")
    if isinstance(change, dict) and _number(change.get("override")) is not None:
        return int(change["override"])
    profile = PROFILES.get(str(explanation.get("profile")))
    return 0 if profile is None else profile.memory_margin_min_bytes


def describe_explanation(
    explanation: dict[str, Any] | None, *, oom_effect: dict[str, Any] | None = None
) -> list[tuple[str, str]]:
    """(label, sentence) pairs for the workload page, in a stable order;
    ``oom_effect`` (``engine.oom.oom_effect``) adds how OOM kills bear on the memory
    target, after its line."""
    if not explanation or not isinstance(explanation, dict):
        return []
    lines: list[tuple[str, str]] = []
    if explanation.get("reason"):
        lines.append(("Why no recommendation", str(explanation["reason"])))
    lines.extend(_omitted(explanation))
    left_out = {
        (str(item.get("resource")), str(bound))
        for item in explanation.get("omitted") or []
        if isinstance(item, dict)
        for bound in item.get("bounds") or []
    }
    oom_text = describe_oom_effect(oom_effect, explanation)
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
            if (name, key) in left_out:
                continue  # said in the "not recommended" line
            if isinstance(bound, dict):
                lines.append(
                    (
                        f"{label} {bound_label.lower()}",
                        _bound(name, bound, margin, _margin_floor(explanation)),
                    )
                )
            if name == "memory" and key == "target" and oom_text:
                lines.append(("Memory and OOM kills", oom_text))
                oom_text = None
    if oom_text:  # no memory target line to put it after
        lines.append(("Memory and OOM kills", oom_text))
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


def describe_windows(raw: Any) -> list[str]:
    """Maintenance windows as stored (validated JSON) for people: "mon, tue
    22:00–04:00 Europe/Berlin"; all seven days read "every day"."""
    described = []
    for window in raw or []:
        days = window.get("days") or []
        when = "every day" if len(set(days)) in (0, 7) else ", ".join(days)
        zone = window.get("time_zone") or "UTC"
        described.append(f"{when} {window.get('start')}–{window.get('end')} {zone}")
    return described
