"""A worker's whole-process peak RSS through the whole-cluster steady cycles of a
fleet already stored, in a fresh process (the first cycle decodes the checkpoints,
the next ones go on from the engine rows kept).

    DATABASE_URL=postgres://.../copy VPAWEB_SIMULATION_WORKLOADS=65395 \\
        VPAWEB_SIMULATION_HISTORY_DAYS=0.25 \\
        /usr/bin/time -v python -m benchmarks worker_memory"""
# The database holds one simulated cluster after its first contact at
# 2026-11-21T12:00Z (``bench_first_contact``, e.g. BENCH_FC_CONTAINERS=100000
# BENCH_FC_WORKERS=4): a fleet of 100,000 containers in minutes instead of the hour
# of ``bench_scale``'s serial first contact. The simulation's settings must be the
# ones it was built with. The cycles store, so run it on a copy (``createdb -T``).
# BENCH_WM_CYCLES (default 2) whole-cluster cycles a minute apart; prints each one's
# time and the largest RSS seen in each of its phases (sampled every 50 ms), and at
# the end ``ru_maxrss``; ``/usr/bin/time -v`` gives the same for the whole process.
# BENCH_WM_SHARD=<namespace>: first, the first contact of that namespace (a shard
# task's; the whole simulated fleet is built, as in a worker): of a new cluster on an
# empty database (BENCH_WM_CYCLES=0), or of the stored one once that namespace's
# workloads are deleted (by another process: Django's cascade holds the rows).
# BENCH_WM_TRACE=1: tracemalloc's top holders at the start of the last cycle's
# first ingest window (slow, and traced memory is not RSS).

from __future__ import annotations

import os
import resource
import threading
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

FIRST_CONTACT_AT = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
PAGE = os.sysconf("SC_PAGE_SIZE")


def _rss_mib() -> float:
    statm = Path("/proc/self/statm").read_text()
    return int(statm.split()[1]) * PAGE / 2**20


def main() -> None:
    """The cycles, each phase's largest RSS, and the process's peak."""
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        print("worker_memory: skipped, it needs DATABASE_URL (PostgreSQL)")
        return
    os.environ.setdefault("SECRET_KEY", "bench-only")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "vpaweb.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from recommender.models import Cluster
    from recommender.services.operations import runs
    from recommender.services.refresh.cycle import refresh_cluster

    # A no-op on a stored copy; an empty database gets its tables.
    call_command("migrate", verbosity=0, interactive=False)
    cycles = int(os.environ.get("BENCH_WM_CYCLES", "2"))
    trace = os.environ.get("BENCH_WM_TRACE") == "1"
    where = {"label": "setup"}
    peaks: dict[str, float] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            label, rss = where["label"], _rss_mib()
            peaks[label] = max(peaks.get(label, 0.0), rss)

    original = runs.Phases.__call__
    traced = {"taken": False}

    @contextmanager
    def labelled(self: runs.Phases, name: str) -> Iterator[None]:
        cycle = where["label"].split(" ")[0]
        where["label"] = f"{cycle} {name}"
        if trace and name == "ingest" and cycle == f"c{cycles}" and not traced["taken"]:
            traced["taken"] = True
            _print_top(tracemalloc.take_snapshot())
        with original(self, name):
            yield

    runs.Phases.__call__ = labelled  # type: ignore[method-assign]
    if trace:
        tracemalloc.start()
    threading.Thread(target=sample, daemon=True).start()
    print(f"load {os.getloadavg()}; rss at start {_rss_mib():.0f} MiB", flush=True)
    shard = os.environ.get("BENCH_WM_SHARD", "")
    if shard:
        # A first-contact shard task first (then the cycles, if any).
        cluster = Cluster.objects.first() or Cluster.objects.create(
            name="worker-memory", kind="simulated"
        )
        where["label"] = "fc setup"
        started = time.perf_counter()
        run = refresh_cluster(
            cluster_id=cluster.pk, now=FIRST_CONTACT_AT, namespace=shard
        )
        print(
            f"shard {shard}: {run.status} {time.perf_counter() - started:.1f} s,"
            f" containers {run.counts.get('containers')},"
            f" chunks {run.counts.get('first_contact_chunks')},"
            f" load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    if not Cluster.objects.exists():
        # An empty database (a new copy, the suite's tiny run): the simulated fleet's
        # first contact is stored first, then the cycles go on from it.
        cluster = Cluster.objects.create(name="worker-memory", kind="simulated")
        refresh_cluster(cluster_id=cluster.pk, now=FIRST_CONTACT_AT)
        print("empty database: stored the fleet's first contact first", flush=True)
    (cluster,) = Cluster.objects.all()
    for minute in range(1, cycles + 1):
        where["label"] = f"c{minute} setup"
        started = time.perf_counter()
        run = refresh_cluster(
            cluster_id=cluster.pk, now=FIRST_CONTACT_AT + timedelta(minutes=minute)
        )
        print(
            f"cycle {minute}: {run.status} {time.perf_counter() - started:.1f} s,"
            f" containers {run.counts.get('containers')},"
            f" windows {run.counts.get('steady_windows')},"
            f" rss now {_rss_mib():.0f} MiB,"
            f" load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    done.set()
    for label, rss in peaks.items():
        print(f"  {label}: {rss:.0f} MiB")
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"ru_maxrss {maxrss / 1024:.0f} MiB; load {os.getloadavg()}")


def _print_top(snapshot: tracemalloc.Snapshot) -> None:
    total = sum(s.size for s in snapshot.statistics("filename"))
    print(f"traced {total / 2**20:.0f} MiB at the last cycle's first window")
    for stat in snapshot.statistics("lineno")[:30]:
        print(f"  {stat.size / 2**20:7.1f} MiB {stat.count:9d} {stat.traceback}")


if __name__ == "__main__":
    main()
