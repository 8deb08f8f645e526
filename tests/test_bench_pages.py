"""The pages bench installs the browser tests' Chromium before it seeds: on a machine
without it, it stops at once, naming what is missing, instead of after minutes of
seeding 100,000 containers."""

from __future__ import annotations

import os

import pytest

import benchmarks.bench_dashboard
import tests.browser.conftest
from benchmarks import bench_pages


@pytest.mark.django_db
def test_without_chromium_the_pages_bench_stops_before_it_seeds(monkeypatch, tmp_path):
    monkeypatch.setattr(tests.browser.conftest, "CHROMIUM", tmp_path / "chromium")
    # No apt-get on the PATH: Chromium cannot be installed either.
    monkeypatch.setenv("PATH", str(tmp_path))

    def seed(count: int) -> int:
        raise AssertionError("the bench seeded before it had a browser")

    monkeypatch.setattr(benchmarks.bench_dashboard, "_seed", seed)
    # What the bench sets for itself, restored after the test.
    for name in ("ALLOWED_HOSTS", "DJANGO_ALLOW_ASYNC_UNSAFE", "VPAWEB_VAR_DIR"):
        monkeypatch.setenv(name, os.environ.get(name, ""))
    monkeypatch.setenv("BENCH_PAGES_WORKLOADS", "6")

    with pytest.raises(SystemExit) as stopped:
        bench_pages.main()

    assert str(stopped.value) == (
        f"pages: needs Chromium at {tmp_path / 'chromium'}, and apt-get install"
        " chromium failed"
    )
