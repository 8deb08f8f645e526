"""A CronJob's forecast running hours a month: the runs a month of its ``schedule``
(``engine.cron``) times its mean observed run (the pod-hours of its runs seen in the
pods' retention window over their number). Without a schedule that parses, or
before a run was seen, ``None``: the history alone counts (pods.record_running_hours).
The pages' runs a month and a run's share of a monthly figure are
``readmodels.provisioning.runs_a_month`` and ``per_run``, by the same parser.
"""

from __future__ import annotations

import logging
from functools import lru_cache

from recommender.engine.cron import runs_per_month

logger = logging.getLogger(__name__)


@lru_cache(maxsize=1024)
def _runs_a_month(schedule: str) -> float | None:
    try:
        return runs_per_month(schedule)
    except ValueError as exc:
        logger.warning(
            "CronJob schedule %r not understood (%s): history only", schedule, exc
        )
        return None


def forecast_hours(schedule: str, *, runs: int, ran_s: float) -> float | None:
    """Runs a month of ``schedule`` x the mean of ``runs`` runs lasting ``ran_s``
    seconds together, in hours; None without a schedule or a run."""
    if not schedule or runs <= 0:
        return None
    per_month = _runs_a_month(schedule.strip())
    if per_month is None:
        return None
    return per_month * ran_s / runs / 3600.0
