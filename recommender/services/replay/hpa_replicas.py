"""The replicas a workload's Utilization HPA would have run over a what-if's history,
at the workload's requests now and at each replayed profile's targets.

Per stored HPA metric (``Workload.hpa_conflicts``) with a ``Utilization`` target: at
each minute of the history, the running replicas are the pods with a usage sample
then (the history stores no replica count), the usage is those pods' summed usage of
the metric's containers (all for a ``Resource`` metric, one for ``ContainerResource``)
and the request one pod's request of them; ``engine.hpa.desired_replicas`` gives the
count, clamped to the HPA's min/max replicas as discovery stored them (min 1, no max
for an HPA stored before they were). Definitions: docs/replay.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from recommender.engine.hpa import HPA_TOLERANCE, UTILIZATION, desired_replicas
from recommender.engine.replay import Timeline
from recommender.engine.resources import CPU
from recommender.models import Workload
from recommender.services.replay.replay import ReplayInput

REPLICAS_FROM = "pods with a usage sample at each minute (no replica series stored)"


def _summary(values: np.ndarray) -> dict[str, float | None]:
    """Mean and largest of the known values (None when none is known)."""
    known = values[np.isfinite(values)]
    if not known.size:
        return {"mean": None, "max": None}
    return {"mean": round(float(known.mean()), 2), "max": float(known.max())}


def hpa_replicas(
    workload: Workload, loaded: ReplayInput, timelines: Mapping[str, Timeline]
) -> list[dict[str, Any]]:
    """One row per Utilization metric of the workload's stored HPAs: the replicas
    seen, and those the HPA would have asked for at the requests now
    (``"request"``) and at each timeline's targets (keyed as ``timelines``)."""
    trace = loaded.trace
    prefix = f"{workload.namespace}/{workload.name}/"
    names = [cid.removeprefix(prefix) for cid in trace.container_ids]
    requests = {
        c.name: {
            "cpu": c.request_cpu_millicores,
            "memory": c.request_memory_bytes,
        }
        for c in workload.containers.all()
    }
    sample_container = trace.series_container[trace.series_index]
    pod_keys, sample_pod = np.unique(
        np.asarray(trace.series_keys, dtype=object)[trace.series_index].astype(str),
        return_inverse=True,
    )
    moments, sample_moment = np.unique(trace.timestamp_s, return_inverse=True)
    rows: list[dict[str, Any]] = []
    for hpa in workload.hpa_conflicts or ():
        for metric in hpa.get("metrics") or ():
            if metric.get("target_type") != UTILIZATION:
                continue
            resource, container = metric["resource"], metric.get("container") or ""
            measured = [c for c, name in enumerate(names) if container in ("", name)]
            pick = np.isin(sample_container, measured)
            values = trace.cpu_cores * 1000.0 if resource == CPU else trace.memory_bytes
            usage = np.zeros(moments.size)
            np.add.at(usage, sample_moment[pick], np.nan_to_num(values[pick], nan=0.0))
            pairs = np.unique(
                sample_moment[pick] * (pod_keys.size + 1) + sample_pod[pick]
            )
            replicas = np.bincount(
                pairs // (pod_keys.size + 1), minlength=moments.size
            ).astype(np.float64)
            now = [requests.get(names[c], {}).get(resource) for c in measured]
            known = [v for v in now if v]
            request_now = float(sum(known)) if len(known) == len(now) else np.nan
            at_requests: dict[str, np.ndarray] = {
                "request": np.full(moments.size, request_now)
            }
            for key, timeline in timelines.items():
                targets = timeline.values[resource, "target"][timeline.row_of(moments)]
                at_requests[key] = targets[:, measured].sum(axis=1)
            clamp = {
                "min_replicas": int(hpa.get("min_replicas") or 1),
                "max_replicas": hpa.get("max_replicas"),
            }
            rows.append(
                {
                    "hpa": hpa["name"],
                    "resource": resource,
                    "container": container,
                    "target_utilization": metric["average_utilization"],
                    **clamp,
                    "tolerance": HPA_TOLERANCE,
                    "minutes": int(moments.size),
                    "replicas_from": REPLICAS_FROM,
                    "seen": _summary(np.where(replicas > 0, replicas, np.nan)),
                    **{
                        key: _summary(
                            desired_replicas(
                                replicas=replicas,
                                usage=usage,
                                request=request,
                                target_utilization=metric["average_utilization"],
                                **clamp,
                            )
                        )
                        for key, request in at_requests.items()
                    },
                }
            )
    return rows
