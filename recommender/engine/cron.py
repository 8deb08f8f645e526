"""Runs a month of a CronJob's ``schedule``: the standard 5-field cron syntax
(minute hour day-of-month month day-of-week; ``*``, values, ``a-b`` ranges, ``/n``
steps, ``,`` lists, month and weekday names, 7 = Sunday) and the macros @yearly,
@annually, @monthly, @weekly, @daily, @midnight, @hourly. As cron (and Kubernetes'
CronJob controller), a day runs when it matches the day-of-month *or* the
day-of-week field if both are restricted, both otherwise. ``runs_per_month`` counts
the runs of a 365-day year (2025) per 730-hour month; a bad expression raises
``ValueError`` naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MONTHS = tuple(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
)
# (name, lowest, highest, names)
FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, MONTHS),
    ("day of week", 0, 7, ("sun", "mon", "tue", "wed", "thu", "fri", "sat")),
)
HOURS_PER_MONTH = 730.0
_YEAR = 2025


def _value(text: str, field: str, low: int, names: tuple[str, ...]) -> int:
    lowered = text.lower()
    if lowered in names:
        return names.index(lowered) + low
    if not text.isdigit():
        raise ValueError(f"{field}: {text!r} is not a number")
    return int(text)


def _field(
    text: str, field: str, low: int, high: int, names: tuple[str, ...]
) -> set[int]:
    values: set[int] = set()
    for part in text.split(","):
        body, slash, step_text = part.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) < 1:
                raise ValueError(
                    f"{field}: step {step_text!r} is not a positive number"
                )
            step = int(step_text)
        if body == "*":
            first, last = low, high
        elif "-" in body:
            a, _, b = body.partition("-")
            first, last = (_value(x, field, low, names) for x in (a, b))
        else:
            first = _value(body, field, low, names)
            last = high if slash else first
        if not low <= first <= last <= high:
            raise ValueError(f"{field}: {part!r} is not within {low}-{high}")
        values.update(range(first, last + 1, step))
    return values


@dataclass(frozen=True)
class Schedule:
    """The five fields' values (day of week 0-6, Sunday 0), and whether the
    day-of-month and day-of-week fields are restricted (not ``*``)."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_restricted: bool
    weekdays_restricted: bool

    def runs_on(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        by_day = day.day in self.days
        by_weekday = day.isoweekday() % 7 in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return by_day or by_weekday
        return by_day and by_weekday


def parse(expression: str) -> Schedule:
    """The schedule of a cron expression or macro."""
    text = MACROS.get(expression.strip().lower(), expression)
    parts = text.split()
    if len(parts) != 5:
        raise ValueError(
            f"{expression!r} has {len(parts)} fields, not 5 (minute hour "
            "day-of-month month day-of-week) or a macro such as @daily"
        )
    minutes, hours, days, months, weekdays = (
        _field(part, name, low, high, names)
        for part, (name, low, high, names) in zip(parts, FIELDS, strict=True)
    )
    return Schedule(
        minutes=frozenset(minutes),
        hours=frozenset(hours),
        days=frozenset(days),
        months=frozenset(months),
        weekdays=frozenset(d % 7 for d in weekdays),
        days_restricted=not parts[2].startswith("*"),
        weekdays_restricted=not parts[4].startswith("*"),
    )


def runs_per_month(expression: str) -> float:
    """Runs of ``expression`` in a 730-hour month (the mean over a year)."""
    schedule = parse(expression)
    start = date(_YEAR, 1, 1)
    days = sum(schedule.runs_on(start + timedelta(days=n)) for n in range(365))
    per_year = days * len(schedule.minutes) * len(schedule.hours)
    return per_year * HOURS_PER_MONTH / (365 * 24)
