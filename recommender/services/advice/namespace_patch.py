"""A pull request's worth of change: the patch set of every workload of a namespace
whose requests are outside the drift check's tolerance, with a Markdown summary."""
# Each active workload of the namespace (narrowed by a label selector) is written as the
# smallest manifest a kustomize patch needs (kind, name, namespace and each container's
# current requests and limits, as discovery last stored them), right-sized through the
# one advice path (``rightsize_manifests``), checked (``drift.check_drift``), and the
# containers outside tolerance become strategic-merge patches (``kustomize_patch_set``).
# The summary says what changes, why (the recommendation and the drift), what it saves
# and what could go wrong (recent OOM kills, lowered memory), ready for a pull request.
# Nothing is stored and nothing is written to a cluster.

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from recommender.errors import InvalidInput, NotFound
from recommender.models import Cluster, Container, Workload
from recommender.services.advice import drift
from recommender.services.advice.patches import kustomize_patch_set
from recommender.services.advice.pod_spec import resource_list
from recommender.services.advice.rightsize import (
    POD_SPEC_PATHS,
    STATUS_RIGHTSIZED,
    STATUS_UNCHANGED,
    RightsizeOptions,
    RightsizeResult,
    rightsize_manifests,
)
from recommender.services.readmodels.provisioning import Prices, risk_rules
from recommender.text import money_text

API_VERSIONS = {
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "ReplicaSet": "apps/v1",
    "Job": "batch/v1",
    "CronJob": "batch/v1",
    "ReplicationController": "v1",
}
# ``key=value`` or ``key`` (the label is there), comma-separated, all must hold.
_SELECTOR_TERM = r"[A-Za-z0-9][-A-Za-z0-9_./]{0,252}(=[-A-Za-z0-9_.]{0,63})?"
SELECTOR_PATTERN = rf"^{_SELECTOR_TERM}(,{_SELECTOR_TERM})*$"


def parse_selector(selector: str) -> dict[str, str | None]:
    """``app=web,team`` as ``{"app": "web", "team": None}``; InvalidInput naming
    ``selector`` otherwise."""
    if len(selector) > 1000 or re.fullmatch(SELECTOR_PATTERN, selector) is None:
        raise InvalidInput(
            f"selector: {selector[:100]!r} is not a label selector: give key=value "
            "or key terms, comma-separated (all must hold)",
            field="selector",
        )
    terms: dict[str, str | None] = {}
    for term in selector.split(","):
        key, _, value = term.partition("=")
        terms[key] = value if "=" in term else None
    return terms


def _matches(labels: dict[str, Any], terms: dict[str, str | None]) -> bool:
    return all(
        key in labels and (value is None or labels[key] == value)
        for key, value in terms.items()
    )


def _container_item(container: Container) -> dict[str, Any]:
    item: dict[str, Any] = {"name": container.name}
    resources = {
        key: amounts
        for key, amounts in (
            ("requests", resource_list(container.requests)),
            ("limits", resource_list(container.limits)),
        )
        if amounts
    }
    if resources:
        item["resources"] = resources
    if container.kind == Container.Kind.SIDECAR:
        item["restartPolicy"] = "Always"
    return item


def workload_manifest(
    workload: Workload, containers: list[Container]
) -> dict[str, Any]:
    """The smallest manifest of a workload that ``rightsize`` sizes and a patch
    needs: kind, name, namespace, containers with their current resources."""
    spec: dict[str, Any] = {
        "containers": [
            _container_item(c) for c in containers if c.kind == Container.Kind.REGULAR
        ]
    }
    init = [_container_item(c) for c in containers if c.kind != Container.Kind.REGULAR]
    if init:
        spec["initContainers"] = init
    for key in reversed(POD_SPEC_PATHS[workload.kind]):
        spec = {key: spec}
    return {
        "apiVersion": API_VERSIONS[workload.kind],
        "kind": workload.kind,
        "metadata": {"name": workload.name, "namespace": workload.namespace},
        **spec,
    }


def namespace_patch(
    *,
    cluster: str,
    namespace: str,
    selector: str | None,
    tolerance: drift.Tolerance,
    dashboard_url: str,
    now: datetime,
    include_short_history: bool = False,
) -> dict[str, Any]:
    """The patch set and summary of every workload outside tolerance."""
    found = Cluster.objects.filter(name=cluster).first()
    if found is None:
        raise NotFound(f"cluster {cluster!r} does not exist")
    terms = parse_selector(selector) if selector else {}
    workloads = [
        w
        for w in Workload.objects.filter(
            cluster=found, namespace=namespace, is_active=True
        )
        .with_provisioning(prices=Prices.from_settings(), rules=risk_rules(now))
        .prefetch_related("containers")
        .order_by("kind", "name")
        if _matches(w.labels or {}, terms)
    ]
    manifests = [
        workload_manifest(w, sorted(w.containers.all(), key=lambda c: c.position))
        for w in workloads
    ]
    result = rightsize_manifests(
        documents=manifests,
        options=RightsizeOptions(
            cluster=cluster,
            namespace=namespace,
            include_short_history=include_short_history,
        ),
    )
    check = drift.check_drift(result, tolerance=tolerance)
    drifted = {
        (c["path"], c["container"])
        for c in check["containers"]
        if c["verdict"] == drift.VERDICT_DRIFT
    }
    # Only the containers outside tolerance are patched.
    documents = []
    for entry in result.documents:
        containers = [
            c if (entry["path"], c["name"]) in drifted else {**c, "changes": []}
            for c in entry["containers"]
        ]
        changed = any(c["changes"] for c in containers)
        documents.append(
            {
                **entry,
                "containers": containers,
                "status": STATUS_RIGHTSIZED if changed else STATUS_UNCHANGED,
            }
        )
    outside = RightsizeResult(manifests=result.manifests, documents=documents)
    rows = []
    for workload, entry in zip(workloads, documents, strict=True):
        if entry["status"] != STATUS_RIGHTSIZED:
            continue
        rows.append(
            {
                "workload": {
                    "id": workload.pk,
                    "cluster": cluster,
                    "namespace": workload.namespace,
                    "kind": workload.kind,
                    "name": workload.name,
                },
                "url": f"{dashboard_url}/workloads/{workload.pk}/",
                "savings_monthly": round(workload.savings, 2),  # type: ignore[attr-defined]
                "recent_ooms": workload.recent_ooms,  # type: ignore[attr-defined]
                "containers": [
                    c
                    for c in check["containers"]
                    if c["path"] == entry["path"]
                    and c["verdict"] == drift.VERDICT_DRIFT
                ],
            }
        )
    return {
        "cluster": cluster,
        "namespace": namespace,
        "selector": selector or "",
        "tolerance": tolerance.as_dict(),
        "checked": check["summary"],
        "workloads": rows,
        "savings_monthly": round(sum(r["savings_monthly"] for r in rows), 2),
        "patches": kustomize_patch_set(outside),
        "summary_markdown": summary_markdown(
            cluster=cluster,
            namespace=namespace,
            selector=selector,
            rows=rows,
            checked=check["summary"],
            tolerance=tolerance,
        ),
    }


def _risks(row: dict[str, Any]) -> list[str]:
    risks = []
    if row["recent_ooms"]:
        risks.append(
            f"{row['recent_ooms']} OOM kill(s) in the last 7 days: watch memory after "
            "the change"
        )
    for container in row["containers"]:
        for resource in container["resources"]:
            lowered = (
                resource["posted"] is not None
                and (resource.get("difference_percent") or 0) > 0
            )
            if resource["resource"] == "memory" and lowered:
                risks.append(
                    f"{container['container']}: memory request lowered to "
                    f"{resource['recommended']}; a usage spike above it may be "
                    "OOM-killed where the limit follows"
                )
    return risks or ["none seen: usage stayed within the recommendation's bounds"]


def summary_markdown(
    *,
    cluster: str,
    namespace: str,
    selector: str | None,
    rows: list[dict[str, Any]],
    checked: dict[str, int],
    tolerance: drift.Tolerance,
) -> str:
    """What, why, savings and risk, for a pull request's description."""
    where = f"`{namespace}` in cluster `{cluster}`"
    if selector:
        where += f" (workloads matching `{selector}`)"
    limits = tolerance.as_dict()
    lines = [
        f"## Right-size {len(rows)} workload(s) of {where}",
        "",
        f"vpaweb checked {checked['containers']} containers: {checked['drift']} are "
        f"outside the tolerance ({limits['cpu_percent']:g} % or {limits['cpu_floor']} "
        f"CPU, {limits['memory_percent']:g} % or {limits['memory_floor']} memory), "
        f"{checked['ok']} within it, {checked['unchecked']} without a recommendation.",
    ]
    if not rows:
        lines += ["", "Nothing to change."]
        return "\n".join(lines) + "\n"
    total = sum(r["savings_monthly"] for r in rows)
    lines += [
        "",
        f"**Estimated savings:** {money_text(total)} per month (each workload at "
        "its nodes' prices, all replicas; negative: the change costs more, to remove "
        "a risk).",
        "",
        "| workload | container | resource | now | recommended | change |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        name = f"[{row['workload']['kind']}/{row['workload']['name']}]({row['url']})"
        for container in row["containers"]:
            for resource in container["resources"]:
                change = resource.get("change_percent")
                lines.append(
                    f"| {name} | {container['container']} | {resource['resource']} | "
                    f"{resource['posted'] or 'none'} | {resource['recommended']} | "
                    f"{'' if change is None else f'{change:+.1f} %'} |"
                )
    lines += ["", "### Why", ""]
    for row in rows:
        for container in row["containers"]:
            lines.append(
                f"- {row['workload']['kind']}/{row['workload']['name']} "
                f"{container['container']}: {container['reason']}; "
                + "; ".join(
                    r["message"]
                    for r in container["resources"]
                    if r["verdict"] == "drift"
                )
            )
    lines += ["", "### Savings and risk", ""]
    for row in rows:
        lines.append(
            f"- {row['workload']['kind']}/{row['workload']['name']}: "
            f"{money_text(row['savings_monthly'])} per month; risk: "
            + "; ".join(_risks(row))
        )
    lines += [
        "",
        "Apply: add the files under `patches/` beside the kustomize base and list them "
        "under `patches:` in its `kustomization.yaml`.",
    ]
    return "\n".join(lines) + "\n"
