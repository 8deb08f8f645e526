"""Prices and thresholds of the provisioning facts (risk, waste, missing requests, no
data) and the reason a container has no recommendation.

The rule itself lives with the models (``recommender.models.provisioning``: SQL on the
``Workload``/``Container`` querysets, Python for loaded rows); this module supplies the
settings-backed arguments it takes. Definitions: docs/dashboard.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache

from django.conf import settings

from recommender.engine.cron import runs_per_month
from recommender.models import Container, RiskRules, Workload
from recommender.models.provisioning import HOURS_PER_MONTH

GIB = 2**30
# OOM kills this recent put a container at risk.
RECENT_OOM_WINDOW = timedelta(days=7)
# A request this far (percent) below its usage floor puts a container at risk.
SHORTFALL_PERCENT = 10


def risk_rules(now: datetime) -> RiskRules:
    """The rules the dashboard and the API judge risk by, as of ``now``."""
    return RiskRules(
        oom_since=now - RECENT_OOM_WINDOW, shortfall_percent=SHORTFALL_PERCENT
    )


@dataclass(frozen=True)
class Prices:
    """List prices for the savings estimate."""

    per_core_hour: float
    per_gib_hour: float

    @classmethod
    def from_settings(cls) -> Prices:
        """The prices of VPAWEB_PRICE_PER_CORE_HOUR and VPAWEB_PRICE_PER_GIB_HOUR."""
        return cls(settings.PRICE_PER_CORE_HOUR, settings.PRICE_PER_GIB_HOUR)

    def of(self, workload: Workload) -> Prices:
        """The prices of ``workload``'s pods: its nodes' (``Workload.price_source``
        "opencost" or "table"), else these list prices (as the SQL's Coalesce)."""
        return self.at(workload.price_per_core_hour, workload.price_per_gib_hour)

    def at(self, per_core_hour: float | None, per_gib_hour: float | None) -> Prices:
        """A workload's stored prices (``Workload.price_per_*``), each None falling
        back to these list prices: the one rule of ``of`` for rows read as values."""
        return Prices(
            self.per_core_hour if per_core_hour is None else per_core_hour,
            self.per_gib_hour if per_gib_hour is None else per_gib_hour,
        )

    @property
    def per_millicore_month(self) -> float:
        """Price of one millicore for a month."""
        return self.per_core_hour * HOURS_PER_MONTH / 1000.0

    @property
    def per_byte_month(self) -> float:
        """Price of one byte of memory for a month."""
        return self.per_gib_hour * HOURS_PER_MONTH / GIB

    def monthly(self, *, cpu_millicores: float, memory_bytes: float) -> float:
        """Monthly price of an amount of CPU and memory."""
        return (
            cpu_millicores * self.per_millicore_month
            + memory_bytes * self.per_byte_month
        )


@dataclass(frozen=True)
class PriceMix:
    """The shown workloads priced by one ``price_source`` and the range of their
    prices (``Prices.at``: the list prices where none is stored)."""

    source: str
    workloads: int
    core_hour: tuple[float, float]
    gib_hour: tuple[float, float]


# The workloads of one price source and the range of their stored prices (None where
# none is): (price_source, workloads, core-hour low, high, GiB-hour low, high). The
# namespaces' totals keep theirs (namespace_totals.py); the overview adds them up.
PriceRange = tuple[str, int, float | None, float | None, float | None, float | None]


def _lower(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _higher(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def price_ranges(ranges: Iterable[PriceRange]) -> list[PriceRange]:
    """``ranges`` (a workload's own: (source, 1, core, core, gib, gib)) added up per
    price source, as SQL's COUNT, MIN and MAX would (a None price is left out)."""
    out: dict[str, PriceRange] = {}
    for source, n, core_low, core_high, gib_low, gib_high in ranges:
        found = out.get(source)
        if found is not None:
            n += found[1]
            core_low = _lower(found[2], core_low)
            core_high = _higher(found[3], core_high)
            gib_low = _lower(found[4], gib_low)
            gib_high = _higher(found[5], gib_high)
        out[source] = (source, n, core_low, core_high, gib_low, gib_high)
    return sorted(out.values())


def price_mix(prices: Prices, ranges: Iterable[PriceRange]) -> list[PriceMix]:
    """What the fleet's savings are priced at: per ``price_source``, its workloads
    and their lowest and highest prices, from the shown workloads' ``ranges`` (the
    namespaces' totals')."""
    mix = []
    for source, n, core_low, core_high, gib_low, gib_high in price_ranges(ranges):
        low = prices.at(core_low, gib_low)
        high = prices.at(core_high, gib_high)
        mix.append(
            PriceMix(
                source=source or "default",
                workloads=n,
                core_hour=(low.per_core_hour, high.per_core_hour),
                gib_hour=(low.per_gib_hour, high.per_gib_hour),
            )
        )
    return sorted(mix, key=lambda m: (-m.workloads, m.source))


@lru_cache(maxsize=1024)
def runs_a_month(schedule: str) -> float | None:
    """The runs a 730-hour month of a CronJob's ``schedule`` (``engine.cron``; None:
    no schedule, or one not understood)."""
    if not schedule or not schedule.strip():
        return None
    try:
        return runs_per_month(schedule.strip())
    except ValueError:
        return None


def per_run(monthly: float, schedule: str) -> float | None:
    """A monthly amount's share of one run of ``schedule`` (None without runs)."""
    runs = runs_a_month(schedule)
    return monthly / runs if runs else None


def no_recommendation_reason(container: Container) -> str:
    """Why a container has no recommendation yet, in plain words."""
    rec = container.latest_recommendation
    if rec is not None:
        reason = (rec.explanation or {}).get("reason")
        if reason:
            return str(reason)
    checkpoint = getattr(container, "checkpoint", None)
    if checkpoint is None or checkpoint.sample_count == 0:
        return (
            "No usage samples yet: wait for the next refresh, or check the usage "
            "source."
        )
    return "Usage is being collected, but the history is too short to recommend yet."
