"""Replay benchmark: the full Bitbrains trace through the ``vpa`` profile.

120 VMs, 30 days, 1.03 M samples, 720 hourly recomputes per VM (target:
<= 3 s on a 2-core machine). Run: ``python -m benchmarks.bench_replay``
(``make bench BENCH=replay``). Reads
``benchmarks/data/bitbrains_rnd.csv.gz`` beside the repository; prints the
time to read it, to replay it (feed + recommend every hour), to score it, and the
resulting row.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from recommender.engine.profiles import get_profile
from recommender.engine.replay import replay
from recommender.engine.replay_scores import day_groups, score_timeline, summarise

TRACE = Path(__file__).resolve().parent / "data" / "bitbrains_rnd.csv.gz"


def main() -> None:
    """Run the benchmark and print the figures."""
    # The trace reader lives in the services, which import the Django models (no
    # database is used).
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "vpaweb.settings")
    import django

    django.setup()
    from recommender.services.replay.replay import load_trace_file

    t = time.perf_counter()
    loaded = load_trace_file(TRACE)
    trace = loaded.trace
    print(
        f"read: {time.perf_counter() - t:.2f} s"
        f" ({trace.timestamp_s.size / 1e6:.2f} M samples,"
        f" {len(trace.container_ids)} containers)"
    )
    profile = get_profile("vpa")
    t = time.perf_counter()
    (timeline,) = replay(trace, [profile])
    replay_s = time.perf_counter() - t
    moments = timeline.moments_s.size
    print(
        f"replay (feed + recommend every hour): {replay_s:.2f} s"
        f" ({moments} recomputes x {len(trace.container_ids)} containers,"
        f" {trace.timestamp_s.size / replay_s / 1e6:.2f} M samples/s)"
    )
    t = time.perf_counter()
    days = day_groups(trace, warmup_s=86400.0, start_s=timeline.start_s + 3600.0)
    row = summarise(score_timeline(trace, timeline, days))
    score_s = time.perf_counter() - t
    print(f"score: {score_s:.2f} s; replay + score {replay_s + score_s:.2f} s")
    print(
        f"vpa: {row['container_days']} VM-days, memory slack mean"
        f" {row['memory_slack_mean']:.3f}, overrun days"
        f" {row['memory_overrun_days_pct']:.2f} %"
    )
