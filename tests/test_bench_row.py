"""``make bench`` prints each bench's row for docs/benchmarks.md: the page's columns,
the command with the BENCH_* settings it ran with, the machine and the load."""

from __future__ import annotations

import re

from benchmarks.__main__ import row


def test_a_bench_prints_its_row_for_the_benchmarks_page(monkeypatch):
    monkeypatch.setenv("BENCH_WORKLOADS", "6")
    line = row("dashboard", load=(1.25, 3.5), seconds=12.34)

    cells = [cell.strip() for cell in line.strip("|").split("|")]
    assert len(cells) == 5  # bench | command | load | date | result, as on the page
    assert cells[0] == "dashboard"
    assert cells[1].startswith("`BENCH_WORKLOADS=6 make bench BENCH=dashboard` (")
    assert re.search(r"\(\d+ cores, .+\)$", cells[1])
    assert cells[2] == "1.2 / 3.5"
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", cells[3])
    assert "12.3 s" in cells[4]
