"""The engine's explanation in plain words.

``Recommendation.explanation`` is ``Explanation.to_dict()`` plus the caps applied. The page must
never break on a key it does not know (older rows, a newer engine), so known keys get a sentence
and anything else is still shown, as "name: value", rather than dropped.
"""

from __future__ import annotations

from typing import Any

from recommender.engine.quantity import format_cpu, format_memory

DAY_S = 86400.0


def _fmt_days(seconds: float) -> str:
    days = seconds / DAY_S
    if days >= 1:
        return f"{days:.1f} days".replace(".0 days", " days")
    return f"{seconds / 3600:.1f} hours".replace(".0 hours", " hours")


def _fmt_amount(resource: str, value: Any) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return str(value)
    if "cpu" in resource:
        return format_cpu(int(value))
    if "mem" in resource:
        return format_memory(int(value))
    return f"{value:g}"


def _label(key: str) -> str:
    return key.replace("_", " ").replace(".", " — ").strip().capitalize()


def _percentile(value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"p{value * 100:g}" if value <= 1 else f"p{value:g}"
    return str(value)


def _describe_caps(caps: Any) -> list[str]:
    lines = []
    for cap in caps if isinstance(caps, list) else []:
        if not isinstance(cap, dict):
            lines.append(str(cap))
            continue
        resource = str(cap.get("resource", ""))
        text = (
            f"{resource} {cap.get('bound', '')} {cap.get('reason', 'capped')}".strip()
        )
        if "before" in cap and "after" in cap:
            text += (
                f" ({_fmt_amount(resource, cap['before'])} → "
                f"{_fmt_amount(resource, cap['after'])})"
            )
        lines.append(text)
    return lines


def _flatten(data: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    items: list[tuple[str, Any]] = []
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and key not in ("caps",):
            items.extend(_flatten(value, f"{name}."))
        else:
            items.append((name, value))
    return items


def describe_explanation(explanation: dict[str, Any] | None) -> list[tuple[str, str]]:
    """(label, sentence) pairs for the workload page, in a stable order."""
    if not explanation:
        return []
    lines: list[tuple[str, str]] = []
    for key, value in _flatten(explanation):
        leaf = key.rsplit(".", 1)[-1]
        where = key.rsplit(".", 1)[0] if "." in key else ""
        scope = f" ({where.replace('_', ' ')})" if where else ""
        if leaf == "reason":
            lines.append(("Why", str(value)))
        elif leaf == "caps" or leaf.endswith("caps"):
            caps = _describe_caps(value)
            lines.append(
                (
                    "Caps applied" + scope,
                    "; ".join(caps) if caps else "none: the values are uncapped",
                )
            )
        elif "multiplier" in leaf:
            lines.append(
                (
                    f"Confidence multiplier{scope}",
                    f"x{_fmt_number(value)} ({_label(leaf)})",
                )
            )
        elif "confidence" in leaf:
            lines.append(
                (
                    f"Confidence{scope}",
                    f"{_fmt_number(value)} (about that many days of history; "
                    "bounds narrow as it grows)",
                )
            )
        elif "percentile" in leaf:
            lines.append(
                (f"{_label(leaf)}{scope}", f"{_percentile(value)} of the decayed usage")
            )
        elif "margin" in leaf:
            share = (
                value * 100 if isinstance(value, int | float) and value < 1 else value
            )
            lines.append(
                (
                    f"Safety margin{scope}",
                    f"+{_fmt_number(share)}% on top of the percentile",
                )
            )
        elif leaf.endswith("_s") and isinstance(value, int | float):
            lines.append((f"{_label(leaf[:-2])}{scope}", _fmt_days(float(value))))
        elif "sample" in leaf and isinstance(value, int | float):
            lines.append((f"{_label(leaf)}{scope}", f"{int(value):,}"))
        elif ("min" in leaf or "max" in leaf) and isinstance(value, int | float):
            lines.append((f"{_label(leaf)}{scope}", _fmt_amount(key, value)))
        else:
            lines.append((f"{_label(leaf)}{scope}", _fmt_value(value)))
    return lines


def _fmt_number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def _fmt_value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return ", ".join(_fmt_value(v) for v in value) or "none"
    if value is None:
        return "—"
    return str(value)
