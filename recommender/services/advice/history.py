"""Is a recommendation backed by enough history to act on?

Initial mode (the webhook) and the updater act only on a recommendation whose history
reaches ``VPAWEB_MIN_HISTORY_HOURS`` (default 24): a few minutes of samples already
give a target, but one that says little about a day's peaks. The history is the
recommendation's confidence (``Recommendation.confidence``, upstream's
``getConfidence``: the lesser of the samples' time span and the number of 1-minute
samples, in days of the default profile), so gaps in the samples do not count. A
recommendation without a confidence (none recorded) has no known history. Recommending
is not gated: the dashboard and the API show every recommendation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Protocol

from django.conf import settings
from django.db.models import Q

HOURS_PER_CONFIDENCE_UNIT = 24.0  # the default profile's confidence interval: a day


class HasConfidence(Protocol):
    """A recommendation, as far as this module reads it."""

    confidence: float | None


def history_hours(confidence: float | None) -> float:
    """Hours of history behind a recommendation of this confidence (0 if unknown)."""
    if confidence is None or not math.isfinite(confidence) or confidence < 0:
        return 0.0
    return confidence * HOURS_PER_CONFIDENCE_UNIT


def history_shortfall(recommendation: HasConfidence) -> str | None:
    """ "not enough history yet: N h of 24 h", or None when there is enough."""
    needed = float(settings.MIN_HISTORY_HOURS)
    have = history_hours(recommendation.confidence)
    if needed <= 0 or have >= needed:
        return None
    shown = math.floor(have * 10) / 10
    return f"not enough history yet: {shown:g} h of {needed:g} h"


def too_young(latest: Mapping[str, HasConfidence]) -> dict[str, str]:
    """THE history gate of a pod's recommendations (by container name): those without
    enough history, each with ``history_shortfall``'s words. The webhook and the
    updater do not act on them; rightsize, check, the namespace patch and the
    workload page's snippets leave them out too, unless asked for low-confidence
    values."""
    return {
        name: why
        for name, rec in latest.items()
        if (why := history_shortfall(rec)) is not None
    }


def enough_history_q(prefix: str = "") -> Q:
    """Recommendations (through ``prefix``, e.g. ``latest_recommendation__``) with
    enough history; everything when no minimum is set."""
    needed = float(settings.MIN_HISTORY_HOURS)
    if needed <= 0:
        return Q()
    return Q(**{f"{prefix}confidence__gte": needed / HOURS_PER_CONFIDENCE_UNIT})
