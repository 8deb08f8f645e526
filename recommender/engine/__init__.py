"""vpaweb's pure numeric engine: upstream VPA's model (API: docs/engine-api.md).

Imports only numpy and the standard library; no I/O, no clock (times are Unix seconds).
"""

from .aggregation import AggregateSet
from .batch import IngestStats, OomBatch, SampleBatch
from .capping import (
    Cap,
    CappedRecommendation,
    ContainerPolicy,
    apply_vpa_policy,
    cap_for_pod,
    select_container_policy,
)
from .estimator import ContainerRecommendation, recommend
from .explanation import BoundExplanation, Explanation, ResourceExplanation
from .feed import cores_from_millicores, feed, quantised_cpu_cores
from .histogram_view import HistogramView
from .limits import proportional_limit
from .profiles import DEFAULT_PROFILE, PROFILES, Profile, get_profile
from .quantity import (
    format_cpu,
    format_memory,
    humanize_cpu,
    humanize_memory,
    parse_cpu_millicores,
    parse_memory_bytes,
)
from .resources import Resources

__all__ = [
    "DEFAULT_PROFILE",
    "PROFILES",
    "AggregateSet",
    "BoundExplanation",
    "Cap",
    "CappedRecommendation",
    "ContainerPolicy",
    "ContainerRecommendation",
    "Explanation",
    "HistogramView",
    "IngestStats",
    "OomBatch",
    "Profile",
    "ResourceExplanation",
    "Resources",
    "SampleBatch",
    "apply_vpa_policy",
    "cap_for_pod",
    "cores_from_millicores",
    "feed",
    "format_cpu",
    "format_memory",
    "get_profile",
    "humanize_cpu",
    "humanize_memory",
    "parse_cpu_millicores",
    "parse_memory_bytes",
    "proportional_limit",
    "quantised_cpu_cores",
    "recommend",
    "select_container_policy",
]
