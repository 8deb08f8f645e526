"""Run benchmarks: `python -m benchmarks [engine|dashboard|backfill|api|replay]`.

Each benchmark is a module `benchmarks/bench_<name>.py` with a `main()` that prints
figures.
"""

from __future__ import annotations

import importlib
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
        started = time.perf_counter()
        importlib.import_module(f"benchmarks.bench_{name}").main()
        print(f"=== {name} done in {time.perf_counter() - started:.1f} s\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
