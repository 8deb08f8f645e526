"""Runs a month of a cron schedule (engine/cron.py), hand-counted."""

from __future__ import annotations

import pytest

from recommender.engine.cron import parse, runs_per_month

MONTH_H = 730.0


@pytest.mark.parametrize(
    ("expression", "per_month"),
    [
        ("@hourly", MONTH_H),
        ("0 * * * *", MONTH_H),
        ("*/15 * * * *", 4 * MONTH_H),
        ("@daily", MONTH_H / 24),
        ("30 */2 * * *", MONTH_H / 2),  # every two hours
        ("0 9-17 * * *", 9 * MONTH_H / 24),  # a range
        ("0,30 8,20 * * *", 4 * MONTH_H / 24),  # lists
        ("0 0 1 * *", 12 * MONTH_H / 8760),  # @monthly: 12 a year
        ("@weekly", 52 * MONTH_H / 8760),  # 2025 has 52 Sundays
        ("0 6 * * MON-FRI", 261 * MONTH_H / 8760),  # 261 weekdays in 2025
        ("0 0 * jan sun", 4 * MONTH_H / 8760),  # names: January 2025's Sundays
        ("0 0 * * 7", 52 * MONTH_H / 8760),  # 7 is Sunday too
        # Both day fields restricted: either matches (12 firsts + 52 Sundays - 1
        # first of the month on a Sunday in 2025, June).
        ("0 0 1 * 0", (12 + 52 - 1) * MONTH_H / 8760),
    ],
)
def test_runs_a_month(expression, per_month):
    assert runs_per_month(expression) == pytest.approx(per_month)


@pytest.mark.parametrize(
    ("expression", "named"),
    [
        ("* * * *", "4 fields"),
        ("61 * * * *", "minute"),
        ("* 24 * * *", "hour"),
        ("* * 0 * *", "day of month"),
        ("* * * 13 *", "month"),
        ("* * * * 8", "day of week"),
        ("*/0 * * * *", "minute: step"),
        ("5-1 * * * *", "minute"),
        ("x * * * *", "minute"),
        ("@often", "1 fields"),
    ],
)
def test_a_bad_expression_names_the_field(expression, named):
    with pytest.raises(ValueError, match=named):
        parse(expression)
