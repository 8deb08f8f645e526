"""Small builders shared by the engine tests."""

import numpy as np

from recommender.engine.aggregation import AggregateSet
from recommender.engine.batch import OomBatch, SampleBatch
from recommender.engine.profiles import get_profile

NAN = float("nan")
HOUR = 3600.0
DAY = 86400.0
MI = 2**20


def new_set(size=1, profile=None, **kw):
    return AggregateSet.empty(profile or get_profile("vpa"), size, **kw)


def feed(aggs, row, key, t, *, cpu=NAN, mem=NAN):
    """One sample row for series ``key`` of aggregate ``row``."""
    return aggs.add_samples(
        SampleBatch(
            series_aggregate=[row],
            series_keys=[key],
            series_index=[0],
            timestamp_s=[float(t)],
            cpu_cores=[float(cpu)],
            memory_bytes=[float(mem)],
        )
    )


def oom(aggs, row, key, t, request):
    return aggs.record_ooms(
        OomBatch(
            series_aggregate=[row],
            series_keys=[key],
            series_index=[0],
            timestamp_s=[float(t)],
            memory_request_bytes=[float(request)],
        )
    )


def constant_grid(aggs, row, key, t0, count, *, cpu, mem, step=60.0):
    ts = t0 + step * np.arange(count)
    return aggs.add_samples(
        SampleBatch.from_grid(
            series_aggregate=[row],
            series_keys=[key],
            timestamp_s=ts,
            cpu_cores=np.full((1, count), float(cpu)),
            memory_bytes=np.full((1, count), float(mem)),
        )
    )
