"""Coordinated HPA mode: the updater resizes a resource an HPA scales on in place,
together with the HPA target change that keeps the HPA scaling at the same usage per
pod, as one change (``ResizeChange.hpa_changes``).

``plan_hpa_changes`` gives a pod's change its HPA part (or says why the HPA's resources
wait); ``hpa_operations`` is the JSON patch that tests each old value before replacing
it (k8s-wire hpa/16); ``live_target`` and ``same_target`` read an HPA back. Applying is
``cycle.Applier.coordinated``; docs/updater.md "Coordinated HPA mode" is the manual."""
# A workload whose policy says ``hpa_coordination: coordinated`` (and whose mode
# resizes in place) is planned without the HPA's resources held back. The target change
# is computed by the one HPA rule (``services.advice.hpa.adjustments``) from the
# requests the HPA now assumes:
#
# - no coordinated change is rolling out: the pod's requests, when every live pod of
#   the workload carries the same (else the HPA's resources are held back, as in
#   upstream's rule, until they agree);
# - one is (its HPA patch took, and the HPA still carries it): its pods' new requests.
#   A pod still on the old ones whose resize brings it there gets entries with
#   ``before == after`` (the HPA is already where it goes); a pod going elsewhere waits.
#
# A change whose HPA would end up with a trigger above the new limits (the HPA could
# never scale out: ``trigger_warnings``), or whose target cannot be computed, holds the
# HPA's resources back instead.
#
# Applying: the HPA is patched first, then the pod is resized in place. A failed test
# is a bare 422 (hpa/15, 17) and a conflict a 409 (hpa/21): the HPA changed since it
# was read, so nothing is resized and the change is decided again on the next cycle's
# fresh read. A refused resize sets the HPA back. A coordinated change never falls back
# to eviction: the replacement would get its requests from the admission webhook, which
# leaves an HPA's resources as submitted. Verification reads the HPA back.

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recommender.cluster.base import PodInfo
from recommender.engine.hpa import AVERAGE_VALUE, UTILIZATION
from recommender.engine.quantity import (
    format_cpu,
    format_memory,
    parse_cpu_millicores,
    parse_memory_bytes,
)
from recommender.engine.resources import CPU, RESOURCE_NAMES, Resources
from recommender.models import Policy, ResizeChange, Workload
from recommender.services.advice.hpa import adjustments, trigger_warnings

S = ResizeChange.Status
# Where each metric type keeps its target (autoscaling/v2 MetricSpec).
SOURCE_KEYS = {"Resource": "resource", "ContainerResource": "containerResource"}


def is_coordinated(workload: Workload) -> bool:
    """Whether the updater resizes the HPA's resources of ``workload`` together with
    its HPA (its policy says so and resizes in place)."""
    policy = workload.policy
    return bool(
        workload.hpa_conflicts
        and policy.hpa_coordination == Policy.HpaCoordination.COORDINATED
        and policy.mode == Policy.Mode.IN_PLACE_OR_RECREATE
    )


def live_hpas(
    snapshot_hpas: Iterable[Mapping[str, Any]], namespace: str, names: Iterable[str]
) -> dict[str, Mapping[str, Any]]:
    """The named HPAs of ``namespace`` as this cycle's discovery read them
    (``hpa_of`` summaries), by name."""
    wanted = set(names)
    return {
        str(h["name"]): h
        for h in snapshot_hpas
        if h["namespace"] == namespace and h["name"] in wanted
    }


def target_json(metric: Mapping[str, Any]) -> dict[str, Any] | None:
    """A summary metric's target as autoscaling/v2 writes it, None if unusable."""
    if metric.get("target_type") == UTILIZATION and metric.get("average_utilization"):
        return {
            "type": UTILIZATION,
            "averageUtilization": metric["average_utilization"],
        }
    return None


def same_target(resource: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two MetricTargets ask for the same (quantities compared as amounts:
    the API server may print one another way)."""
    if a.get("type") != b.get("type"):
        return False
    if a.get("type") == UTILIZATION:
        return bool(a.get("averageUtilization") == b.get("averageUtilization"))
    parse = parse_cpu_millicores if resource == CPU else parse_memory_bytes
    try:
        return bool(
            parse(str(a.get("averageValue"))) == parse(str(b.get("averageValue")))
        )
    except ValueError:
        return False


def summary_target(metric: Mapping[str, Any]) -> dict[str, Any]:
    """Any summary metric's target, as autoscaling/v2 writes it."""
    if metric.get("target_type") == AVERAGE_VALUE and metric.get("average_value"):
        resource = metric.get("resource")
        amount = int(metric["average_value"])
        return {
            "type": AVERAGE_VALUE,
            "averageValue": format_cpu(amount)
            if resource == CPU
            else format_memory(amount),
        }
    return {
        "type": metric.get("target_type"),
        "averageUtilization": metric.get("average_utilization"),
    }


def _requests(resources: Mapping[str, Any]) -> dict[str, Resources]:
    """``{"container": {"requests": {...}}}`` (ResizeChange's shape) as Resources."""
    return {
        name: Resources(
            (values.get("requests") or {}).get("cpu"),
            (values.get("requests") or {}).get("memory"),
        )
        for name, values in resources.items()
    }


def _limits(resources: Mapping[str, Any]) -> dict[str, Resources]:
    return {
        name: Resources(
            (values.get("limits") or {}).get("cpu"),
            (values.get("limits") or {}).get("memory"),
        )
        for name, values in resources.items()
    }


def _measured(requests: Mapping[str, Resources]) -> dict[str, dict[str, int]]:
    return {name: r.to_dict() for name, r in requests.items()}


@dataclass(frozen=True)
class Rollout:
    """The latest coordinated change of a workload whose HPA patch took: the requests
    it gave its pod, and the targets it gave the HPA."""

    change_id: int
    requests: dict[str, dict[str, int]]
    hpa_changes: list[dict[str, Any]]


def rollout_of(
    rows: Sequence[Mapping[str, Any]], hpas: Mapping[str, Mapping[str, Any]]
) -> Rollout | None:
    """The rollout the HPA still carries, from a workload's patched changes (newest
    first: ``id``, ``resources_after``, ``hpa_changes``), or None."""
    for row in rows:
        entries = row["hpa_changes"] or []
        if entries and all(_carries(hpas, e) for e in entries):
            return Rollout(
                change_id=row["id"],
                requests=_measured(_requests(row["resources_after"])),
                hpa_changes=list(entries),
            )
    return None


def _metric(
    hpas: Mapping[str, Mapping[str, Any]], entry: Mapping[str, Any]
) -> Mapping[str, Any] | None:
    hpa = hpas.get(entry["hpa"])
    if hpa is None:
        return None
    for metric in hpa.get("resource_metrics") or ():
        if metric["index"] == entry["index"]:
            return metric  # type: ignore[no-any-return]
    return None


def live_target(
    hpas: Mapping[str, Mapping[str, Any]], entry: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The target the HPA carries now at an entry's metric, or None when the HPA or
    the metric is gone (or is no longer that resource's)."""
    metric = _metric(hpas, entry)
    if (
        metric is None
        or metric.get("resource") != entry["resource"]
        or (metric.get("container") or "") != entry["container"]
    ):
        return None
    return summary_target(metric)


def _carries(hpas: Mapping[str, Mapping[str, Any]], entry: Mapping[str, Any]) -> bool:
    live = live_target(hpas, entry)
    return live is not None and same_target(entry["resource"], live, entry["after"])


def plan_hpa_changes(
    *,
    workload: Workload,
    pods: Sequence[PodInfo],
    pod: PodInfo,
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    hpas: Mapping[str, Mapping[str, Any]],
    rollout: Rollout | None,
) -> tuple[list[dict[str, Any]] | None, str]:
    """The HPA target changes that go with resizing ``pod`` from ``before`` to
    ``after`` (ResizeChange's shapes), or None and why the HPA's resources wait."""
    names = [h["name"] for h in workload.hpa_conflicts or ()]
    if any(name not in hpas for name in names):
        return None, "an HPA of the workload was not found by this cycle's discovery"
    current = {c.name: c.requests for c in pod.containers if c.kind != "init"}
    new = dict(current)
    new.update({name: r for name, r in _requests(after).items() if not r.is_empty()})
    assumed: dict[str, Resources] | None = None
    if rollout is not None:
        wanted = {
            name: Resources(v.get("cpu"), v.get("memory"))
            for name, v in rollout.requests.items()
        }
        if all(current.get(n) == r for n, r in wanted.items()):
            assumed = current  # the HPA and this pod are in step
        elif all(new.get(n) == r for n, r in wanted.items()):
            # This pod catches up with the rollout: the HPA is already there.
            entries = [
                {**entry, "before": entry["after"]} for entry in rollout.hpa_changes
            ]
            return entries, ""
        else:
            return None, (
                f"the HPA change of change {rollout.change_id} is rolling out: this "
                "pod's HPA resources wait until its pods carry the same requests"
            )
    else:
        shapes = {
            tuple((c.name, c.requests) for c in other.containers if c.kind != "init")
            for other in pods
        }
        if len(shapes) > 1:
            return None, (
                "the workload's pods carry different requests, so what the HPA's "
                "target assumes is unclear: its resources wait until they agree"
            )
        assumed = current
    summaries = [
        {
            "name": name,
            "resource_metrics": [
                m
                for m in hpas[name].get("resource_metrics") or ()
                if m.get("resource") in RESOURCE_NAMES
            ],
        }
        for name in names
    ]
    changes = adjustments(summaries, before=assumed, after=new)
    if any(c["after"] is None for c in changes):
        return None, next(c["reason"] for c in changes if c["after"] is None)
    changes = [c for c in changes if c["changed"]]
    indexed = {
        (s["name"], m["resource"], m.get("container") or ""): m["index"]
        for s in summaries
        for m in s["resource_metrics"]
    }
    entries = []
    for change in changes:
        index = indexed[(change["hpa"], change["resource"], change["container"])]
        metric = _metric(hpas, {"hpa": change["hpa"], "index": index}) or {}
        source = "resource" if not metric.get("container") else "containerResource"
        entries.append(
            {
                "hpa": change["hpa"],
                "index": index,
                "path": f"/spec/metrics/{index}/{source}/target",
                "resource": change["resource"],
                "container": change["container"],
                "before": change["before"],
                "after": change["after"],
                "reason": change["reason"],
            }
        )
    # The HPA as it would be against the new limits: a trigger out of reach would
    # stop it scaling at all.
    limits = {c.name: c.limits for c in pod.containers if c.kind != "init"}
    limits.update({name: r for name, r in _limits(after).items() if not r.is_empty()})
    for summary in summaries:
        moved = [
            {
                **m,
                "target_type": e["after"]["type"],
                "average_utilization": e["after"].get("averageUtilization"),
                "average_value": _amount(m["resource"], e["after"]),
            }
            if (e := _entry_of(entries, summary["name"], m["index"])) is not None
            else m
            for m in summary["resource_metrics"]
        ]
        warnings = trigger_warnings(
            {"name": summary["name"], "resource_metrics": moved},
            requests=new,
            limits=limits,
        )
        if warnings:
            return None, warnings[0]
    return entries, ""


def _entry_of(
    entries: list[dict[str, Any]], hpa: str, index: int
) -> dict[str, Any] | None:
    return next((e for e in entries if e["hpa"] == hpa and e["index"] == index), None)


def _amount(resource: str, target: Mapping[str, Any]) -> int | None:
    value = target.get("averageValue")
    if value is None:
        return None
    parse = parse_cpu_millicores if resource == CPU else parse_memory_bytes
    return int(parse(str(value)))


def hpa_operations(
    entries: Sequence[Mapping[str, Any]], *, revert: bool = False
) -> list[dict[str, Any]]:
    """The JSON patch of one HPA: per entry, ``test`` the value it has, then
    ``replace`` it (k8s-wire hpa/16), or the other way round to set it back.

    A target keeping its type changes one value (``.../target/averageUtilization``);
    one changing type (Utilization to AverageValue) is tested by its type and value
    and replaced whole."""
    operations: list[dict[str, Any]] = []
    for entry in entries:
        old, new = (
            (entry["after"], entry["before"])
            if revert
            else (entry["before"], entry["after"])
        )
        path = entry["path"]
        if old["type"] == new["type"] == UTILIZATION:
            operations += [
                {
                    "op": "test",
                    "path": f"{path}/averageUtilization",
                    "value": old["averageUtilization"],
                },
                {
                    "op": "replace",
                    "path": f"{path}/averageUtilization",
                    "value": new["averageUtilization"],
                },
            ]
            continue
        key = "averageUtilization" if old["type"] == UTILIZATION else "averageValue"
        operations += [
            {"op": "test", "path": f"{path}/type", "value": old["type"]},
            {"op": "test", "path": f"{path}/{key}", "value": old[key]},
            {"op": "replace", "path": path, "value": dict(new)},
        ]
    return operations


def by_hpa(entries: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Entries grouped by HPA name, in order."""
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for entry in entries:
        grouped.setdefault(entry["hpa"], []).append(entry)
    return grouped


def describe(entries: Iterable[Mapping[str, Any]]) -> str:
    """The HPA part of a change, in words: "HPA web cpu 70 % -> 140 %"."""
    parts = []
    for entry in entries:
        before, after = target_text(entry["before"]), target_text(entry["after"])
        what = f"HPA {entry['hpa']} {entry['resource']}"
        if entry["container"]:
            what += f" of {entry['container']}"
        parts.append(
            f"{what} {before} -> {after}"
            if before != after
            else f"{what} already {after}"
        )
    return "; ".join(parts)


def target_text(target: Mapping[str, Any]) -> str:
    """A MetricTarget in a few words: "70 %", "350m"."""
    if target.get("type") == UTILIZATION:
        return f"{target.get('averageUtilization')} %"
    return str(target.get("averageValue"))


def summary_fields(resource: str, target: Mapping[str, Any]) -> dict[str, Any]:
    """A MetricTarget as ``hpa_of`` summarises it (``target_type``, …)."""
    return {
        "target_type": target.get("type"),
        "average_utilization": target.get("averageUtilization"),
        "average_value": _amount(resource, target),
    }
