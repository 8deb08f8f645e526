"""Advice inputs from usage files instead of the database, for the offline commands.

``manage.py rightsize`` and ``manage.py check-manifests`` size manifests from the
recommendations ``services.offline.recommend_from_csv`` computes from usage CSV files,
with no cluster and nothing stored: each (namespace, workload name) of the files stands
for the workload of that name in a manifest (whatever its kind), and its containers'
recommendations are the "latest" ones ``advise`` reads. Nothing else applies (no
policy, LimitRange or static coefficient is known offline).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from recommender.engine import Profile
from recommender.errors import InvalidInput
from recommender.models import Cluster, Recommendation, Workload
from recommender.models.recommendation import confidence_of
from recommender.services.advice.advise import AdviceInputs, PodKey
from recommender.services.advice.rightsize import (
    RightsizeOptions,
    RightsizeResult,
    rightsize_manifests,
)
from recommender.services.replay.offline import (
    OfflineRecommendation,
    recommend_from_csv,
)

# The cluster name offline workloads carry in reports.
OFFLINE_CLUSTER = "usage-files"


def _recommendation(result: OfflineRecommendation, now: datetime) -> Recommendation:
    rec = result.recommendation
    # An unsaved row: advise reads its amounts and its confidence (the history
    # gate), nothing writes it.
    return Recommendation(
        created_at=now,
        confidence=confidence_of(rec.explanation_dict()),
        target_cpu_millicores=rec.target.cpu_millicores,
        target_memory_bytes=rec.target.memory_bytes,
        lower_cpu_millicores=rec.lower_bound.cpu_millicores,
        lower_memory_bytes=rec.lower_bound.memory_bytes,
        upper_cpu_millicores=rec.upper_bound.cpu_millicores,
        upper_memory_bytes=rec.upper_bound.memory_bytes,
        uncapped_cpu_millicores=rec.uncapped_target.cpu_millicores,
        uncapped_memory_bytes=rec.uncapped_target.memory_bytes,
    )


def offline_inputs(
    results: list[OfflineRecommendation], *, now: datetime
) -> Callable[[list[PodKey]], dict[PodKey, AdviceInputs]]:
    """``rightsize_manifests``'s ``inputs_for`` over offline recommendations."""
    by_workload: dict[tuple[str, str], dict[str, Recommendation]] = {}
    for result in results:
        by_workload.setdefault((result.namespace, result.workload), {})[
            result.container
        ] = _recommendation(result, now)
    cluster = Cluster(name=OFFLINE_CLUSTER)

    def inputs_for(keys: list[PodKey]) -> dict[PodKey, AdviceInputs]:
        inputs = {}
        for key in keys:
            namespace, kind, name = key
            latest = by_workload.get((namespace, name or ""))
            if latest is None or not kind or not name:
                inputs[key] = AdviceInputs(namespace=namespace)
                continue
            workload = Workload(
                cluster=cluster, namespace=namespace, kind=kind, name=name
            )
            inputs[key] = AdviceInputs(
                namespace=namespace, workload=workload, latest=latest
            )
        return inputs

    return inputs_for


def read_manifests(text: str, *, field: str) -> list[Any]:
    """The manifests of a YAML (or JSON) file, a top-level list counting as its
    items, as ``api.bodies.load_manifests`` reads a body; InvalidInput naming the
    file and line of a YAML error."""
    try:
        loaded = list(
            yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        )
    except yaml.YAMLError as exc:
        raise InvalidInput(f"{field}: not YAML: {exc}", field=field) from None
    documents: list[Any] = []
    for item in loaded:
        if item is None:
            continue
        documents.extend(item if isinstance(item, list) else [item])
    if not documents:
        raise InvalidInput(f"{field}: holds no manifests", field=field)
    return documents


def rightsize_files(
    *,
    manifests_path: Path,
    usage_path: Path,
    oom_path: Path | None,
    profile: Profile,
    options: RightsizeOptions,
    now: datetime,
) -> tuple[str, RightsizeResult]:
    """The manifests file's text and its right-sizing from the usage files."""
    try:
        text = manifests_path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(
            f"{manifests_path}: cannot be read ({exc})", field="manifests"
        ) from None
    documents = read_manifests(text, field=str(manifests_path))
    results = recommend_from_csv(
        usage_path=usage_path, oom_path=oom_path, profile=profile
    )
    result = rightsize_manifests(
        documents=documents,
        options=options,
        inputs_for=offline_inputs(results, now=now),
    )
    return text, result
