"""Upstream estimator and recommender tests (pkg/recommender/logic/estimator_test.go,
recommender_test.go, model/types_test.go), exact numbers."""

import math

import numpy as np
import pytest

from recommender.engine.config import cpu_histogram_options, memory_histogram_options
from recommender.engine.estimator import (
    confidence_multipliers,
    confidences,
    cpu_amount_from_cores,
    recommend,
    resource_amount_from_float,
    scale_resources,
    with_margin,
)
from recommender.engine.histogram import HistogramBatch
from recommender.engine.profiles import get_profile
from recommender.engine.quantity import humanize_memory_quantity, round_up

from .helpers import constant_grid, feed, new_set

ROW = np.array([0])
CPU_314 = 3140  # 3.14 cores in millicores
MEM_314 = 3140000000


def nine_samples_two_minutes_apart():
    t = np.arange(9) * 120.0
    return t.min(), t.max(), 9


def test_percentile_estimator():  # 22 TestPercentileEstimator
    cpu = HistogramBatch(cpu_histogram_options(), 1)
    mem = HistogramBatch(memory_histogram_options(), 1)
    for v in (1.0, 2.0, 3.0):
        cpu.add_cells(ROW, cpu.options.find_bucket(np.array([v])), np.array([1.0]))
        mem.add_cells(
            ROW, mem.options.find_bucket(np.array([v * 1e9])), np.array([1.0])
        )
    p_cpu = float(cpu.percentile(ROW, 0.2)[0])
    p_mem = float(mem.percentile(ROW, 0.5)[0])
    assert p_cpu == pytest.approx(1.0, rel=0.05)
    assert p_mem == pytest.approx(2e9, rel=0.05)
    assert p_cpu == pytest.approx(1.0162813885, abs=1e-9)
    assert cpu_amount_from_cores(p_cpu) == 1016
    assert p_mem == pytest.approx(2093479957.15, abs=0.01)


# 23 TestConfidenceMultiplier (no samples)
def test_confidence_multiplier_without_samples():
    conf = confidences(np.array([np.nan]), np.array([np.nan]), np.array([0]), 86400.0)
    assert conf[0] == 0.0
    assert scale_resources(CPU_314, confidence_multipliers(1.0, 1.0, conf))[0] == 10**14
    assert scale_resources(CPU_314, confidence_multipliers(1.0, -1.0, conf))[0] == 0


def test_confidence_multiplier_with_nine_samples():  # 23b
    first, last, n = nine_samples_two_minutes_apart()
    conf = confidences(np.array([first]), np.array([last]), np.array([n]), 86400.0)
    assert conf[0] == pytest.approx(0.00625)
    mult = confidence_multipliers(0.1, 2.0, conf)
    assert scale_resources(CPU_314, mult)[0] == 907460
    assert scale_resources(MEM_314, mult)[0] == pytest.approx(9.0746e11, abs=1)


def test_confidence_multiplier_with_custom_interval():  # 24
    first, last, n = nine_samples_two_minutes_apart()
    conf = confidences(np.array([first]), np.array([last]), np.array([n]), 18 * 60.0)
    assert conf[0] == 0.5
    mult = confidence_multipliers(0.1, 2.0, conf)
    assert scale_resources(CPU_314, mult)[0] == 4521  # 4521.6 truncated
    assert scale_resources(MEM_314, mult)[0] == 4521600000


def test_confidence_multiplier_no_history():  # 25
    conf = confidences(np.array([np.nan]), np.array([np.nan]), np.array([0]), 86400.0)
    assert scale_resources(CPU_314, confidence_multipliers(0.1, 2.0, conf))[0] == 10**14


def test_margin_estimator():  # 26
    assert with_margin(np.array([CPU_314]), 0.1)[0] == 3454
    assert with_margin(np.array([MEM_314]), 0.1)[0] == 3454000000


def test_min_resources_estimator():  # 27
    assert max(CPU_314, 200) == 3140  # the floor keeps larger values
    aggs = new_set()
    feed(aggs, 0, "p", 0.0, cpu=3.0, mem=4e8)
    rec = recommend(aggs, rows=[0], profile=get_profile("vpa"), containers_in_pod=[1])[
        0
    ]
    assert rec.target.cpu_millicores > 25 and rec.target.memory_bytes > 262144000
    assert not rec.explanation.resources["cpu"].target.pod_minimum_applied


def _one_millicore(n_containers):
    aggs = new_set()
    feed(aggs, 0, "p", 0.0, cpu=0.001, mem=1e6)
    return recommend(
        aggs, rows=[0], profile=get_profile("vpa"), containers_in_pod=[n_containers]
    )[0]


def test_min_resources_applied():  # 28
    rec = _one_millicore(1)
    assert rec.target.to_dict() == {"cpu": 25, "memory": 262144000}
    assert rec.explanation.resources["memory"].target.pod_minimum_applied


def test_min_resources_split_across_containers():  # 29
    rec = _one_millicore(2)
    assert rec.target.to_dict() == {"cpu": 12, "memory": 131072000}
    assert rec.lower_bound.to_dict() == {"cpu": 12, "memory": 131072000}


def test_controlled_resources_filtered():  # 30
    aggs = new_set()
    feed(aggs, 0, "p", 0.0, cpu=0.5, mem=5e8)
    rec = recommend(
        aggs,
        rows=[0],
        profile=get_profile("vpa"),
        containers_in_pod=[1],
        controlled_resources=["memory"],
    )[0]
    for bound in (rec.target, rec.lower_bound, rec.upper_bound):
        assert bound.cpu_millicores is None and bound.memory_bytes is not None


def test_types_conversions():  # 45 TestCPUAmountFromCores, TestScaleResource, ...
    assert [cpu_amount_from_cores(c) for c in (0.069946, 0.61535112, 0.00455)] == [
        69,
        615,
        4,
    ]
    assert scale_resources(
        np.array([4, 12, 1213, 41208]), np.array([2.124, 1.1, 1.2414, 1e-6])
    ).tolist() == [8, 13, 1505, 0]
    assert [resource_amount_from_float(x) for x in (100.5, -50.5, 1e14 + 100)] == [
        100,
        0,
        10**14,
    ]
    assert [round_up(100, 7), round_up(100, 10), round_up(0, 5)] == [105, 100, 0]


def test_humanize_memory_quantity():  # 46 TestHumanizeMemoryQuantity
    assert humanize_memory_quantity(4992073454) == "4.65Gi"
    assert humanize_memory_quantity(6499152537) == "6.05Gi"
    assert humanize_memory_quantity(16357476492) == "15.23Gi"
    assert humanize_memory_quantity(1537) == "1.50Ki"


# Upstream's estimator: 0 * Inf treated as 0
def test_zero_samples_upper_bound_is_the_minimum_not_nan():
    aggs = new_set()
    rec = recommend(aggs, rows=[0], profile=get_profile("vpa"), containers_in_pod=[1])[
        0
    ]
    assert rec.upper_bound.to_dict() == {"cpu": 25, "memory": 262144000}
    assert rec.target == rec.lower_bound == rec.upper_bound
    assert math.isinf(rec.explanation.resources["cpu"].upper_multiplier)
    assert rec.explanation.to_dict()["resources"]["cpu"]["upper_multiplier"] is None


def test_recommend_rejects_bad_arguments():
    aggs = new_set()
    p = get_profile("vpa")
    with pytest.raises(ValueError, match="rows"):
        recommend(aggs, rows=[3], profile=p, containers_in_pod=[1])
    with pytest.raises(ValueError, match="containers_in_pod"):
        recommend(aggs, rows=[0], profile=p, containers_in_pod=[0])
    with pytest.raises(ValueError, match="controlled_resources"):
        recommend(
            aggs,
            rows=[0],
            profile=p,
            containers_in_pod=[1],
            controlled_resources=["gpu"],
        )


@pytest.mark.parametrize(
    "controlled", [("cpu", "memory"), ("memory",), ("cpu",), ()], ids=repr
)
@pytest.mark.parametrize("profile_name", ["vpa", "peak-memory"])
def test_explanation_dict_equals_the_explanation_objects(controlled, profile_name):
    profile = get_profile(profile_name)
    aggs = new_set(4, profile)
    feed(aggs, 0, "p", 0.0, cpu=0.5, mem=5e8)  # one sample: confidence 0, Inf bounds
    feed(aggs, 1, "p", 0.0, mem=3e8)  # memory only: no CPU samples note
    constant_grid(aggs, 2, "p", 0.0, 1440, cpu=1.5, mem=2e9)  # a day of history
    recs = recommend(  # row 3 stays empty; rows repeat and come out of order
        aggs,
        rows=[3, 2, 1, 0, 2],
        profile=profile,
        containers_in_pod=[1, 2, 3, 1, 2],
        controlled_resources=controlled,
    )
    for rec in recs:
        assert rec.explanation_dict() == rec.explanation.to_dict()
        assert list(rec.explanation.resources) == list(controlled)
    assert recs[1] == recs[4] and recs[1] != recs[0]
    # The rows differ, so a mix-up of indices would show.
    dicts = [rec.explanation_dict() for rec in recs]
    assert [d["sample_count"] for d in dicts] == [0, 1440, 0, 1, 1440]
    assert [d["containers_in_pod"] for d in dicts] == [1, 2, 3, 1, 2]
