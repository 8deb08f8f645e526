"""`manage.py recommend`: the engine's offline face, on the worked examples of
tests/engine/test_worked_examples.py, with bad input named by file, line and column."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from django.core.management import CommandError, call_command

from recommender.engine import PROFILES

MIB = 2**20
START_S = 1_795_000_000  # a whole minute, 2026-11-19


def write_usage(path: Path, rows: list[tuple], header: str | None = None) -> Path:
    with path.open("w", newline="") as handle:
        handle.write(
            (
                header
                or "timestamp,namespace,workload,pod,container,cpu_cores,memory_bytes"
            )
            + "\n"
        )
        writer = csv.writer(handle)
        writer.writerows(rows)
    return path


def constant_usage(minutes: int, *, cpu_cores=0.5, memory_bytes=500 * MIB, pod="web-1"):
    return [
        (START_S + 60 * i, "shop", "web", pod, "app", cpu_cores, memory_bytes)
        for i in range(minutes)
    ]


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("recommend", *args, stdout=out)
    return out.getvalue()


def only_recommendation(output: str) -> dict:
    recommendations = json.loads(output)["recommendations"]
    assert len(recommendations) == 1
    return recommendations[0]


def test_eight_days_of_constant_usage_gives_upstream_numbers(tmp_path):
    usage = write_usage(tmp_path / "usage.csv", constant_usage(8 * 1440))
    rec = only_recommendation(run("--samples", str(usage), "--format", "json"))
    assert (rec["namespace"], rec["workload"], rec["containerName"]) == (
        "shop",
        "web",
        "app",
    )
    assert rec["target"] == {"cpu": "587m", "memory": "628694953"}
    assert rec["lowerBound"] == {"cpu": "586m", "memory": "628537795"}
    assert rec["upperBound"] == {"cpu": "660m", "memory": "707288644"}
    assert rec["uncappedTarget"] == rec["target"]


def test_one_hour_then_oom_replaces_the_peak(tmp_path):
    usage = write_usage(tmp_path / "usage.csv", constant_usage(60))
    ooms = tmp_path / "ooms.csv"
    ooms.write_text(
        "timestamp,namespace,workload,pod,container,memory_request_bytes\n"
        f"{START_S + 60 * 60},shop,web,web-1,app,{600 * MIB}\n"
    )
    rec = only_recommendation(
        run("--samples", str(usage), "--oom-events", str(ooms), "--format", "json")
    )
    assert rec["target"] == {"cpu": "587m", "memory": "920733364"}
    assert rec["lowerBound"] == {"cpu": "559m", "memory": "877382550"}
    assert rec["upperBound"] == {"cpu": "14913m", "memory": "23392869705"}
    # The explanation says how the kill bears on the memory target: the one peak is
    # the kill's sample, 1.2 x 600 MiB = 720 MiB, so the target is read at it.
    assert rec["explanation"]["oom_kills"] == {
        "count": 1,
        "largest_request_bytes": 600 * MIB,
        "sample_low_bytes": 720 * MIB,
        "sample_high_bytes": 720 * MIB,
        "bump_ratio": 1.2,
        "min_bump_bytes": 100 * MIB,
        "effect": "at",
    }
    without = only_recommendation(run("--samples", str(usage), "--format", "json"))
    assert "oom_kills" not in without["explanation"]


def test_row_order_and_time_format_do_not_matter(tmp_path):
    rows = constant_usage(120)
    in_order = write_usage(tmp_path / "ordered.csv", rows)
    shuffled_rfc3339 = [
        (datetime.fromtimestamp(r[0], UTC).isoformat().replace("+00:00", "Z"), *r[1:])
        for r in reversed(rows)
    ]
    shuffled = write_usage(tmp_path / "shuffled.csv", shuffled_rfc3339)
    assert run("--samples", str(in_order), "--format", "json") == run(
        "--samples", str(shuffled), "--format", "json"
    )


def test_replicas_share_an_aggregate_and_the_pod_minimum_is_split(tmp_path):
    rows = constant_usage(60, cpu_cores=0.001, memory_bytes=1_000_000, pod="web-1")
    rows += constant_usage(60, cpu_cores=0.001, memory_bytes=1_000_000, pod="web-2")
    rows += [
        (t, ns, wl, pod, "sidecar", cpu, mem) for t, ns, wl, pod, _c, cpu, mem in rows
    ]
    usage = write_usage(tmp_path / "usage.csv", rows)
    recommendations = json.loads(run("--samples", str(usage), "--format", "json"))[
        "recommendations"
    ]
    assert [r["containerName"] for r in recommendations] == ["app", "sidecar"]
    for rec in recommendations:
        # 25m and 250Mi per pod, split over two containers (upstream test #29).
        assert rec["target"] == {"cpu": "12m", "memory": "125Mi"}


def test_empty_cells_mean_the_signal_is_absent(tmp_path):
    rows = [
        (t, ns, wl, pod, c, cpu, "")
        for t, ns, wl, pod, c, cpu, _m in constant_usage(60)
    ]
    usage = write_usage(tmp_path / "usage.csv", rows)
    rec = only_recommendation(run("--samples", str(usage), "--format", "json"))
    assert rec["target"]["cpu"] == "587m"
    # No memory samples: no memory recommendation (upstream would give the pod
    # minimum, 250Mi), and the explanation says why.
    assert "memory" not in rec["target"]
    assert "memory" not in rec["upperBound"]
    omitted = rec["explanation"]["omitted"]
    assert [(o["resource"], o["bounds"]) for o in omitted] == [
        ("memory", ["target", "lower_bound", "upper_bound"])
    ]
    assert omitted[0]["reason"].startswith("no memory samples")


def test_memory_without_cpu_samples_gets_no_cpu_and_no_90_tib_upper_bound(tmp_path):
    # A sidecar with memory but no CPU samples showed a 90.9 TiB upper
    # bound (upstream's confidence counts CPU samples: 0 -> the 1e14 clamp).
    rows = [
        (t, ns, wl, pod, "sidecar", "", m)
        for t, ns, wl, pod, _c, _cpu, m in constant_usage(3 * 1440)
    ]
    usage = write_usage(tmp_path / "usage.csv", [*constant_usage(3 * 1440), *rows])
    document = json.loads(run("--samples", str(usage), "--format", "json"))
    by_name = {r["containerName"]: r for r in document["recommendations"]}
    sidecar, app = by_name["sidecar"], by_name["app"]
    assert "cpu" not in sidecar["target"] and "cpu" not in sidecar["upperBound"]
    assert "memory" in sidecar["target"] and "memory" not in sidecar["upperBound"]
    reasons = {o["resource"]: o for o in sidecar["explanation"]["omitted"]}
    assert reasons["cpu"]["reason"].startswith("no CPU samples")
    assert reasons["memory"]["bounds"] == ["upper_bound"]
    # The container with samples keeps upstream's numbers and omits nothing.
    assert app["explanation"]["omitted"] == []
    assert set(app["upperBound"]) == {"cpu", "memory"}
    table = run("--samples", str(usage))
    rows_part, notes_part = table.split("Left out")
    assert "TiB" not in rows_part
    assert "shop/web/sidecar: no CPU samples" in notes_part
    assert "shop/web/sidecar: no memory upper bound" in notes_part


def test_table_yaml_and_csv_formats(tmp_path):
    usage = write_usage(tmp_path / "usage.csv", constant_usage(8 * 1440))
    table = run("--samples", str(usage))
    assert table.splitlines()[0].split()[:3] == ["NAMESPACE", "WORKLOAD", "CONTAINER"]
    assert "shop" in table.splitlines()[1]
    document = yaml.safe_load(run("--samples", str(usage), "--format", "yaml"))
    assert document["recommendations"][0]["target"] == {
        "cpu": "587m",
        "memory": "628694953",
    }
    rows = list(
        csv.DictReader(io.StringIO(run("--samples", str(usage), "--format", "csv")))
    )
    assert rows[0]["target_cpu"] == "587m"
    # For people, memory is rounded UP to whole MiB (707288644 B = 674.5 MiB); the
    # JSON and YAML above keep upstream's exact quantity.
    assert rows[0]["upper_memory"] == "675Mi"
    assert rows[0]["target_memory"] == "600Mi"  # 628694953 B = 599.6 MiB
    # The table rounds memory as the CSV does: up, never below the recommendation.
    cells = table.splitlines()[1].split("  ")
    cells = [c.strip() for c in cells if c.strip()]
    assert cells[5] == rows[0]["target_memory"]
    assert cells[6] == f"{rows[0]['lower_memory']} – {rows[0]['upper_memory']}"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            ("yesterday", "shop", "web", "p", "app", "0.5", "1"),
            "usage.csv:3: column 'timestamp'",
        ),
        (
            (str(START_S), "shop", "web", "p", "app", "half", "1"),
            "usage.csv:3: column 'cpu_cores'",
        ),
        (
            (str(START_S), "shop", "web", "p", "app", "0.5", "-5"),
            "usage.csv:3: column 'memory_bytes': '-5' is negative",
        ),
        (
            (str(START_S), "shop", "", "p", "app", "0.5", "1"),
            "usage.csv:3: column 'workload'",
        ),
    ],
)
def test_bad_rows_are_named_by_file_line_and_column(tmp_path, row, message):
    usage = write_usage(tmp_path / "usage.csv", [constant_usage(1)[0], row])
    with pytest.raises(CommandError, match=message):
        run("--samples", str(usage))


def test_missing_column_and_missing_file_and_unknown_profile(tmp_path):
    usage = write_usage(
        tmp_path / "usage.csv",
        [(START_S, "shop", "web", "p", "app", 1)],
        header="timestamp,namespace,workload,pod,container,cpu_cores",
    )
    with pytest.raises(
        CommandError, match=r"usage\.csv:1: missing column.*memory_bytes"
    ):
        run("--samples", str(usage))
    with pytest.raises(CommandError, match=r"nothing\.csv: cannot be read"):
        run("--samples", str(tmp_path / "nothing.csv"))
    with pytest.raises(CommandError) as refused:
        run("--samples", str(usage), "--profile", "no-such-profile")
    assert str(refused.value) == (
        "--profile: unknown profile 'no-such-profile'; choose one of "
        + ", ".join(PROFILES)
    )


def test_csv_output_neutralises_cells_a_spreadsheet_would_run(tmp_path):
    rows = [
        (t, "=shop", "+web", pod, "@app", cpu, memory)
        for t, _, _, pod, _, cpu, memory in constant_usage(3 * 1440)
    ]
    usage = write_usage(tmp_path / "usage.csv", rows)
    (row,) = csv.DictReader(
        io.StringIO(run("--samples", str(usage), "--format", "csv"))
    )
    # As the API's CSV export does (recommender/text.py csv_cell).
    assert (row["namespace"], row["workload"], row["container"]) == (
        "'=shop",
        "'+web",
        "'@app",
    )
