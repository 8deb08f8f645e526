"""`manage.py replay`: the inputs, the profiles and overrides, the outputs, bad input.

The numbers themselves are checked against the slow reference in
tests/engine/test_replay.py; here the command must report exactly what the engine
computes, from each kind of input.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from recommender.engine import get_profile
from recommender.engine.replay import Trace, replay
from recommender.engine.replay_scores import day_groups, score_timeline, summarise
from recommender.services.replay.offline import USAGE_COLUMNS
from recommender.services.replay.replay import load_trace_file, run_replay, with_limits
from tests.engine.test_replay import to_trace
from tests.engine.trace_slice import read_slice

SLICE = Path(__file__).parent.parent / "fixtures" / "traces" / "bitbrains_slice.csv.gz"
LIMITS = (
    "trace,container_id,n_samples,t_first_s,t_last_s,cpu_limit_cores,"
    "memory_limit_bytes,limit_source,limits_changed\n"
    "bitbrains_rnd,rnd_2013-8_vm233,1,0,0,4,8589934592,provisioned (trace),0\n"
    "bitbrains_rnd,rnd_2013-8_vm030,1,0,0,4,17106468864,provisioned (trace),0\n"
)


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("replay", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def engine_row(profile_name: str = "vpa", **overrides: object) -> dict:
    trace = to_trace(read_slice())
    profile = get_profile(profile_name).with_overrides(**overrides)
    (timeline,) = replay(trace, [profile])
    days = day_groups(trace, warmup_s=86400.0, start_s=timeline.start_s + 3600.0)
    return summarise(score_timeline(trace, timeline, days))


def same(row: dict, expected: dict) -> None:
    for key, value in expected.items():
        got = row[key]
        if value is None or (isinstance(value, float) and math.isnan(value)):
            assert got is None or (isinstance(got, float) and math.isnan(got)), key
        else:
            assert got == pytest.approx(value, rel=1e-12), key


def test_json_output_reports_the_engines_numbers_for_a_gzip_trace():
    out, err = run("--trace", str(SLICE), "--format", "json")
    rows = json.loads(out)["rows"]
    assert [r["profile"] for r in rows] == ["vpa"]
    same(rows[0], engine_row())
    assert "95/95 recomputes" in err  # progress on stderr


def test_several_profiles_with_overrides_and_the_manual_and_hindsight_rows(tmp_path):
    limits = tmp_path / "containers.csv"
    limits.write_text(LIMITS)
    out, _ = run(
        "--trace",
        str(SLICE),
        "--limits",
        str(limits),
        "--profile",
        "vpa",
        "--profile",
        "peak-memory",
        "--set",
        "margin_fraction=0.05",
        "--hindsight",
        "--format",
        "json",
        "--quiet",
    )
    rows = json.loads(out)["rows"]
    assert [r["profile"] for r in rows] == [
        "vpa[margin_fraction=0.05]",
        "peak-memory[margin_fraction=0.05]",
        "manual",
        "hindsight",
    ]
    same(rows[0], engine_row(margin_fraction=0.05))
    same(rows[1], engine_row("peak-memory", margin_fraction=0.05))
    # Only two of the six VMs have limits: the manual row scores their days only.
    assert rows[2]["container_days"] == 6
    assert rows[2]["changes_per_day_p50"] is None
    assert rows[3]["memory_overrun_days_pct"] == 0.0


def test_csv_and_table_outputs_hold_the_same_rows():
    csv_out, _ = run("--trace", str(SLICE), "--format", "csv", "--quiet")
    rows = list(csv.DictReader(io.StringIO(csv_out)))
    expected = engine_row()
    assert rows[0]["profile"] == "vpa"
    assert float(rows[0]["memory_slack_mean"]) == pytest.approx(
        expected["memory_slack_mean"], rel=1e-12
    )
    table, _ = run("--trace", str(SLICE), "--quiet")
    header, line = table.splitlines()
    assert header.split()[:3] == ["profile", "days", "mem"]
    assert line.split()[:3] == [
        "vpa",
        str(expected["container_days"]),
        f"{expected['memory_slack_mean']:.3f}",
    ]


def test_every_and_warmup_change_the_replay():
    out, _ = run(
        "--trace",
        str(SLICE),
        "--every",
        "2h",
        "--warmup",
        "36h",
        "--format",
        "json",
        "--quiet",
    )
    row = json.loads(out)["rows"][0]
    trace = to_trace(read_slice())
    (timeline,) = replay(trace, [get_profile("vpa")], every_s=7200.0)
    days = day_groups(trace, warmup_s=36 * 3600.0, start_s=timeline.start_s + 7200.0)
    same(row, summarise(score_timeline(trace, timeline, days)))


def test_containers_pick_part_of_a_trace_and_a_plot_is_written(tmp_path):
    plot = tmp_path / "vm233.json"
    out, _ = run(
        "--trace",
        str(SLICE),
        "--containers",
        "rnd_2013-8_vm233",
        "--plot",
        "rnd_2013-8_vm233",
        "--plot-out",
        str(plot),
        "--format",
        "json",
        "--quiet",
    )
    assert json.loads(out)["rows"][0]["container_days"] == 3
    figure = json.loads(plot.read_text())
    names = [t["name"] for t in figure["data"]]
    assert "memory target" in names and "cpu usage (millicores)" in names
    assert len(figure["data"][0]["x"]) == len(read_slice()["rnd_2013-8_vm233"])


def test_usage_csv_with_ooms_is_replayed_per_workload_container(tmp_path):
    # Two pods of one Deployment, from the slice's first VM; an OOM kill in the middle.
    samples = read_slice()["rnd_2013-8_vm233"]
    usage = tmp_path / "usage.csv"
    with usage.open("w", newline="") as handle:
        w = csv.writer(handle)
        w.writerow(USAGE_COLUMNS)
        for i, (t, c, m) in enumerate(samples):
            w.writerow([int(t), "shop", "api", f"api-{i % 2}", "app", c, int(m)])
    ooms = tmp_path / "ooms.csv"
    kill_s = int(samples[400][0])
    ooms.write_text(
        "timestamp,namespace,workload,pod,container,memory_request_bytes\n"
        f"{kill_s},shop,api,api-0,app,4000000000\n"
    )
    out, _ = run(
        "--samples",
        str(usage),
        "--oom-events",
        str(ooms),
        "--format",
        "json",
        "--quiet",
    )
    with_oom = json.loads(out)["rows"][0]
    out, _ = run("--samples", str(usage), "--format", "json", "--quiet")
    without = json.loads(out)["rows"][0]
    trace = Trace(
        container_ids=["shop/api/app"],
        series_container=[0, 0],
        series_keys=["api-0", "api-1"],
        series_index=[i % 2 for i in range(len(samples))],
        timestamp_s=[float(int(s[0])) for s in samples],
        cpu_cores=[s[1] for s in samples],
        memory_bytes=[float(int(s[2])) for s in samples],
        oom_series_index=[0],
        oom_timestamp_s=[float(kill_s)],
        oom_memory_request_bytes=[4e9],
    )
    (timeline,) = replay(trace, [get_profile("vpa")])
    days = day_groups(trace, warmup_s=86400.0, start_s=timeline.start_s + 3600.0)
    same(with_oom, summarise(score_timeline(trace, timeline, days)))
    # The kill (request 4 GB) raises the memory target: less overrun, more slack.
    assert with_oom["memory_slack_mean"] > without["memory_slack_mean"]


@pytest.mark.django_db
def test_a_namespace_of_the_simulated_cluster_is_replayed_from_its_source():
    from recommender.models import Cluster

    Cluster.objects.create(name="sim-replay", kind=Cluster.Kind.SIMULATED)
    out, _ = run(
        "--cluster",
        "sim-replay",
        "--namespace",
        "payments",
        "--days",
        "2",
        "--warmup",
        "12h",
        "--format",
        "json",
        "--quiet",
    )
    row = json.loads(out)["rows"][0]
    # 1-minute samples: the namespace's containers have a full scored day each.
    assert row["profile"] == "vpa"
    assert row["container_days"] >= 1
    assert 0.0 < row["memory_slack_mean"] < 1.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "exactly one of --trace, --samples, --cluster"),
        (("--profile", "nope"), "unknown profile 'nope'"),
        (("--set", "margin_fraction=-1"), "profile_overrides.margin_fraction"),
        (("--set", "no_such_field=1"), "profile_overrides.no_such_field"),
        (("--set", "margin_fraction"), "expected field=value"),
        (("--every", "soon"), "--every: 'soon' is not a duration"),
        (("--every", "0"), "--every: must be longer than 0"),
        (("--containers", "vm-unknown"), "no samples of vm-unknown"),
        (("--plot", "rnd_2013-8_vm233"), "--plot needs --plot-out"),
    ],
)
def test_bad_input_is_named(args, message):
    full = args if args == () else ("--trace", str(SLICE), "--quiet", *args)
    with pytest.raises(CommandError, match=message.replace("(", r"\(")):
        run(*full)


def test_a_broken_trace_file_names_the_line(tmp_path):
    bad = tmp_path / "bad.csv.gz"
    with gzip.open(bad, "wt") as handle:
        handle.write("trace,container_id,timestamp_s,cpu_cores,memory_bytes\n")
        handle.write("t,c1,100,0.5,1000\n")
        handle.write("t,c1,400,lots,1000\n")
    with pytest.raises(CommandError, match=r"bad.csv.gz:3: column 'cpu_cores'"):
        run("--trace", str(bad), "--quiet")


def test_the_service_reads_limits_beside_the_trace(tmp_path):
    limits = tmp_path / "containers.csv"
    limits.write_text(LIMITS)
    loaded = with_limits(load_trace_file(SLICE), limits)
    ids = list(loaded.trace.container_ids)
    assert loaded.memory_limit_bytes is not None
    assert loaded.memory_limit_bytes[ids.index("rnd_2013-8_vm233")] == 8589934592
    assert np.isnan(loaded.memory_limit_bytes[ids.index("rnd_2013-8_vm421")])
    report = run_replay(loaded, [get_profile("vpa")])
    assert [r["profile"] for r in report.rows] == ["vpa", "manual"]


@pytest.mark.django_db
def test_a_namespace_is_compared_workload_by_workload():
    from recommender.models import Cluster

    Cluster.objects.create(name="sim-compare", kind=Cluster.Kind.SIMULATED)
    common = (
        "--cluster",
        "sim-compare",
        "--namespace",
        "payments",
        "--days",
        "2",
        "--warmup",
        "12h",
        "--quiet",
        "--profile",
        "vpa",
        "--set",
        "margin_fraction=0.5",
        "--profile",
        "recurring-peaks",
    )
    out, _ = run(*common, "--worst", "1000", "--format", "json")
    body = json.loads(out)
    assert body["a"].startswith("vpa[") and body["b"].startswith("recurring-peaks[")
    assert body["workloads"] >= 2 and len(body["worst"]) == body["workloads"]
    # Every container-day of the totals belongs to exactly one workload.
    assert (
        sum(w["container_days"] for w in body["worst"])
        == (body["rows"][0]["container_days"])
    )
    assert all(w["workload"].startswith("payments/") for w in body["worst"])
    # Worst first: added overrun days, then added slack, never rise down the list.
    key = [
        (
            w["b_memory_overrun_days_pct"] - w["a_memory_overrun_days_pct"],
            w["b_memory_slack_mean"] - w["a_memory_slack_mean"],
        )
        for w in body["worst"]
    ]
    assert key == sorted(key, reverse=True)
    table, _ = run(*common, "--worst", "1")
    assert "workloads B does worst on" in table
    with pytest.raises(CommandError, match="two profiles"):
        run(
            "--cluster",
            "sim-compare",
            "--namespace",
            "payments",
            "--days",
            "1",
            "--quiet",
            "--worst",
            "1",
        )


def test_csv_output_neutralises_cells_a_spreadsheet_would_run(tmp_path):
    samples = read_slice()["rnd_2013-8_vm233"]
    usage = tmp_path / "usage.csv"
    with usage.open("w", newline="") as handle:
        w = csv.writer(handle)
        w.writerow(USAGE_COLUMNS)
        for t, c, m in samples:
            w.writerow([int(t), "-ns", "=api", "api-0", "app", c, int(m)])
    common = ("--samples", str(usage), "--quiet", "--format", "csv")
    out, _ = run(
        *common, "--profile", "vpa", "--profile", "recurring-peaks", "--worst", "5"
    )
    (row,) = list(csv.DictReader(io.StringIO(out)))
    assert row["workload"].startswith("'-ns/=api")
