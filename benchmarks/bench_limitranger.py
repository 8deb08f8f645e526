"""Generated (LimitRange, pod, recommendation) cases against the fake LimitRanger.

python -m benchmarks limitranger    (or: make bench BENCH=limitranger)"""
# BENCH_CASES cases (default 10,000) from BENCH_SEED (default 23), made and judged by
# ``tests/k8s_fake/limit_range_cases.py``: the pod as the API server defaults it, the
# webhook's decision (pure, no database), and LimitRanger's validation of the pod as
# received and as patched (``tests/k8s_fake/limit_ranger.py``). Prints how many
# originals LimitRanger admits, how many of those vpaweb patches, how many it leaves
# alone because no patch within the LimitRange exists, and how many patched pods
# LimitRanger refuses although it admits the original: the guarantee is 0.

from __future__ import annotations

import os
import time


def main() -> None:
    """Run the cases and print the counts."""
    os.environ.setdefault("SECRET_KEY", "bench-only")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "vpaweb.settings")
    import django

    django.setup()
    from tests.k8s_fake.limit_range_cases import run_cases

    count = int(os.environ.get("BENCH_CASES", "10000"))
    seed = int(os.environ.get("BENCH_SEED", "23"))
    started = time.perf_counter()
    tally = run_cases(count, seed=seed)
    seconds = time.perf_counter() - started
    print(f"cases: {tally.cases} (seed {seed}) in {seconds:.1f} s")
    print(f"originals admitted by LimitRanger: {tally.original_admitted}")
    print(f"  patched by the webhook: {tally.patched}")
    alone = tally.left_alone_for_limit_range
    print(f"  left alone (no patch within the LimitRange): {alone}")
    print(f"  patched pods refused: {len(tally.refused)} (must be 0)")
    for case in tally.refused[:3]:
        print(f"    {case['errors']}")
    if tally.refused:
        raise SystemExit(1)
