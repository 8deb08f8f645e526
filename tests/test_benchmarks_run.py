"""Every benchmark runs: ``python -m benchmarks <name>`` (what ``make bench
BENCH=<name>`` runs) at a tiny size, on SQLite and on PostgreSQL, so a schema change
that breaks a bench fails ``make test-benches`` (in CI) instead of the next person who
measures."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from benchmarks.__main__ import available

# `make test-benches`, beside make test: the benches take minutes even when tiny.
pytestmark = pytest.mark.benches

ROOT = Path(__file__).resolve().parents[1]

# The smallest size each bench takes (its own variables; the defaults measure).
TINY: dict[str, dict[str, str]] = {
    "api": {"BENCH_WORKLOADS": "6", "BENCH_REQUESTS": "8", "BENCH_CONCURRENCY": "2"},
    "backfill": {"BENCH_CONTAINERS": "6", "BENCH_DAYS": "1"},
    "dashboard": {"BENCH_WORKLOADS": "6", "BENCH_REPEAT": "1"},
    "engine": {"BENCH_ENGINE_CONTAINERS": "20", "BENCH_ENGINE_DAYS": "1"},
    "export": {"BENCH_EXPORT_CONTAINERS": "12"},
    "first_contact": {
        "BENCH_FC_CONTAINERS": "12",
        "BENCH_FC_HISTORY_H": "1",
        "BENCH_FC_WORKERS": "1",
    },
    "heavy_flood": {"BENCH_SECONDS": "1"},
    "limitranger": {"BENCH_CASES": "50"},
    "metrics_scrape": {"BENCH_EXPORT_CONTAINERS": "12"},
    "nodes": {"BENCH_CONTAINERS": "50"},
    "policy_rules": {"BENCH_WORKLOADS": "6"},
    "pages": {"BENCH_PAGES_WORKLOADS": "6", "BENCH_REPEAT": "1"},
    "retention": {
        "BENCH_RETENTION_WORKLOADS": "6",
        "BENCH_RETENTION_DAYS": "1",
        "BENCH_RETENTION_SHARDS": "1",
    },
    "scale": {
        "BENCH_SCALE_SIZES": "12",
        "BENCH_SCALE_CYCLES": "1",
        "BENCH_SCALE_HISTORY_H": "1",
    },
    "slowloris": {
        "BENCH_WORKLOADS": "3",
        "BENCH_ATTACKERS": "2",
        "BENCH_SECONDS": "1",
    },
    "updater": {"BENCH_WORKLOADS": "6", "BENCH_PODS_PER_WORKLOAD": "1"},
    "webhook": {"BENCH_WORKLOADS": "6", "BENCH_RATE": "20", "BENCH_SECONDS": "1"},
    "whatif": {"BENCH_REPEAT": "1"},
    "worker_memory": {"BENCH_WM_CYCLES": "1"},
}


def run_bench(name: str, database_url: str | None) -> str:
    """Run one bench at its tiny size; its output (fails on a non-zero exit)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "PYTEST_XDIST_WORKER", "DJANGO_SETTINGS_MODULE"}
    }
    env.update(TINY.get(name, {}), SECRET_KEY="bench-test-only", LOG_LEVEL="WARNING")
    if database_url is not None:
        env["DATABASE_URL"] = database_url
    with tempfile.TemporaryDirectory(prefix="vpaweb-bench-test-") as var:
        env["VPAWEB_VAR_DIR"] = var
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks", name],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    output = out.stdout + out.stderr
    assert out.returncode == 0, output[-4000:]
    assert f"=== {name} done in" in output, output[-4000:]
    return output


def scratch_postgres(url: str) -> str:
    """A fresh scratch database beside ``url``'s for each bench run (the benches
    seed fixed names, so a database left by an earlier run would refuse them):
    ``<name>_bench`` (and the xdist worker's), dropped and created again."""
    import psycopg

    parts = urlsplit(url)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    name = f"{parts.path.lstrip('/')}_bench{'_' + worker if worker else ''}"
    with psycopg.connect(
        urlunsplit(parts._replace(path="/postgres")), autocommit=True
    ) as db:
        db.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        db.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(parts._replace(path=f"/{name}"))


def test_every_bench_has_a_tiny_size():
    assert set(TINY) | {"replay"} == set(available())


@pytest.mark.parametrize("name", available())
def test_the_bench_runs_on_sqlite(name):
    run_bench(name, database_url=None)


@pytest.mark.integration
@pytest.mark.parametrize("name", available())
def test_the_bench_runs_on_postgresql(name):
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        pytest.skip("needs DATABASE_URL of a PostgreSQL server")
    run_bench(name, database_url=scratch_postgres(url))
