"""Dashboard template filters: Kubernetes units rounded for people, money, badges."""

from __future__ import annotations

from typing import Any

from django import template
from django.conf import settings
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from recommender.engine.quantity import humanize_cpu, humanize_memory, significant_text
from recommender.models import Container, ProvisioningStatus
from recommender.roles import Role, has_role
from recommender.web.presenters import audit_fields

register = template.Library()


@register.filter
def cpu(millicores: Any) -> str:
    """CPU for people ("250m", "1.5 cores"): the engine's ``humanize_cpu``."""
    if millicores is None or millicores == "":
        return "—"
    return humanize_cpu(float(millicores))


@register.filter
def memory(bytes_: Any) -> str:
    """Memory for people ("300 MiB", "1.5 GiB"): the engine's ``humanize_memory``."""
    if bytes_ is None or bytes_ == "":
        return "—"
    return humanize_memory(float(bytes_))


@register.filter
def millicores(amount: Any) -> str:
    """CPU always in millicores ("1250m", "247m"), so a column reads in one unit."""
    if amount is None or amount == "":
        return "—"
    return f"{round(float(amount))}m"


@register.filter
def length_is_more_than_one(items: Any) -> bool:
    """Whether a sequence (a prefetched queryset) has more than one item."""
    return len(items) > 1


@register.filter
def pods_of_hours(hours_month: Any) -> str:
    """A batch workload's average running pods from its hours a month ("0.17")."""
    return significant_text(float(hours_month or 0) / 730)


@register.filter
def cores(millicores: Any) -> str:
    """A total of CPU, always in cores: "12.3 cores", "0.25 cores"."""
    value = float(millicores or 0) / 1000
    text = significant_text(value)
    return f"{text} core" if text == "1" else f"{text} cores"


@register.filter
def gib(bytes_: Any) -> str:
    """A total of memory, always in GiB: "45.6 GiB"."""
    return f"{significant_text(float(bytes_ or 0) / 2**30)} GiB"


@register.filter
def money(amount: Any) -> str:
    """Money per month, whole units with thousands separators; negatives signed."""
    value = float(amount or 0)
    sign = "-" if value < -0.005 else ""
    # USD keeps its familiar sign; another currency is named (VPAWEB_CURRENCY).
    unit = "$" if settings.CURRENCY == "USD" else f"{settings.CURRENCY} "
    return (
        f"{sign}{unit}{abs(value):,.0f}"
        if abs(value) >= 100
        else f"{sign}{unit}{abs(value):,.2f}"
    )


@register.filter
def price_range(low_high: Any) -> str:
    """A (lowest, highest) price pair: "0.046" or "0.046–0.05"."""
    low, high = (float(v) for v in low_high)
    text = [f"{v:.6f}".rstrip("0").rstrip(".") for v in (low, high)]
    return text[0] if text[0] == text[1] else f"{text[0]}–{text[1]}"


@register.filter
def percent(share: Any) -> str:
    """A 0..1 share as a whole percentage."""
    return f"{float(share or 0) * 100:.0f}%"


@register.filter
def status_badge(status: str) -> str:
    """A coloured badge for a provisioning status."""
    label = ProvisioningStatus.LABELS.get(status, status)
    return format_html('<span class="badge status-{}">{}</span>', status, label)


@register.filter
def fact_badges(row: Any) -> str:
    """A badge per provisioning fact of a row: a workload annotated by
    ``with_provisioning`` or a ``ProvisioningFacts``. Risk, waste and missing requests
    are separate: a row can carry several."""
    risk = int(getattr(row, "risk", 0) or 0)
    ooms = int(getattr(row, "recent_ooms", 0) or 0)
    shortfall = int(getattr(row, "shortfall", getattr(row, "shortfall_percent", 0)))
    missing = getattr(row, "missing_requests", None)
    if missing is None:
        missing = (getattr(row, "missing_count", 0) or 0) > 0
    no_data = getattr(row, "no_data", None)
    if no_data is None:
        no_data = (getattr(row, "no_data_count", 0) or 0) > 0
    badges = []
    if risk > 0:
        reasons = []
        if ooms:
            reasons.append(f"{ooms} OOM kill{'s' if ooms != 1 else ''} in 7 days")
        if shortfall:
            reasons.append(f"a request {shortfall} % below its usage floor")
        badges.append(
            format_html(
                '<span class="badge status-under" data-fact="at-risk" title="{}">'
                "at risk</span>",
                "; ".join(reasons),
            )
        )
    if (getattr(row, "savings", 0) or 0) > 0:
        badges.append(
            format_html(
                '<span class="badge status-over" data-fact="wasteful">wasteful</span>'
            )
        )
    if missing:
        badges.append(
            format_html(
                '<span class="badge status-missing" data-fact="missing-requests" '
                'title="A container has no CPU or memory request">missing requests'
                "</span>"
            )
        )
    if no_data:
        badges.append(
            format_html(
                '<span class="badge status-no-data" data-fact="no-data">no data</span>'
            )
        )
    if not badges:
        badges.append(
            format_html(
                '<span class="badge status-within" data-fact="right-sized">'
                "right-sized</span>"
            )
        )
    # Each badge is escaped by format_html; the join adds only spaces.
    return mark_safe(" ".join(badges))


@register.filter
def duration(seconds: Any) -> str:
    """Seconds for people: "850 ms", "12.3 s", "4 min 5 s"."""
    if seconds is None:
        return "running"
    value = float(seconds)
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 60:
        return f"{value:.1f} s"
    return f"{int(value // 60)} min {int(value % 60)} s"


@register.simple_tag
def poll_interval() -> int:
    """Seconds between a live page's polls, as in
    ``hx-trigger="every {% poll_interval %}s"``: the refresh interval, since new
    numbers come no faster."""
    return int(settings.REFRESH_INTERVAL_S)


@register.filter
def can(user: Any, role: str) -> bool:
    """``{% if user|can:"operator" %}``: the user holds that role or a stronger one."""
    return has_role(user, Role(role))


@register.filter(name="audit_fields")
def audit_fields_filter(data: Any) -> list[tuple[str, str]]:
    """``{% for name, value in event.before|audit_fields %}``: before/after as rows."""
    return audit_fields(data)


@register.filter
def get_item(mapping: Any, key: str) -> Any:
    """``{{ dict|get_item:key }}`` for keys that are not identifiers."""
    if isinstance(mapping, dict):
        return mapping.get(key, {})
    return {}


@register.filter
def phases(timings: Any) -> list[tuple[str, float]]:
    """A run's ``timings`` ({"discovery_s": 0.1, …, "total_s": 2}) as (phase, seconds),
    in the order the run stored them, the total last."""
    if not isinstance(timings, dict):
        return []
    rows = [
        (name.removesuffix("_s").replace("_", " "), float(seconds))
        for name, seconds in timings.items()
        if name != "total_s" and isinstance(seconds, int | float)
    ]
    if isinstance(timings.get("total_s"), int | float):
        rows.append(("total", float(timings["total_s"])))
    return rows


@register.filter
def source_of(container: Any, key: str) -> str:
    """Where a container's current value came from ("requests.cpu" ...), as words:
    "pod template", "LimitRange default" or "the live pod"; "" when unknown."""
    source = (getattr(container, "resource_sources", None) or {}).get(key)
    if not source:
        return ""
    try:
        return str(Container.Source(source).label)
    except ValueError:
        return ""
