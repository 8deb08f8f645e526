"""Upstream model/aggregations_config.go: histogram constants and bucketing schemes."""

from __future__ import annotations

from .histogram_options import HistogramOptions, exponential_options

# model/aggregations_config.go: minSampleWeight, the weight of every CPU sample.
MIN_SAMPLE_WEIGHT = 0.1
# model/aggregations_config.go: epsilon = 0.001 * minSampleWeight, for both histograms.
EPSILON = 0.001 * MIN_SAMPLE_WEIGHT
# model/aggregations_config.go: DefaultHistogramBucketSizeGrowth (ratio = 1 + growth).
HISTOGRAM_BUCKET_SIZE_GROWTH = 0.05
# model/aggregations_config.go: CPU histogram max 1000 cores, first bucket 0.01 cores.
CPU_HISTOGRAM_MAX_CORES = 1000.0
CPU_HISTOGRAM_FIRST_BUCKET_CORES = 0.01
# model/aggregations_config.go: memory histogram max 1e12 bytes, first bucket 1e7 bytes.
MEMORY_HISTOGRAM_MAX_BYTES = 1e12
MEMORY_HISTOGRAM_FIRST_BUCKET_BYTES = 1e7


def cpu_histogram_options() -> HistogramOptions:
    """Upstream ``CPUHistogramOptions`` (176 exponential buckets from 0.01 cores)."""
    return exponential_options(
        CPU_HISTOGRAM_MAX_CORES,
        CPU_HISTOGRAM_FIRST_BUCKET_CORES,
        1.0 + HISTOGRAM_BUCKET_SIZE_GROWTH,
        EPSILON,
    )


def memory_histogram_options() -> HistogramOptions:
    """Upstream ``MemoryHistogramOptions`` (176 exponential buckets from 1e7 bytes)."""
    return exponential_options(
        MEMORY_HISTOGRAM_MAX_BYTES,
        MEMORY_HISTOGRAM_FIRST_BUCKET_BYTES,
        1.0 + HISTOGRAM_BUCKET_SIZE_GROWTH,
        EPSILON,
    )
