"""CPU startup boost: the arithmetic of upstream VPA 1.7's ``startupBoost.cpu``.

A policy's boost is a CPU factor or a quantity (added to the request, as upstream's
``Quantity`` type adds it) and a duration the pod stays boosted once Ready.
:func:`boosted_cpu` computes one container's boosted CPU request and limit from its
unboosted request: the limit keeps its ratio to the request (a missing limit stays
missing; RequestsOnly stays at or below the limit), so the QoS class never changes; the
request never exceeds ``cap_millicores``; a boost that would not raise the request is
none (``skip`` says why). Pure: ints (millicores) and strings in, dataclasses out.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from recommender.engine.quantity import format_cpu, parse_cpu_millicores

# The annotation a boosted pod carries: its unboosted values and the duration, which
# the updater reads to shrink it back.
BOOST_ANNOTATION = "vpaweb.io/startup-boost"

# Bounds of what people type: a factor above 10 or a boost held past a day is a typo,
# not a startup (upstream's CRD only asks factor >= 1).
MAX_FACTOR = 10.0
MAX_DURATION_S = 86_400
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


@dataclass(frozen=True)
class BoostSpec:
    """A policy's boost: exactly one of factor or quantity, and the duration."""

    factor: float | None
    quantity_millicores: int | None
    duration_s: int

    def as_json(self) -> dict[str, object]:
        """The canonical stored form, e.g. ``{"factor": 2.0, "duration_s": 300}``."""
        if self.factor is not None:
            return {"factor": self.factor, "duration_s": self.duration_s}
        assert self.quantity_millicores is not None
        return {
            "quantity": format_cpu(self.quantity_millicores),
            "duration_s": self.duration_s,
        }


@dataclass(frozen=True)
class BoostedCpu:
    """One container's boost: the request and limit (millicores; limit None when
    the container has none), or ``skip`` with the reason it is not boosted."""

    request_millicores: int
    limit_millicores: int | None
    skip: str = ""


def parse_duration_s(raw: object) -> int:
    """Seconds from ``300``, ``"90s"``, ``"5m"``, ``"1h30m"``; ValueError otherwise."""
    if isinstance(raw, bool):
        raise ValueError(f"duration must be seconds or text like 5m, not {raw!r}")
    if isinstance(raw, int):
        seconds = raw
    elif isinstance(raw, str) and raw and (match := _DURATION.match(raw.strip())):
        h, m, s = (int(g or 0) for g in match.groups())
        seconds = h * 3600 + m * 60 + s
    else:
        raise ValueError(f"duration must be seconds or text like 5m, not {raw!r}")
    if not 0 <= seconds <= MAX_DURATION_S:
        raise ValueError(f"duration must be from 0 to 24h, not {raw!r}")
    return seconds


def parse_boost(raw: object) -> BoostSpec | None:
    """A stored or typed boost; ``{}``/None is no boost. ValueError names the key."""
    if raw in (None, {}):
        return None
    if not isinstance(raw, dict):
        raise ValueError('must be an object such as {"factor": 2, "duration": "5m"}')
    unknown = sorted(set(raw) - {"factor", "quantity", "duration", "duration_s"})
    if unknown:
        raise ValueError(
            f"unknown key {unknown[0]!r}: use factor or quantity, duration"
        )
    if ("factor" in raw) == ("quantity" in raw):
        raise ValueError("give exactly one of factor (e.g. 2) or quantity (e.g. 500m)")
    if "duration" in raw and "duration_s" in raw:
        raise ValueError("give duration or duration_s, not both")
    duration_s = parse_duration_s(raw.get("duration", raw.get("duration_s", 0)))
    if "factor" in raw:
        factor = raw["factor"]
        if (
            isinstance(factor, bool)
            or not isinstance(factor, int | float)
            or not math.isfinite(factor)
            or not 1.0 < factor <= MAX_FACTOR
        ):
            raise ValueError(
                f"factor must be a number above 1 and at most 10, not {factor!r}"
            )
        return BoostSpec(float(factor), None, duration_s)
    quantity = raw["quantity"]
    if not isinstance(quantity, str):
        raise ValueError(
            f"quantity must be a CPU quantity such as 500m, not {quantity!r}"
        )
    millicores = parse_cpu_millicores(quantity)  # ValueError names the quantity
    if millicores <= 0:
        raise ValueError(f"quantity must be above 0, not {quantity!r}")
    return BoostSpec(None, millicores, duration_s)


def boosted_cpu(
    spec: BoostSpec,
    *,
    request_millicores: int,
    limit_millicores: int | None,
    requests_only: bool,
    cap_millicores: int | None,
) -> BoostedCpu:
    """The boosted request and limit of a container whose unboosted CPU request
    (the recommendation as admitted) is ``request_millicores``."""
    unboosted = BoostedCpu(request_millicores, limit_millicores)
    if request_millicores <= 0:
        return BoostedCpu(request_millicores, limit_millicores, "no CPU request")
    if spec.factor is not None:
        boosted = math.ceil(request_millicores * spec.factor)
    else:
        assert spec.quantity_millicores is not None
        boosted = request_millicores + spec.quantity_millicores
    if cap_millicores is not None and boosted > cap_millicores:
        boosted = cap_millicores
    limit = limit_millicores
    if limit_millicores is not None:
        if requests_only:
            # The limit is not ours to change: the request stays at or below it.
            boosted = min(boosted, limit_millicores)
        else:
            # Upstream keeps the limit/request ratio, so the QoS class is kept.
            limit = math.ceil(boosted * limit_millicores / request_millicores)
    if boosted <= request_millicores:
        why = (
            "the CPU limit is not controlled and leaves no room above the request"
            if requests_only and limit_millicores is not None
            else "the cap (maxAllowed or node allocatable) leaves no room"
        )
        return BoostedCpu(unboosted.request_millicores, unboosted.limit_millicores, why)
    return BoostedCpu(boosted, limit)
