"""Maintenance windows: when approved changes may be applied.

A policy and a cluster may each have windows (``maintenance_windows``, a JSON list);
none means "any time". Outside them approved changes wait (the Changes page says from
when they apply); with both, a change applies only when both allow it. Upstream's
quick-OOM rule (a pod OOM-killed within 10 minutes of starting) may bypass a window
only when the policy says so (``Policy.window_bypasses_quick_oom``)."""
# A window::
#
#     {"days": ["mon", "tue", "wed", "thu", "fri"], "start": "22:00", "end": "04:00",
#      "time_zone": "Europe/Berlin"}
#
# ``days`` name the days a window starts on (all seven when absent), ``start`` and
# ``end`` are local times in ``time_zone`` (an IANA name, UTC when absent); an ``end``
# not after ``start`` runs past midnight into the next day.

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from recommender.errors import InvalidInput

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
MAX_WINDOWS = 20


@dataclass(frozen=True)
class Window:
    """One parsed window."""

    days: frozenset[int]  # 0 = Monday
    start: time
    end: time
    zone: ZoneInfo

    def _spans(self, around: datetime) -> list[tuple[datetime, datetime]]:
        """The window's occurrences starting from the day before ``around`` on."""
        local = around.astimezone(self.zone)
        spans = []
        for offset in range(-1, 8):
            day = (local + timedelta(days=offset)).date()
            if day.weekday() not in self.days:
                continue
            begin = datetime.combine(day, self.start, tzinfo=self.zone)
            end_day = day if self.end > self.start else day + timedelta(days=1)
            spans.append((begin, datetime.combine(end_day, self.end, tzinfo=self.zone)))
        return spans

    def contains(self, now: datetime) -> bool:
        """Whether ``now`` falls inside an occurrence."""
        return any(begin <= now < end for begin, end in self._spans(now))

    def next_start(self, now: datetime) -> datetime | None:
        """When the next occurrence starts after ``now`` (within a week)."""
        later = [begin for begin, _ in self._spans(now) if begin > now]
        return min(later).astimezone(UTC) if later else None


def _clock(value: Any, where: str, field: str) -> time:
    if not isinstance(value, str):
        raise InvalidInput(f"{where}: a time as HH:MM", field=field)
    try:
        hours, minutes = value.split(":")
        return time(int(hours), int(minutes))
    except ValueError:
        raise InvalidInput(
            f"{where}: {value!r} is not a time as HH:MM", field=field
        ) from None


def parse_windows(raw: Any, *, field: str = "maintenance_windows") -> list[Window]:
    """The windows of a policy or a cluster; InvalidInput names what is wrong."""
    if raw in (None, ""):
        return []
    if not isinstance(raw, list) or len(raw) > MAX_WINDOWS:
        raise InvalidInput(
            f"{field}: a list of at most {MAX_WINDOWS} windows", field=field
        )
    windows = []
    for i, entry in enumerate(raw):
        where = f"{field}[{i}]"
        if not isinstance(entry, dict):
            raise InvalidInput(f"{where}: an object", field=field)
        unknown = set(entry) - {"days", "start", "end", "time_zone"}
        if unknown:
            raise InvalidInput(
                f"{where}: unknown field(s) {', '.join(sorted(unknown))}", field=field
            )
        days = entry.get("days") or list(DAYS)
        if not isinstance(days, list) or any(d not in DAYS for d in days):
            raise InvalidInput(
                f"{where}.days: a list of {', '.join(DAYS)}", field=field
            )
        start = _clock(entry.get("start"), f"{where}.start", field)
        end = _clock(entry.get("end"), f"{where}.end", field)
        try:
            zone = ZoneInfo(str(entry.get("time_zone") or "UTC"))
        except (ZoneInfoNotFoundError, ValueError):
            raise InvalidInput(
                f"{where}.time_zone: {entry.get('time_zone')!r} is not a time zone",
                field=field,
            ) from None
        windows.append(Window(frozenset(DAYS.index(d) for d in days), start, end, zone))
    return windows


def _allows(windows: list[Window], now: datetime) -> bool:
    return not windows or any(w.contains(now) for w in windows)


def _next(windows: list[Window], now: datetime) -> datetime | None:
    starts = [s for w in windows if (s := w.next_start(now)) is not None]
    return min(starts) if starts else None


@dataclass(frozen=True)
class WindowState:
    """Whether a change may be applied now, and if not from when."""

    is_open: bool
    opens_at: datetime | None = None  # None while open, or when never within a week


def window_state(
    policy_windows: Any, cluster_windows: Any, *, now: datetime
) -> WindowState:
    """Both the policy's and the cluster's windows (stored JSON) must allow ``now``."""
    sets = [
        parse_windows(policy_windows, field="policy.maintenance_windows"),
        parse_windows(cluster_windows, field="cluster.maintenance_windows"),
    ]
    if all(_allows(windows, now) for windows in sets):
        return WindowState(is_open=True)
    # The first moment both allow: step from each closed set's next start.
    moment = now
    for _ in range(50):
        closed = [windows for windows in sets if not _allows(windows, moment)]
        if not closed:
            return WindowState(is_open=False, opens_at=moment)
        upcoming = [_next(windows, moment) for windows in closed]
        if any(u is None for u in upcoming) or moment - now > timedelta(days=8):
            break
        moment = max(u for u in upcoming if u is not None)
    return WindowState(is_open=False)
