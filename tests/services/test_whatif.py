"""What-if: a workload of the simulated cluster replayed under two profiles."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from recommender.engine import get_profile
from recommender.engine.replay import Timeline
from recommender.engine.replay_scores import updater_proposals
from recommender.errors import InvalidInput, NotFound
from recommender.models import Cluster, Policy, Workload
from recommender.services.connections import cluster_adapter_for
from recommender.services.replay.whatif import what_if

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def _timeline(cpu: list[float], mem: list[float], spread: float = 0.05) -> Timeline:
    cpu_a = np.array([np.nan, *cpu])[:, None]
    mem_a = np.array([np.nan, *mem])[:, None]
    values = {
        ("cpu", "target"): cpu_a,
        ("cpu", "lower"): cpu_a * (1 - spread),
        ("cpu", "upper"): cpu_a * (1 + spread),
        ("memory", "target"): mem_a,
        ("memory", "lower"): mem_a * (1 - spread),
        ("memory", "upper"): mem_a * (1 + spread),
    }
    return Timeline(
        profile=get_profile("vpa"), start_s=0.0, every_s=3600.0, values=values
    )


def test_updater_proposals_follow_the_threshold_and_the_bounds() -> None:
    # Wide bounds (±50 %): only the summed 10 % rule proposes.
    # 100 -> 104 (4 %: no), -> 109 (9 % from 100: no), -> 111 (11 %: yes, req=111),
    # -> 115 (3.6 % from 111: no).
    wide = _timeline([100, 104, 109, 111, 115], [1e9] * 5, spread=0.5)
    assert updater_proposals(wide).tolist() == [1]
    # 6 % CPU + 5 % memory together reach 10 %.
    both = _timeline([100, 106], [1e9, 1.05e9], spread=0.5)
    assert updater_proposals(both).tolist() == [1]
    # Narrow bounds (±5 %): a 6 % move leaves the request outside [lower, upper].
    narrow = _timeline([100, 106, 106], [1e9] * 3, spread=0.05)
    assert updater_proposals(narrow).tolist() == [1]
    # No recommendation yet: nothing proposed.
    empty = _timeline([np.nan, np.nan], [np.nan, np.nan])
    assert updater_proposals(empty).tolist() == [0]


def _workload() -> Workload:
    cluster = Cluster.objects.create(name="sim-whatif", kind=Cluster.Kind.SIMULATED)
    snapshot = cluster_adapter_for(cluster, now=NOW).discover()
    w = next(w for w in snapshot.workloads if w.pods)
    return Workload.objects.create(
        cluster=cluster, kind=w.kind, namespace=w.namespace, name=w.name
    )


@pytest.mark.django_db
def test_what_if_replays_current_and_candidate_side_by_side() -> None:
    workload = _workload()
    Policy.objects.create(workload=workload, profile="vpa")
    out = what_if(
        workload_id=workload.pk,
        profile="vpa",
        overrides={"margin_fraction": 0.5},
        days=2,
        now=NOW,
    )
    current, candidate = out["rows"]
    assert (current["role"], candidate["role"]) == ("current", "candidate")
    assert current["profile"] == "vpa"
    assert candidate["profile"] == "vpa[margin_fraction=0.5]"
    assert current["container_days"] >= 1
    # A 50 % margin instead of 15 %: more memory slack, never less.
    assert candidate["memory_slack_mean"] > current["memory_slack_mean"]
    assert out["containers"]
    chart = out["containers"][0]["chart"]
    n = len(chart["t"])
    assert n >= 47
    for key in ("usage_cpu", "usage_memory"):
        assert len(chart[key]) == n
    cur = [v for v in chart["current"]["target_memory"] if v is not None]
    cand = [v for v in chart["candidate"]["target_memory"] if v is not None]
    assert cur and len(cur) == len(cand)
    assert all(b >= a for a, b in zip(cur, cand, strict=True))
    assert (
        sum(c["updater_proposals"]["current"] for c in out["containers"])
        == (current["updater_proposals"])
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"profile": "nope"}, "profile"),
        (
            {"profile": "vpa", "overrides": {"margin_fraction": -1}},
            "profile_overrides.margin_fraction",
        ),
        ({"profile": "vpa", "overrides": {"no_such": 1}}, "profile_overrides.no_such"),
        ({"profile": "vpa", "overrides": [1]}, "profile_overrides"),
        ({"profile": "vpa", "days": 0}, "days"),
        ({"profile": "vpa", "days": 15}, "days"),
        ({"profile": "vpa", "days": "a week"}, "days"),
    ],
)
def test_bad_input_names_the_field(kwargs: dict, field: str) -> None:
    workload = _workload()
    with pytest.raises(InvalidInput) as err:
        what_if(workload_id=workload.pk, now=NOW, **kwargs)
    assert field in err.value.fields


@pytest.mark.django_db
def test_an_unknown_workload_is_not_found() -> None:
    with pytest.raises(NotFound):
        what_if(workload_id=999999, profile="vpa", now=NOW)


@pytest.mark.django_db
def test_one_workloads_history_reads_only_its_series_and_is_the_namespaces_share(
    monkeypatch,
) -> None:
    from recommender.services.replay import replay as replay_service
    from recommender.sources.simulated import SimulatedUsageSource

    cluster = Cluster.objects.create(name="sim-read", kind=Cluster.Kind.SIMULATED)
    snapshot = cluster_adapter_for(cluster, now=NOW).discover()
    namespace = snapshot.workloads[0].namespace
    names = sorted({w.name for w in snapshot.workloads if w.namespace == namespace})
    assert len(names) > 2

    def history(name):
        return replay_service.load_cluster_history(
            cluster_name=cluster.name,
            namespace=namespace,
            workload=name,
            days=1.0,
            now_s=NOW.timestamp(),
        ).trace

    with monkeypatch.context() as patched:
        # The namespace's read, filtered by owner, as before.
        read = replay_service.read_usage
        patched.setattr(
            replay_service,
            "read_usage",
            lambda source, workloads=None, **kwargs: read(source, **kwargs),
        )
        whole = {name: history(name) for name in names}

    def refuse(*args, **kwargs):
        raise AssertionError("the namespace's usage was read for one workload")

    monkeypatch.setattr(SimulatedUsageSource, "fetch_usage", refuse)
    for name in names:
        mine, before = history(name), whole[name]
        assert mine.container_ids == before.container_ids
        assert mine.series_keys == before.series_keys
        for field in ("series_index", "timestamp_s", "cpu_cores", "memory_bytes"):
            np.testing.assert_array_equal(getattr(mine, field), getattr(before, field))


@pytest.mark.django_db
def test_comparing_workloads_reuses_the_replays_scores(monkeypatch) -> None:
    from dataclasses import replace

    from recommender.services.replay import replay as replay_service

    cluster = Cluster.objects.create(name="sim-scores", kind=Cluster.Kind.SIMULATED)
    snapshot = cluster_adapter_for(cluster, now=NOW).discover()
    loaded = replay_service.load_cluster_history(
        cluster_name=cluster.name,
        namespace=snapshot.workloads[0].namespace,
        workload=None,
        days=1.0,
        now_s=NOW.timestamp(),
    )
    b = get_profile("vpa").with_overrides(margin_fraction=0.4, name="b")
    report = replay_service.run_replay(loaded, [get_profile("vpa"), b], warmup_s=3600.0)
    # Scored again (a report without its warm-up): the numbers to match.
    expected = replay_service.compare_workloads(
        loaded, replace(report, warmup_s=None), warmup_s=3600.0
    )
    scored = []
    score = replay_service.score_timeline
    monkeypatch.setattr(
        replay_service,
        "score_timeline",
        lambda *args: scored.append(1) or score(*args),
    )

    got = replay_service.compare_workloads(loaded, report, warmup_s=3600.0)

    assert not scored
    assert len(got) > 2
    assert repr(got) == repr(expected)  # NaN-aware equality
