"""Right-sizing as the change a repository needs: kustomize patches, Helm values."""
# ``rightsize_manifests`` answers with whole rendered manifests. Teams that keep their
# manifests in Git as a kustomize base or a Helm chart need the change in their own
# form:
#
# - ``kustomize_patch_set``: one strategic-merge patch per right-sized object (only the
#   containers and resources that change, containers matched by name as kustomize merges
#   them) and a ``kustomization.yaml`` fragment naming the patch files;
# - ``helm_values``: a values fragment with each changed container's ``resources`` at
#   the path the caller gives (the common ``resources:`` layouts: ``resources``,
#   ``<component>.resources``; ``{container}`` and ``{workload}`` stand for the names).
#
# Both are built from the report and the right-sized manifests of one
# ``RightsizeResult``, so they say exactly what the rendered manifests say.
# ``manifest_diff.py`` gives the third form, a unified diff against the posted text.

from __future__ import annotations

import re
from typing import Any

import yaml

from recommender.errors import InvalidInput
from recommender.services.advice.hpa import HPA_KIND
from recommender.services.advice.rightsize import (
    POD_SPEC_PATHS,
    STATUS_RIGHTSIZED,
    RightsizeResult,
)
from recommender.text import comment_text

KUSTOMIZATION_FILE = "kustomization.yaml"
PATCH_DIRECTORY = "patches"
# A values path: dot-separated keys of letters, digits, "_" and "-", or a placeholder.
_VALUES_KEY = r"(?:[A-Za-z0-9_-]+|\{container\}|\{workload\})"
VALUES_PATH_PATTERN = rf"^{_VALUES_KEY}(?:\.{_VALUES_KEY})*$"
MAX_VALUES_PATH = 253
_INDEX = re.compile(r"^(\w+)\[(\d+)\]$")


def manifest_at(manifests: list[Any], path: str) -> dict[str, Any]:
    """The manifest a report path names: ``documents[i]`` or
    ``documents[i].items[j]`` (Lists, nested as deep as they were sent)."""
    node: Any = {"documents": manifests}
    for part in path.split("."):
        match = _INDEX.match(part)
        if match is None:
            raise ValueError(f"path: not a report path: {path!r}")
        node = node[match.group(1)][int(match.group(2))]
    return node  # type: ignore[no-any-return]


def _pod_spec(manifest: dict[str, Any], kind: str) -> dict[str, Any]:
    node: Any = manifest
    for key in POD_SPEC_PATHS[kind]:
        node = node[key]
    return node  # type: ignore[no-any-return]


def _changed(entry: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in entry["containers"] if c["changes"]]


def _resources_changed(container: dict[str, Any]) -> dict[str, dict[str, str]]:
    """``{"requests": {"cpu": "587m"}, "limits": {...}}`` of a report's changes."""
    out: dict[str, dict[str, str]] = {}
    for change in container["changes"]:
        kind, resource = change["field"].split(".", 1)
        out.setdefault(kind, {})[resource] = change["after"]
    return out


def _nest(keys: tuple[str, ...], leaf: Any) -> dict[str, Any]:
    for key in reversed(keys):
        leaf = {key: leaf}
    return leaf  # type: ignore[no-any-return]


def _patch_file_name(entry: dict[str, Any], used: set[str]) -> str:
    base = "-".join(
        re.sub(r"[^a-z0-9.-]+", "-", str(part).lower())
        for part in (entry["kind"], entry["namespace"], entry["name"])
    )
    name = f"{PATCH_DIRECTORY}/{base}.yaml"
    counter = 2
    while name in used:  # the same object twice in one request
        name = f"{PATCH_DIRECTORY}/{base}-{counter}.yaml"
        counter += 1
    used.add(name)
    return name


def _metadata(manifest: dict[str, Any], name: str) -> dict[str, Any]:
    metadata = {"name": name}
    namespace = (manifest.get("metadata") or {}).get("namespace")
    if namespace:  # only as the base says it: kustomize matches on it
        metadata["namespace"] = namespace
    return metadata


def _hpa_patch(manifest: dict[str, Any]) -> dict[str, Any]:
    """The strategic-merge patch of an HPA kept in step: its whole ``spec.metrics``
    as rewritten. ``metrics`` has no merge key, so a strategic merge (kustomize's, or
    the API server's) replaces the list (k8s-wire hpa/18, 19): a patch naming only
    the changed metric would delete the others."""
    return {
        "apiVersion": manifest.get("apiVersion"),
        "kind": HPA_KIND,
        "metadata": _metadata(manifest, str(manifest["metadata"]["name"])),
        "spec": {"metrics": manifest["spec"]["metrics"]},
    }


def kustomize_patch_set(result: RightsizeResult) -> dict[str, Any]:
    """Strategic-merge patches of every right-sized object and the kustomization
    fragment naming them: ``{"files": {name: yaml text}, "patches": [...],
    "kustomization": yaml text}``."""
    files: dict[str, str] = {}
    used: set[str] = set()
    for entry in result.documents:
        if entry["status"] != STATUS_RIGHTSIZED:
            continue
        manifest = manifest_at(result.manifests, entry["path"])
        if entry["kind"] == HPA_KIND:
            patch = _hpa_patch(manifest)
            files[_patch_file_name(entry, used)] = yaml.safe_dump(
                patch, sort_keys=False
            )
            continue
        pod_spec = _pod_spec(manifest, entry["kind"])
        changed = {c["name"]: _resources_changed(c) for c in _changed(entry)}
        lists: dict[str, list[dict[str, Any]]] = {}
        for key in ("initContainers", "containers"):
            names = [item.get("name") for item in pod_spec.get(key) or []]
            if not changed.keys() & set(names):
                continue
            # Every item of a list that changes, in order, the others by name only:
            # a strategic merge puts the patch's items first, and init containers
            # run in the order they are listed.
            lists[key] = [
                {"name": name, "resources": changed[name]}
                if name in changed
                else {"name": name}
                for name in names
            ]
        patch = {
            "apiVersion": manifest.get("apiVersion"),
            "kind": entry["kind"],
            "metadata": _metadata(manifest, entry["name"]),
            **_nest(POD_SPEC_PATHS[entry["kind"]], lists),
        }
        files[_patch_file_name(entry, used)] = yaml.safe_dump(patch, sort_keys=False)
    patches = [{"path": name} for name in files]
    kustomization = yaml.safe_dump({"patches": patches}, sort_keys=False)
    return {"files": files, "patches": patches, "kustomization": kustomization}


def _values_keys(values_path: str, workload: str, container: str) -> list[str]:
    return [
        workload if key == "{workload}" else container if key == "{container}" else key
        for key in values_path.split(".")
    ]


# ``helm create``'s chart keeps an HPA's targets as two values under ``autoscaling``.
HELM_TARGET_KEYS = {
    "cpu": "targetCPUUtilizationPercentage",
    "memory": "targetMemoryUtilizationPercentage",
}


def _check_values_path(name: str, path: str, *, container: bool = True) -> None:
    if (
        len(path) > MAX_VALUES_PATH
        or not re.fullmatch(VALUES_PATH_PATTERN, path)
        or (not container and "{container}" in path)
    ):
        names = "{workload}" if not container else "{container} and {workload}"
        raise InvalidInput(
            f"{name}: {path!r} is not a values path: dot-separated keys such as "
            f"resources or server.resources, with {names} standing for the names",
            field=name,
        )


def hpa_values(manifest: dict[str, Any], changes: list[dict[str, Any]]) -> Any:
    """The values of an HPA kept in step, in ``helm create``'s layout where it can
    say them: ``{"targetCPUUtilizationPercentage": 140}`` when every changed metric
    is a pod ``Resource`` metric still on Utilization; otherwise (a
    ``ContainerResource`` metric, a target that became an AverageValue) the whole
    rewritten ``metrics`` list, for charts that take one (``autoscaling.metrics``)."""
    metrics = manifest["spec"]["metrics"]
    scaffold: dict[str, int] = {}
    for change in changes:
        index = int(change["field"].split("[")[1].split("]")[0])
        metric = metrics[index]
        after = change["after"]
        resource = (metric.get("resource") or {}).get("name")
        if (
            metric.get("type") != "Resource"
            or resource not in HELM_TARGET_KEYS
            or after.get("type") != "Utilization"
            or HELM_TARGET_KEYS[resource] in scaffold
        ):
            return {"metrics": metrics}
        scaffold[HELM_TARGET_KEYS[resource]] = after["averageUtilization"]
    return scaffold


def _place(
    values: dict[str, Any],
    placed: dict[tuple[str, ...], str],
    keys: tuple[str, ...],
    leaf: Any,
    *,
    who: str,
    option: str,
    hint: str,
) -> None:
    """Put ``leaf`` at ``keys``; two objects at one place with different values are
    an InvalidInput naming ``option``."""
    node = values
    for key in keys[:-1]:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    if keys in placed and node.get(keys[-1]) != leaf:
        raise InvalidInput(
            f"{option}: {placed[keys]} and {who} would both be written at "
            f"{'.'.join(keys)} with different values; put {hint} in the path",
            field=option,
        )
    placed[keys] = who
    node[keys[-1]] = leaf


def helm_values(
    result: RightsizeResult, *, values_path: str, hpa_values_path: str = "autoscaling"
) -> dict[str, Any]:
    """A values fragment: each changed container's right-sized ``resources`` (its
    requests and limits as the rendered manifest has them) at ``values_path``, and
    each HPA kept in step at ``hpa_values_path`` (``hpa_values``; ``{workload}``
    stands for the workload it scales).

    Two containers (or HPAs) that would land on the same path with different values
    are an InvalidInput naming the option (use ``{container}`` or ``{workload}``)."""
    _check_values_path("values_path", values_path)
    _check_values_path("hpa_values_path", hpa_values_path, container=False)
    values: dict[str, Any] = {}
    placed: dict[tuple[str, ...], str] = {}
    for entry in result.documents:
        if entry["status"] != STATUS_RIGHTSIZED:
            continue
        manifest = manifest_at(result.manifests, entry["path"])
        if entry["kind"] == HPA_KIND:
            target = (manifest["spec"].get("scaleTargetRef") or {}).get("name", "")
            keys = tuple(_values_keys(hpa_values_path, str(target), ""))
            _place(
                values,
                placed,
                keys,
                hpa_values(manifest, entry["hpa_changes"]),
                who=f"HorizontalPodAutoscaler/{entry['name']}",
                option="hpa_values_path",
                hint="{workload}",
            )
            continue
        pod_spec = _pod_spec(manifest, entry["kind"])
        items = {
            item.get("name"): item
            for key in ("containers", "initContainers")
            for item in pod_spec.get(key) or []
        }
        for container in _changed(entry):
            resources = items[container["name"]].get("resources") or {}
            keys = tuple(
                _values_keys(values_path, str(entry["name"]), container["name"])
            )
            _place(
                values,
                placed,
                keys,
                {
                    k: dict(resources[k])
                    for k in ("requests", "limits")
                    if isinstance(resources.get(k), dict)
                },
                who=f"{entry['kind']}/{entry['name']} container {container['name']}",
                option="values_path",
                hint="{container} or {workload}",
            )
    return values


OUTPUTS = ("manifests", "kustomize", "helm", "diff")


def rightsize_answer(
    result: RightsizeResult,
    *,
    output: str,
    text: str,
    is_json: bool,
    values_path: str = "resources",
    hpa_values_path: str = "autoscaling",
    diff_path: str = "manifests.yaml",
) -> dict[str, Any]:
    """The answer of a rightsize in the form ``output`` asks for (the manifests and
    the report always; the patch set, values or diff beside them)."""
    from recommender.services.advice.manifest_diff import manifest_diff

    answer: dict[str, Any] = {
        "output": output,
        "manifests": result.manifests,
        "documents": result.documents,
        "summary": result.summary(),
    }
    if output == "kustomize":
        answer["patches"] = kustomize_patch_set(result)
    elif output == "helm":
        values = helm_values(
            result, values_path=values_path, hpa_values_path=hpa_values_path
        )
        answer["values"] = values
        answer["values_yaml"] = yaml.safe_dump(values, sort_keys=False)
    elif output == "diff":
        answer["diff"] = manifest_diff(
            text, result, is_json=is_json, file_name=diff_path
        )
    return answer


def _target_text(target: dict[str, Any]) -> str:
    """An HPA MetricTarget in a few words: "averageUtilization 140"."""
    for key in ("averageUtilization", "averageValue", "value"):
        if key in target:
            return f"{key} {target[key]}"
    return str(target.get("type", ""))


def answer_text(answer: dict[str, Any]) -> str:
    """The answer as a file for a pipeline: the manifests (one comment line per
    change first), the values YAML, the diff, or the patch files as YAML documents
    (each after a comment naming its file) then the kustomization fragment."""
    output = answer.get("output", "manifests")
    if output == "helm":
        return str(answer["values_yaml"])
    if output == "diff":
        return str(answer["diff"])
    if output == "kustomize":
        patch_set = answer["patches"]
        parts = [
            f"# {comment_text(name)}\n{text}"
            for name, text in patch_set["files"].items()
        ]
        parts.append(f"# kustomization.yaml\n{patch_set['kustomization']}")
        return "---\n".join(parts)
    # The header only when something changed: unchanged manifests pass through
    # without a claim that vpaweb right-sized them, with why they were left alone.
    lines: list[str] = []
    left: list[str] = []
    for document in answer.get("documents", []):
        for container in document["containers"]:
            for change in container["changes"]:
                lines.append(
                    comment_text(
                        f"# {document['kind']}/{document['name']} "
                        f"{container['name']} {change['field']}: "
                        f"{change['before']} -> {change['after']}"
                    )
                )
        # An HPA kept in step with its workload: what changed, and why.
        for change in document.get("hpa_changes") or ():
            lines.append(
                comment_text(
                    f"# {document['kind']}/{document['name']} {change['field']}: "
                    f"{_target_text(change['before'])} -> "
                    f"{_target_text(change['after'])} ({change['reason']})"
                )
            )
        for warning in document.get("warnings") or ():
            lines.append(comment_text(f"# WARNING: {warning}"))
        for note in document.get("notes") or ():
            left.append(
                comment_text(f"# {document['kind']}/{document['name']}: {note}")
            )
    body = yaml.safe_dump_all(answer["manifests"], sort_keys=False, allow_unicode=True)
    if lines:
        lines.insert(0, "# Right-sized by vpaweb.")
    if left:
        lines += ["# Left as they are by vpaweb:", *left]
    return "".join(line + "\n" for line in lines) + body
