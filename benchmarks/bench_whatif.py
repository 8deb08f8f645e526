"""The what-if and the namespace comparison on the demo (the simulated cluster).

`python -m benchmarks whatif` (or: make bench BENCH=whatif)."""
# Sets up the demo as `make run` does (`manage.py migrate` and `bootstrap`: the
# simulated 120-workload cluster, discovered and refreshed once) in a scratch database:
# SQLite in a temporary VPAWEB_VAR_DIR, or, with DATABASE_URL, a scratch PostgreSQL
# database created next to the one it names and dropped afterwards. Then times the
# services the pages and the API call, over 8 days of history as of a fixed moment (so
# the answers are the same every run):
#
# - ``what_if`` on BENCH_WHATIF_WORKLOAD (default catalog/feeds-worker, the demo's
#   slowest what-if), its profile (vpa) against vpa with margin_fraction=0.2 (the
#   same histograms) and against adaptive-margin (histograms of its own: twice the
#   replay's work);
# - ``compare_namespace`` over BENCH_COMPARE_NAMESPACE (default monitoring, the
#   largest namespace, 19 workloads): vpa against the same two.
#
# Each case runs once to warm up, then BENCH_REPEAT times (default 3); printed: the CPU
# time of the process and the wall time (min-max), the load average beside them, and a
# digest of the answer without its timings (equal digests: the same answer, byte for
# byte). Targets (server time): what-if 1 s, namespace comparison 3 s.

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.bench_backfill import _scratch_database

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
DAYS = 8
TARGETS_S = {"what-if": 1.0, "comparison": 3.0}


def _digest(answer: dict[str, Any]) -> str:
    kept = {k: v for k, v in answer.items() if k != "timing_s"}
    text = json.dumps(kept, sort_keys=True, allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _time(run: Callable[[], dict[str, Any]], repeat: int) -> tuple[list, list, str]:
    digest = _digest(run())  # warm-up
    cpu, wall = [], []
    for _ in range(repeat):
        cpu0, wall0 = time.process_time(), time.perf_counter()
        answer = run()
        cpu.append(time.process_time() - cpu0)
        wall.append(time.perf_counter() - wall0)
        if _digest(answer) != digest:
            raise SystemExit("the answer changed between runs")
    return cpu, wall, digest


def _span(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}"


def _run(database: str, repeat: int) -> None:
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    tick = time.perf_counter()
    call_command("bootstrap", stdout=io.StringIO())
    setup_s = time.perf_counter() - tick

    from recommender.models import Cluster, Workload
    from recommender.services.replay.namespace_compare import compare_namespace
    from recommender.services.replay.whatif import what_if

    cluster = Cluster.objects.get(name="simulated")
    namespace, name = os.environ.get(
        "BENCH_WHATIF_WORKLOAD", "catalog/feeds-worker"
    ).split("/")
    workload = Workload.objects.get(cluster=cluster, namespace=namespace, name=name)
    compared = os.environ.get("BENCH_COMPARE_NAMESPACE", "monitoring")
    print(f"database: {database}; the demo set up in {setup_s:.1f} s")
    print(
        f"{DAYS} days as of {NOW.isoformat()}; CPU and wall seconds over {repeat} "
        "runs after a warm-up"
    )
    # Each request against the same histograms (vpa, another margin) and another model.
    against = (
        ("vpa[margin_fraction=0.2]", "vpa", {"margin_fraction": 0.2}),
        ("adaptive-margin", "adaptive-margin", None),
    )
    cases: list[tuple[str, str, Callable[[], dict[str, Any]]]] = []
    for label, profile, overrides in against:
        cases.append(
            (
                "what-if",
                f"{namespace}/{name}: vpa vs {label}",
                lambda p=profile, o=overrides: what_if(
                    workload_id=workload.pk, profile=p, overrides=o, days=DAYS, now=NOW
                ),
            )
        )
    for label, profile, overrides in against:
        cases.append(
            (
                "comparison",
                f"{compared}: vpa vs {label}",
                lambda p=profile, o=overrides: compare_namespace(
                    cluster_id=cluster.pk,
                    namespace=compared,
                    profile_a="vpa",
                    profile_b=p,
                    overrides_b=o,
                    days=DAYS,
                    now=NOW,
                ),
            )
        )
    print(f"{'request':<12} {'case':<55} {'CPU s':>11} {'wall s':>11}  load  digest")
    for kind, label, run in cases:
        cpu, wall, digest = _time(run, repeat)
        load = os.getloadavg()[0]
        target = TARGETS_S[kind]
        flag = "" if max(cpu) <= target else f"  (CPU over {target:g} s)"
        print(
            f"{kind:<12} {label:<55} {_span(cpu):>11} {_span(wall):>11} "
            f"{load:5.1f}  {digest}{flag}"
        )


def main() -> None:
    os.environ.setdefault("SECRET_KEY", "bench-only")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "vpaweb.settings")
    os.environ.setdefault("VPAWEB_SIMULATION", "true")
    repeat = int(os.environ.get("BENCH_REPEAT", "3"))
    scratch = Path(tempfile.mkdtemp(prefix="vpaweb-bench-whatif-"))
    try:
        with _scratch_database(scratch) as database:
            _run(database, repeat)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
