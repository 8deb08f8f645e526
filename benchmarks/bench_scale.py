"""How a refresh scales: fleets of 1,000, 10,000 and 100,000 containers on PostgreSQL.

DATABASE_URL=postgres://.../scratch python -m benchmarks scale"""
# Each size runs in its own process (so its peak RSS is its own) against the
# DATABASE_URL database, which must be a scratch one: the bench deletes every cluster
# in it first. Per size, a simulated cluster of that many containers (the simulation's
# mix: about 1.5 containers a workload) is refreshed: first contact (history of
# BENCH_SCALE_HISTORY_H hours, default 24 at every size, said in the table; with a
# history of a few hours nearly every container's bounds move by 1 % or more each
# minute or two, so most cycles would store a new recommendation row for most
# containers), then BENCH_SCALE_CYCLES steady-state cycles a minute apart (default
# 3), each with new samples for every container and nothing else changed (the first
# of them decodes the checkpoints the chunks of the first contact stored; the later
# ones go on from the engine rows the cycle before kept: docs/refresh.md, "Warm
# workers"). Prints, per size: first-contact time, the process's peak RSS after first
# contact and after the steady cycles (ru_maxrss: the whole process), the steady cycle's
# time by phase (median; every phase the run timed, and the time outside any) and its
# statements (each cycle: its Python garbage collections, any generation, and their
# seconds, time the wall clock holds outside any phase; the seconds its phases spent
# in the simulated cluster and usage source, which stand in for an API server and
# Prometheus; and its phases), and the
# server time (median of 5) of the dashboard overview, the workloads list, the list
# sorted by risk and the API list.
# The database is vacuumed before each size (an earlier run's deleted rows) and after
# its first contact (as autovacuum would after those inserts; the output says whether
# the server's autovacuum is on: with it off, the rows the cycles rewrite stay dead and
# the pages slow down run after run). Targets at 100,000 containers: warm cycles
# <= 15 s and <= 50 statements, the cold one <= 25 s, peak RSS <= 1.5 GB,
# pages <= 300 ms.
#
# BENCH_SCALE_SIZES (comma-separated container counts) picks the sizes.

from __future__ import annotations

import collections
import gc
import importlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
CONTAINERS_PER_WORKLOAD = 1835 / 1200  # the simulated fleet's mix
SIZES = (1_000, 10_000, 100_000)


def _setup(workloads: int, history_h: float) -> None:
    os.environ.setdefault("SECRET_KEY", "bench-only")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "vpaweb.settings")
    os.environ.setdefault("ALLOWED_HOSTS", "testserver")
    os.environ["VPAWEB_SIMULATION_WORKLOADS"] = str(workloads)
    os.environ["VPAWEB_SIMULATION_HISTORY_DAYS"] = str(history_h / 24)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def _page_ms(client: Any, path: str) -> float:
    response = client.get(path)  # warm-up
    if response.status_code != 200:
        raise SystemExit(f"GET {path} answered {response.status_code}")
    samples = []
    for _ in range(5):
        started = time.perf_counter()
        client.get(path)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def run_size(containers: int) -> dict[str, Any]:
    """One size, in this process: the figures as a dict."""
    load_at_start = os.getloadavg()[0]
    history_h = float(os.environ.get("BENCH_SCALE_HISTORY_H", "24"))
    workloads = max(1, round(containers / CONTAINERS_PER_WORKLOAD))
    _setup(workloads, history_h)
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client, override_settings

    from recommender.models import Checkpoint, Cluster
    from recommender.roles import Role, grant_role
    from recommender.services.refresh.cycle import refresh_cluster

    if connection.vendor != "postgresql":
        raise SystemExit("bench scale: set DATABASE_URL to a scratch PostgreSQL db")
    Cluster.objects.all().delete()
    get_user_model().objects.filter(username="bench-scale").delete()
    with connection.cursor() as cursor:
        cursor.execute("SHOW autovacuum")
        autovacuum = cursor.fetchone()[0]
        # The rows of an earlier run on this database, deleted just now, must not
        # weigh on this one (a server with autovacuum off keeps them for good).
        cursor.execute("VACUUM")
    cluster = Cluster.objects.create(name="scale", kind="simulated")
    started = time.perf_counter()
    first = refresh_cluster(cluster_id=cluster.pk, now=NOW)
    first_s = time.perf_counter() - started
    rss_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    if first.status != "succeeded":
        raise SystemExit(f"first contact failed: {first.error}")
    with connection.cursor() as cursor:
        # What autovacuum does after a first contact's inserts (PostgreSQL 13 and
        # later vacuum after inserts too); the cycles and pages below run without.
        cursor.execute("VACUUM ANALYZE")
    cycles = []
    collections_seen = _CollectorTimes()
    gc.callbacks.append(collections_seen.callback)
    stand_ins = _StandInTime()
    for minute in range(1, int(os.environ.get("BENCH_SCALE_CYCLES", "3")) + 1):
        statements = 0
        kinds: collections.Counter[str] = collections.Counter()

        def count(execute, sql, params, many, context, kinds=kinds):  # type: ignore[no-untyped-def]
            nonlocal statements
            statements += 1
            kinds[" ".join(sql.split())[:70]] += 1
            return execute(sql, params, many, context)

        collections_seen.reset()
        stand_ins.seconds = 0.0
        started = time.perf_counter()
        with connection.execute_wrapper(count):
            run = refresh_cluster(
                cluster_id=cluster.pk, now=NOW + timedelta(minutes=minute)
            )
        wall = time.perf_counter() - started
        if run.status != "succeeded":
            raise SystemExit(f"cycle failed: {run.error}")
        cycles.append(
            {
                "wall_s": wall,
                "statements": statements,
                "kinds": kinds.most_common(),
                "timings": run.timings,
                "written": run.counts.get("checkpoints_written", 0),
                "changed": run.counts.get("recommendations_changed", 0),
                "samples": run.counts.get("samples", 0),
                "kept": run.counts.get("engine_rows_kept", 0),
                "collections": [collections_seen.count, collections_seen.seconds],
                "stand_ins_s": stand_ins.seconds,
            }
        )
    # The whole process's peak through first contact and the steady cycles (what
    # `time -v` reports as its maximum resident set): a worker's memory limit must
    # hold this, not the first contact's alone.
    rss_steady_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    user = get_user_model().objects.create_user("bench-scale", password="bench-only")
    grant_role(user, Role.VIEWER)
    client = Client()
    client.force_login(user)
    # Pages render without a collectstatic run: plain static names, as the tests do.
    plain_static = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {
            "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        },
    }
    with override_settings(STORAGES=plain_static, WHITENOISE_USE_FINDERS=True):
        pages = {
            "overview": _page_ms(client, "/"),
            "list": _page_ms(client, "/workloads/"),
            # Sorted by a fact: every workload's facts before the first page.
            "risk": _page_ms(client, "/workloads/?sort=risk"),
            "api": _page_ms(client, "/api/v1/workloads/"),
        }
    middle = sorted(cycles, key=lambda c: c["wall_s"])[len(cycles) // 2]
    return {
        "load": [load_at_start, os.getloadavg()[0]],
        "autovacuum": autovacuum,
        "first_contact_chunks": first.counts.get("first_contact_chunks", 1),
        "containers": Checkpoint.objects.filter(container__workload__cluster=cluster)
        .distinct()
        .count(),
        "workloads": workloads,
        "history_h": history_h,
        "first_s": first_s,
        "rss_gb": rss_gb,
        "rss_steady_gb": rss_steady_gb,
        "cycle": middle,
        "cycles": [
            [
                c["wall_s"],
                c["statements"],
                c["kept"],
                c["changed"],
                *c["collections"],
                c["stand_ins_s"],
                c["timings"],
            ]
            for c in cycles
        ],
        "pages": pages,
    }


class _StandInTime:
    """Seconds a cycle spends in the simulation's stand-ins for the API server and
    the usage source (their protocol methods, installed for the steady cycles; a
    call within another counted once): the part of a cycle a real cluster spends
    instead listing objects from its API server and reading Prometheus."""

    METHODS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
        (
            "recommender.cluster.simulated",
            "SimulatedCluster",
            ("discover", "list_nodes"),
        ),
        (
            "recommender.sources.simulated",
            "SimulatedUsageSource",
            (
                "fetch_usage",
                "fetch_workload_usage",
                "fetch_oom_kills",
                "has_oom_series",
                "fetch_throttling",
                "fetch_node_costs",
                "instant_samples",
            ),
        ),
    )

    def __init__(self) -> None:
        self.seconds, self._depth = 0.0, 0
        for module, name, methods in self.METHODS:
            cls = getattr(importlib.import_module(module), name)
            for method in methods:
                setattr(cls, method, self._timed(getattr(cls, method)))

    def _timed(self, method: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if self._depth:
                return method(*args, **kwargs)
            self._depth += 1
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self._depth -= 1
                self.seconds += time.perf_counter() - started

        return timed


class _CollectorTimes:
    """Python's garbage collections since ``reset`` and the seconds they took: time
    a cycle's wall clock holds outside any phase. Every generation: a young one
    walking what a cycle left alive took as long as a full one."""

    def __init__(self) -> None:
        self.count, self.seconds, self._started = 0, 0.0, 0.0

    def reset(self) -> None:
        self.count, self.seconds = 0, 0.0

    def callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.count += 1
            self.seconds += time.perf_counter() - self._started


def main() -> None:
    """Each size in a child process; then the table."""
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        print("scale: skipped, it needs DATABASE_URL of a scratch PostgreSQL database")
        return
    sizes = [
        int(s)
        for s in os.environ.get("BENCH_SCALE_SIZES", ",".join(map(str, SIZES))).split(
            ","
        )
    ]
    rows = []
    for size in sizes:
        print(f"--- {size:,} containers", flush=True)
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.bench_scale", str(size)],
            capture_output=True,
            text=True,
            check=False,
        )
        lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
        if out.returncode != 0 or not lines:
            print(out.stdout[-2000:], out.stderr[-4000:])
            raise SystemExit(f"size {size} failed")
        rows.append(json.loads(lines[-1].removeprefix("RESULT ")))
    for r in rows:
        print(f"{r['containers']:,} containers, statements of the median cycle:")
        for kind, n in r["cycle"]["kinds"]:
            print(f"  {n:4d}  {kind}")
    for r in rows:
        print(
            f"{r['containers']:,} containers, each steady cycle (wall s, statements,"
            " engine rows kept from the cycle before, recommendations changed, Python's"
            " garbage collections within it, any generation, and their seconds, and"
            " the seconds within its phases spent in the simulated cluster and usage"
            " source, stand-ins for an API server and Prometheus): "
            + ", ".join(
                f"({w:.1f}, {n}, {k:,}, {c:,}, {g}, {gs:.2f}, {sim:.2f})"
                for w, n, k, c, g, gs, sim, _ in r["cycles"]
            )
        )
        names = _phase_names([r])
        for number, (wall, *_, timings) in enumerate(r["cycles"], start=1):
            print(
                f"  steady cycle {number}: "
                + ", ".join(
                    f"{name} {s:.2f}"
                    for name, s in zip(
                        [*names, "outside any phase"],
                        _phase_seconds(timings, names, wall),
                        strict=True,
                    )
                )
            )
    for r in rows:
        print(
            f"{r['containers']:,} containers: first contact in"
            f" {r['first_contact_chunks']} chunk(s); load average (1 min)"
            f" {r['load'][0]:.1f} at the start, {r['load'][1]:.1f} at the end;"
            f" the server's autovacuum {r['autovacuum']}"
        )
    names = _phase_names(rows)
    print(
        "| containers (workloads) | history | first contact | peak RSS after it / "
        "after the steady cycles | steady cycle"
        f" | {' / '.join(names)} / outside any phase"
        " | statements"
        " | checkpoints written | overview / list / list by risk / API ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        c, p = r["cycle"], r["pages"]
        phases = " / ".join(
            f"{s:.2f}" for s in _phase_seconds(c["timings"], names, c["wall_s"])
        )
        print(
            f"| {r['containers']:,} ({r['workloads']:,}) | {r['history_h']:g} h"
            f" | {r['first_s']:.1f} s | {r['rss_gb']:.2f} / {r['rss_steady_gb']:.2f} GB"
            f" | {c['wall_s']:.1f} s"
            f" | {phases} | {c['statements']} | {c['written']:,}"
            f" | {p['overview']:.0f} / {p['list']:.0f} / {p['risk']:.0f}"
            f" / {p['api']:.0f} |",
            flush=True,
        )


def _phase_seconds(
    timings: dict[str, float], names: list[str], wall_s: float
) -> list[float]:
    """A cycle's seconds in each of ``names``, then outside any of them."""
    spent = [timings.get(f"{name}_s", 0.0) for name in names]
    return [*spent, timings.get("total_s", wall_s) - sum(spent)]


def _phase_names(rows: list[dict[str, Any]]) -> list[str]:
    """Every phase a cycle timed (the run's ``<name>_s`` timings but its total), in
    the order the cycle first ran them."""
    names: dict[str, None] = {}
    for r in rows:
        for key in r["cycle"]["timings"]:
            if key.endswith("_s") and key != "total_s":
                names[key.removesuffix("_s")] = None
    return list(names)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        print("RESULT " + json.dumps(run_size(int(sys.argv[1]))), flush=True)
    else:
        main()
