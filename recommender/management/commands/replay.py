"""`manage.py replay`: what profiles would have recommended over recorded usage."""

from __future__ import annotations

import csv
import io
import json
import math
import re
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from recommender.engine import PROFILES
from recommender.errors import VpawebError
from recommender.services.replay.replay import (
    ReplayInput,
    ReplayReport,
    compare_workloads,
    container_series,
    load_cluster_history,
    load_trace_file,
    load_usage_csv,
    parse_settings,
    resolve_profiles,
    run_replay,
    with_limits,
)
from recommender.text import csv_cell

FORMATS = ("table", "json", "csv")
# Columns of the table (key, heading, format).
COLUMNS = (
    ("profile", "profile", "{}"),
    ("container_days", "days", "{}"),
    ("memory_slack_mean", "mem slack", "{:.3f}"),
    ("memory_slack_median", "(median)", "{:.3f}"),
    ("memory_overrun_days_pct", "mem >target %", "{:.2f}"),
    ("memory_over_upper_days_pct", ">upper %", "{:.2f}"),
    ("memory_over_1_2_target_days_pct", ">1.2x %", "{:.2f}"),
    ("cpu_slack_mean", "cpu slack", "{:.3f}"),
    ("cpu_slack_median", "(median)", "{:.3f}"),
    ("cpu_above_target_pct", "cpu >target %", "{:.2f}"),
    ("changes_per_day_p50", "chg/day p50", "{:g}"),
    ("changes_per_day_p99", "p99", "{:g}"),
    ("big_changes_per_day_p50", ">=10% p50", "{:g}"),
    ("big_changes_per_day_p99", "p99", "{:g}"),
    ("days_without_memory_change_pct", "no mem chg %", "{:.1f}"),
)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str, *, option: str) -> float:
    """``90``, ``30m``, ``1h``, ``1.5d`` as seconds; CommandError naming the option."""
    match = _DURATION.match(text)
    if not match:
        raise CommandError(f"{option}: {text!r} is not a duration such as 1h or 30m")
    return float(match.group(1)) * _UNIT_S[match.group(2)]


class Command(BaseCommand):
    help = (
        "Replay recorded usage through one or several profiles: recompute every "
        "--every, skip a warm-up, and score every container-day as Google's "
        "Autopilot paper does (docs/replay.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        source = parser.add_argument_group("input (one of)")
        source.add_argument(
            "--trace",
            type=Path,
            help="normalized trace CSV (gzip allowed): "
            "trace,container_id,timestamp_s,cpu_cores,memory_bytes",
        )
        source.add_argument(
            "--samples", type=Path, help="the recommend command's usage.csv"
        )
        source.add_argument("--cluster", help="a configured cluster's name")
        parser.add_argument("--oom-events", type=Path, help="with --samples: ooms.csv")
        parser.add_argument(
            "--limits",
            type=Path,
            help="containers.csv with the operators' limits (the 'manual' row); "
            "default: containers.csv beside --trace, when present",
        )
        parser.add_argument(
            "--containers", help="with --trace: comma-separated container ids"
        )
        parser.add_argument("--namespace", help="with --cluster: the namespace")
        parser.add_argument("--workload", help="with --cluster: one workload")
        parser.add_argument(
            "--days", type=float, default=8.0, help="with --cluster: history (8)"
        )
        parser.add_argument(
            "--profile",
            action="append",
            help=f"repeatable; one of {', '.join(PROFILES)} (default vpa)",
        )
        parser.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="FIELD=VALUE",
            help="profile override, as the policy editor allows (repeatable)",
        )
        parser.add_argument("--every", default="1h", help="recompute period (1h)")
        parser.add_argument("--warmup", default="24h", help="unscored start (24h)")
        parser.add_argument(
            "--hindsight",
            action="store_true",
            help="add a perfect-hindsight row (each day's own maximum)",
        )
        parser.add_argument("--format", choices=FORMATS, default="table")
        parser.add_argument(
            "--plot",
            metavar="CONTAINER",
            help="draw one container's target, bounds and usage (first profile)",
        )
        parser.add_argument(
            "--plot-out",
            type=Path,
            help="where to write the plot: .html (plotly, self-contained) or .json",
        )
        parser.add_argument(
            "--quiet", action="store_true", help="no progress on stderr"
        )
        parser.add_argument(
            "--worst",
            type=int,
            metavar="N",
            help=(
                "with two --profile A B: after the totals, the N workloads B does "
                "worst on against A (memory overrun days, then slack)"
            ),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        every_s = parse_duration(options["every"], option="--every")
        warmup_s = parse_duration(options["warmup"], option="--warmup")
        if not every_s > 0:
            raise CommandError("--every: must be longer than 0")
        try:
            profiles = resolve_profiles(
                options["profile"] or ["vpa"], parse_settings(options["set"])
            )
            loaded = self._load(options)
            progress = None if options["quiet"] else _Progress(self.stderr)
            report = run_replay(
                loaded,
                profiles,
                every_s=every_s,
                warmup_s=warmup_s,
                hindsight=options["hindsight"],
                progress=progress,
            )
            if progress is not None:
                progress.done()
            if options["plot"]:
                self._plot(loaded, report, options)
            worst = None
            if options["worst"] is not None:
                if options["worst"] < 1:
                    raise CommandError("--worst: must be a number >= 1")
                worst = compare_workloads(loaded, report, warmup_s=warmup_s)
        except VpawebError as exc:
            raise CommandError(exc.message) from None
        render = {"table": render_table, "json": render_json, "csv": render_csv}
        if worst is None:
            self.stdout.write(render[options["format"]](report), ending="")
            return
        self.stdout.write(
            render_comparison(report, worst, options["worst"], options["format"]),
            ending="",
        )

    def _load(self, options: dict[str, Any]) -> ReplayInput:
        chosen = [k for k in ("trace", "samples", "cluster") if options[k]]
        if len(chosen) != 1:
            raise CommandError("give exactly one of --trace, --samples, --cluster")
        if options["trace"]:
            ids = options["containers"]
            loaded = load_trace_file(
                options["trace"],
                containers=[c.strip() for c in ids.split(",")] if ids else None,
            )
            limits = options["limits"] or options["trace"].parent / "containers.csv"
            if options["limits"] or limits.exists():
                loaded = with_limits(loaded, limits)
            return loaded
        if options["samples"]:
            return load_usage_csv(options["samples"], options["oom_events"])
        if not options["namespace"]:
            raise CommandError("--cluster needs --namespace")
        return load_cluster_history(
            cluster_name=options["cluster"],
            namespace=options["namespace"],
            workload=options["workload"],
            days=options["days"],
            now_s=time.time(),
        )

    def _plot(
        self, loaded: ReplayInput, report: ReplayReport, options: dict[str, Any]
    ) -> None:
        out = options["plot_out"]
        if out is None:
            raise CommandError("--plot needs --plot-out FILE.html (or .json)")
        timeline = next(iter(report.timelines.values()))
        data = container_series(loaded, timeline, options["plot"])
        figure = plot_figure(data)
        if out.suffix == ".json":
            out.write_text(json.dumps(figure))
        else:
            import plotly.io

            plotly.io.write_html(figure, str(out), include_plotlyjs=True)
        self.stderr.write(f"plot of {options['plot']} written to {out}")


def plot_figure(data: dict[str, Any]) -> dict[str, Any]:
    """A plotly figure: memory and CPU usage with the target and bounds in force."""
    x = data["time"]
    traces = []
    for resource, scale, unit, axis in (
        ("memory", 1.0 / 2**20, "MiB", "y"),
        ("cpu", 1.0, "millicores", "y2"),
    ):
        usage = (
            data["memory_bytes"] / 2**20
            if resource == "memory"
            else (data["cpu_cores"] * 1000.0)
        )
        traces.append(
            {
                "x": x,
                "y": _list(usage),
                "name": f"{resource} usage ({unit})",
                "yaxis": axis,
                "mode": "lines",
            }
        )
        for bound in ("target", "lower", "upper"):
            traces.append(
                {
                    "x": x,
                    "y": _list(data[f"{resource}_{bound}"] * scale),
                    "name": f"{resource} {bound}",
                    "yaxis": axis,
                    "mode": "lines",
                    "line": {"dash": "solid" if bound == "target" else "dot"},
                }
            )
    return {
        "data": traces,
        "layout": {
            "title": {"text": f"{data['container']} under {data['profile']}"},
            "yaxis": {"title": {"text": "memory (MiB)"}, "domain": [0.55, 1]},
            "yaxis2": {"title": {"text": "CPU (millicores)"}, "domain": [0, 0.45]},
        },
    }


def _list(values: Any) -> list[float | None]:
    return [None if not math.isfinite(v) else v for v in values.tolist()]


class _Progress:
    """Recompute moments done, on stderr, at most twice a second."""

    def __init__(self, stream: Any):
        self.stream = stream
        self.last = 0.0
        self.started = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last >= 0.5 or done == total:
            self.last = now
            self.stream.write(
                f"\rreplay: {done}/{total} recomputes ({now - self.started:.1f} s)",
                ending="",
            )
            self.stream.flush()

    def done(self) -> None:
        self.stream.write("")


def _cell(value: Any, fmt: str) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "-"
    return fmt.format(value)


def render_table(report: ReplayReport) -> str:
    """Aligned columns, one row per profile."""
    rows = [[h for _, h, _ in COLUMNS]] + [
        [_cell(row[key], fmt) for key, _, fmt in COLUMNS] for row in report.rows
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    return "".join(
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(r, widths, strict=True))
        )
        + "\n"
        for r in rows
    )


def _json_value(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def render_json(report: ReplayReport) -> str:
    """One object per row; missing values are null."""
    rows = [{k: _json_value(v) for k, v in row.items()} for row in report.rows]
    return json.dumps({"rows": rows}, indent=2) + "\n"


def render_csv(report: ReplayReport) -> str:
    """A header and one line per row; missing values are empty."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    keys = [key for key, _, _ in COLUMNS]
    writer.writerow(keys)
    for row in report.rows:
        writer.writerow(
            "" if _json_value(row[k]) is None else csv_cell(row[k]) for k in keys
        )
    return out.getvalue()


# Columns of --worst (key, heading, format); a_ = the first profile, b_ = the second.
WORST_COLUMNS = (
    ("workload", "workload", "{}"),
    ("container_days", "days", "{}"),
    ("a_memory_slack_mean", "A mem slack", "{:.3f}"),
    ("b_memory_slack_mean", "B mem slack", "{:.3f}"),
    ("a_memory_overrun_days_pct", "A >target %", "{:.2f}"),
    ("b_memory_overrun_days_pct", "B >target %", "{:.2f}"),
    ("a_cpu_slack_mean", "A cpu slack", "{:.3f}"),
    ("b_cpu_slack_mean", "B cpu slack", "{:.3f}"),
    ("a_updater_proposals", "A resizes", "{}"),
    ("b_updater_proposals", "B resizes", "{}"),
)


def render_comparison(
    report: ReplayReport, workloads: list[dict[str, Any]], top: int, fmt: str
) -> str:
    """The totals, then the ``top`` workloads the second profile does worst on."""
    names = list(report.timelines)
    worst = workloads[:top]
    if fmt == "json":
        rows = [{k: _json_value(v) for k, v in row.items()} for row in report.rows]
        body = {
            "rows": rows,
            "a": names[0],
            "b": names[1],
            "workloads": len(workloads),
            "worst": [{k: _json_value(v) for k, v in w.items()} for w in worst],
        }
        return json.dumps(body, indent=2) + "\n"
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow([k for k, _, _ in WORST_COLUMNS])
        for w in worst:
            writer.writerow(
                "" if _json_value(w[k]) is None else csv_cell(w[k])
                for k, _, _ in WORST_COLUMNS
            )
        return out.getvalue()
    table = [[h for _, h, _ in WORST_COLUMNS]] + [
        [_cell(w[k], f) for k, _, f in WORST_COLUMNS] for w in worst
    ]
    widths = [max(len(r[i]) for r in table) for i in range(len(WORST_COLUMNS))]
    lines = "".join(
        "  ".join(
            cell.ljust(wd) if i == 0 else cell.rjust(wd)
            for i, (cell, wd) in enumerate(zip(r, widths, strict=True))
        )
        + "\n"
        for r in table
    )
    return (
        render_table(report)
        + f"\nA = {names[0]}, B = {names[1]}: the {len(worst)} of {len(workloads)}"
        " workloads B does worst on (memory overrun days added, then slack added)\n"
        + lines
    )
