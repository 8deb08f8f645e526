"""Run benchmarks: `python -m benchmarks [engine|dashboard|backfill|api|replay]`.

Each benchmark is a module `benchmarks/bench_<name>.py` with a `main()` that prints
figures; after each, a row for docs/benchmarks.md (bench, command with its BENCH_*
settings, machine, load average at the start and the end, date), whose result cell is
filled from the figures printed above it.
"""

from __future__ import annotations

import datetime
import importlib
import os
import platform
import sys
import time
from pathlib import Path

ORDER = [
    "engine",
    "dashboard",
    "backfill",
    "api",
    "replay",
    "webhook",
    "updater",
    "slowloris",
    "nodes",
]


def available() -> list[str]:
    """Benchmark names present in this folder, in a stable order."""
    found = {
        p.stem.removeprefix("bench_") for p in Path(__file__).parent.glob("bench_*.py")
    }
    return [name for name in ORDER if name in found] + sorted(found - set(ORDER))


def machine() -> str:
    """``2 cores, AMD EPYC 7B13`` (the CPU model where /proc/cpuinfo names it)."""
    model = platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {model}"


def row(name: str, *, load: tuple[float, float], seconds: float) -> str:
    """The bench's row of docs/benchmarks.md, its result cell to fill in."""
    settings = " ".join(
        f"{key}={value}"
        for key, value in sorted(os.environ.items())
        if key.startswith("BENCH_")
    )
    command = f"{settings} make bench BENCH={name}".strip()
    today = datetime.date.today().isoformat()
    return (
        f"| {name} | `{command}` ({machine()}) | {load[0]:.1f} / {load[1]:.1f} "
        f"| {today} | (the figures above; {seconds:.1f} s in all) |"
    )


def main(argv: list[str]) -> int:
    """Run the named benchmarks (or all) one after another."""
    names = argv or available()
    unknown = [name for name in names if name not in available()]
    if unknown:
        print(
            f"unknown benchmark(s): {', '.join(unknown)}; "
            f"have: {', '.join(available())}"
        )
        return 2
    for name in names:
        print(f"=== benchmark: {name}", flush=True)
        load_start = os.getloadavg()[0]
        started = time.perf_counter()
        importlib.import_module(f"benchmarks.bench_{name}").main()
        seconds = time.perf_counter() - started
        load = (load_start, os.getloadavg()[0])
        print(f"=== {name} done in {seconds:.1f} s", flush=True)
        print(f"docs/benchmarks.md row:\n{row(name, load=load, seconds=seconds)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
