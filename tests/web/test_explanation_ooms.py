"""On the workload page, the memory target's "why" says how OOM kills
raised it, and a resource left out for lack of samples says so."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from recommender.engine import AggregateSet, OomBatch, SampleBatch, get_profile
from recommender.engine import recommend as engine_recommend
from recommender.engine.oom import oom_effect
from recommender.models import OomKill
from recommender.web.presenters import describe_explanation
from tests.factories import make_cluster, make_recommendation, make_workload

MI = 2**20
DAY = 86400.0
PROFILE = get_profile("vpa")


def killed_daily(request_bytes: int, usage_bytes: int, days: int = 8) -> dict:
    """An explanation of a container using ``usage_bytes``, OOM-killed at the end of
    each day at ``request_bytes`` (the issue's container: 75 kills, usage under
    1 GiB, target 1.26 GiB)."""
    aggregates = AggregateSet.empty(PROFILE, 1)
    for day in range(days):
        times = day * DAY + np.arange(1440) * 60.0
        aggregates.add_samples(
            SampleBatch.from_grid(
                series_aggregate=np.array([0]),
                series_keys=["pod-a"],
                timestamp_s=times,
                cpu_cores=np.full((1, times.size), 0.3),
                memory_bytes=np.full((1, times.size), float(usage_bytes)),
            )
        )
        aggregates.record_ooms(
            OomBatch(
                series_aggregate=[0],
                series_keys=["pod-a"],
                series_index=[0],
                timestamp_s=[day * DAY + 1439 * 60.0],
                memory_request_bytes=[float(request_bytes)],
            )
        )
    (result,) = engine_recommend(
        aggregates, rows=[0], profile=PROFILE, containers_in_pod=[1]
    )
    return result.explanation.to_dict()


def effect(requests: list[int], explanation: dict) -> dict | None:
    return oom_effect(
        requests,
        ratio=PROFILE.oom_bump_ratio,
        min_bump_bytes=PROFILE.oom_min_bump_bytes,
        target=explanation["resources"]["memory"]["target"],
    )


def test_kills_that_set_the_target_are_said_to_raise_it():
    explanation = killed_daily(900 * MI, 850 * MI)
    lines = describe_explanation(
        explanation, oom_effect=effect([900 * MI] * 8, explanation)
    )
    labels = [label for label, _ in lines]
    # Right after the memory target's chain.
    assert labels[labels.index("Memory target") + 1] == "Memory and OOM kills"
    text = dict(lines)["Memory and OOM kills"]
    assert text.startswith("8 OOM kills in the memory history before this")
    assert "max(request + 100 MiB, request × 1.2): 1.05 GiB here" in text
    assert "the OOM kills raised the memory target to" in text
    target = explanation["resources"]["memory"]["target"]["value"]
    assert target > 1.2 * 900 * MI  # read at the kills' samples, plus the margin


def test_kills_below_the_usage_say_usage_sets_the_target():
    explanation = killed_daily(900 * MI, 850 * MI)
    text = dict(
        describe_explanation(explanation, oom_effect=effect([100 * MI], explanation))
    )["Memory and OOM kills"]
    assert text.startswith("1 OOM kill in")
    assert "usage peaks, not the OOM kills, set the target" in text


def test_kills_above_the_percentile_lift_it():
    explanation = killed_daily(900 * MI, 850 * MI)
    text = dict(
        describe_explanation(explanation, oom_effect=effect([4096 * MI], explanation))
    )["Memory and OOM kills"]
    assert "lie above the p90 read" in text


def test_no_kills_no_line():
    explanation = killed_daily(900 * MI, 850 * MI)
    lines = dict(describe_explanation(explanation, oom_effect=None))
    assert "Memory and OOM kills" not in lines


def test_omitted_resources_say_why_and_their_numbers_are_not_shown():
    profile = get_profile("vpa")
    aggregates = AggregateSet.empty(profile, 1)
    times = np.arange(1440) * 60.0
    aggregates.add_samples(
        SampleBatch.from_grid(
            series_aggregate=np.array([0]),
            series_keys=["pod-a"],
            timestamp_s=times,
            cpu_cores=np.full((1, times.size), np.nan),
            memory_bytes=np.full((1, times.size), 2e8),
        )
    )
    (result,) = engine_recommend(
        aggregates,
        rows=[0],
        profile=profile,
        containers_in_pod=[1],
        omit_unsampled=True,
    )
    lines = dict(describe_explanation(result.explanation.to_dict()))
    assert lines["CPU: not recommended"].startswith("no CPU samples")
    assert lines["Memory: not recommended"].startswith("no memory upper bound")
    assert "CPU target" not in lines and "Memory upper bound" not in lines
    assert "Memory target" in lines
    assert not any("TiB" in text for label, text in lines.items() if "not" not in label)


@pytest.mark.django_db
def test_the_workload_page_says_how_oom_kills_raised_the_target(viewer_client):
    workload = make_workload(
        make_cluster("prod"),
        "feeds-worker",
        containers={"app": {"request_memory_bytes": 900 * MI}},
    )
    container = workload.containers.get()
    now = timezone.now()
    explanation = killed_daily(900 * MI, 850 * MI)
    make_recommendation(
        container,
        memory_bytes=explanation["resources"]["memory"]["target"]["value"],
        created_at=now - timedelta(hours=1),
        explanation=explanation,
    )
    for day in range(8):
        OomKill.objects.create(
            container=container,
            pod="feeds-worker-1",
            occurred_at=now - timedelta(days=day, hours=2),
            memory_request_bytes=900 * MI,
        )
    # After the recommendation: not part of its histogram, not counted.
    OomKill.objects.create(
        container=container,
        pod="feeds-worker-1",
        occurred_at=now - timedelta(minutes=5),
        memory_request_bytes=900 * MI,
    )
    body = viewer_client.get(f"/workloads/{workload.pk}/").content.decode()
    assert "Memory and OOM kills" in body
    assert "8 OOM kills in the memory history before this recommendation" in body
    assert "the OOM kills raised the memory target to" in body
    assert "OOM kills (8 days): 9" in body  # the page's list has all of them
