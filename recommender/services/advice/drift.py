"""The drift check for pipelines: are the posted requests within a tolerance of what
vpaweb recommends?"""
# The recommended request of a container is what ``rightsize`` would write (the same
# advice, capping and readable rounding), so a manifest right-sized by vpaweb passes at
# once. Per resource, a request is within tolerance when it differs from the recommended
# one by at most ``percent`` of the recommended amount or by ``floor`` (millicores or
# bytes), whichever is larger; a missing request is drift when a request is recommended.
# Containers without a recommendation (unknown workloads, plain init containers, a
# container policy in mode Off) are ``unchecked``, never drift: the check gates on what
# vpaweb knows.
#
# A check that checked nothing (every container unchecked: an unknown workload, a
# typo in the cluster or namespace, recommendations behind the history gate) is not a
# pass: its verdict is ``nothing_checked`` and its exit code 2, with the reasons.
#
# The verdict is machine-readable (``verdict``, ``exit_code``: 0 ok, 1 drift, 2 nothing
# checked; an error is 2 for the command and an HTTP error for the API) and renders as
# JUnit XML, one test case per container, so CI systems show it as test results.

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from xml.etree import ElementTree as ET

from django.conf import settings

from recommender.engine.quantity import (
    format_cpu,
    format_memory,
    format_memory_readable,
)
from recommender.engine.resources import CPU
from recommender.services.advice.advise import SOURCE_NONE
from recommender.services.advice.pod_spec import parse_quantity
from recommender.services.advice.rightsize import RightsizeResult

VERDICT_OK = "ok"
VERDICT_DRIFT = "drift"
VERDICT_UNCHECKED = "unchecked"
VERDICT_NOTHING_CHECKED = "nothing_checked"
EXIT_OK = 0
EXIT_DRIFT = 1
EXIT_ERROR = 2
EXIT_NOTHING_CHECKED = EXIT_ERROR


@dataclass(frozen=True)
class Tolerance:
    """How far a request may be from the recommended one, per resource."""

    cpu_percent: float
    memory_percent: float
    cpu_floor_millicores: int
    memory_floor_bytes: int

    @classmethod
    def from_settings(cls, **overrides: Any) -> Tolerance:
        """``VPAWEB_CHECK_*``, with the given fields (not None) instead."""
        values = {
            "cpu_percent": settings.CHECK_CPU_PERCENT,
            "memory_percent": settings.CHECK_MEMORY_PERCENT,
            "cpu_floor_millicores": settings.CHECK_CPU_FLOOR_MILLICORES,
            "memory_floor_bytes": settings.CHECK_MEMORY_FLOOR_BYTES,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def allowed(self, resource: str, recommended: int) -> int:
        """The largest difference within tolerance from ``recommended``."""
        percent, floor = (
            (self.cpu_percent, self.cpu_floor_millicores)
            if resource == CPU
            else (self.memory_percent, self.memory_floor_bytes)
        )
        return max(int(recommended * percent / 100), floor)

    def as_dict(self) -> dict[str, Any]:
        """For the answer: percentages and floors as quantities."""
        return {
            "cpu_percent": self.cpu_percent,
            "memory_percent": self.memory_percent,
            "cpu_floor": format_cpu(self.cpu_floor_millicores),
            "memory_floor": format_memory(self.memory_floor_bytes),
        }


def _text(resource: str, amount: int) -> str:
    # Memory in readable units (rounded up): "85Mi", not "88709529".
    return format_cpu(amount) if resource == CPU else format_memory_readable(amount)


def _resource_verdict(
    change: dict[str, Any], tolerance: Tolerance, field: str
) -> dict[str, Any]:
    resource = change["field"].split(".", 1)[1]
    recommended = parse_quantity(resource, change["after"], field=field)
    allowed = tolerance.allowed(resource, recommended)
    entry: dict[str, Any] = {
        "resource": resource,
        "posted": change["before"],
        "recommended": change["after"],
        "allowed_difference": _text(resource, allowed),
    }
    if change["before"] is None:
        entry["verdict"] = VERDICT_DRIFT
        entry["message"] = f"no {resource} request; {change['after']} is recommended"
        return entry
    posted = parse_quantity(resource, change["before"], field=field)
    difference = posted - recommended
    entry["difference_percent"] = (
        round(100 * difference / recommended, 1) if recommended else None
    )
    # The change a patch makes, from the request to the recommendation (a PR's
    # "500m -> 203m" is -59.4 %): the other way round from the drift above.
    entry["change_percent"] = (
        round(100 * (recommended - posted) / posted, 1) if posted else None
    )
    within = abs(difference) <= allowed
    entry["verdict"] = VERDICT_OK if within else VERDICT_DRIFT
    direction = "above" if difference > 0 else "below"
    entry["message"] = (
        f"{resource} request {change['before']} is "
        f"{_text(resource, abs(difference))} {direction} the recommended "
        f"{change['after']} (allowed: {_text(resource, allowed)})"
    )
    return entry


def check_drift(result: RightsizeResult, *, tolerance: Tolerance) -> dict[str, Any]:
    """The verdict of every container of a rightsize, and of the whole request."""
    containers = []
    for document in result.documents:
        for report in document["containers"]:
            entry: dict[str, Any] = {
                "path": document["path"],
                "kind": document["kind"],
                "namespace": document["namespace"],
                "name": document["name"],
                "container": report["name"],
                "reason": report["reason"],
                "low_confidence": bool(report.get("low_confidence")),
                "resources": [],
            }
            if report["source"] == SOURCE_NONE:
                entry["verdict"] = VERDICT_UNCHECKED
                containers.append(entry)
                continue
            for change in report["changes"]:
                if change["field"].startswith("requests."):
                    entry["resources"].append(
                        _resource_verdict(change, tolerance, document["path"])
                    )
            drifted = any(r["verdict"] == VERDICT_DRIFT for r in entry["resources"])
            entry["verdict"] = VERDICT_DRIFT if drifted else VERDICT_OK
            containers.append(entry)
    counts = {
        verdict: sum(1 for c in containers if c["verdict"] == verdict)
        for verdict in (VERDICT_OK, VERDICT_DRIFT, VERDICT_UNCHECKED)
    }
    drift = counts[VERDICT_DRIFT] > 0
    answer: dict[str, Any] = {
        "verdict": VERDICT_DRIFT if drift else VERDICT_OK,
        "exit_code": EXIT_DRIFT if drift else EXIT_OK,
        "tolerance": tolerance.as_dict(),
        "summary": {"containers": len(containers), **counts},
        "containers": containers,
    }
    if counts[VERDICT_OK] + counts[VERDICT_DRIFT] == 0:
        answer["verdict"] = VERDICT_NOTHING_CHECKED
        answer["exit_code"] = EXIT_NOTHING_CHECKED
        answer["message"] = nothing_checked_message(result)
    return answer


def nothing_checked_message(result: RightsizeResult) -> str:
    """ "nothing checked: " and why, per document (its notes, or its reason)."""
    reasons: list[str] = []
    for document in result.documents:
        who = f"{document['kind']}/{document['name']}"
        notes = document.get("notes") or []
        if not notes and document.get("reason"):
            notes = [document["reason"]]
        reasons.extend(f"{who}: {note}" for note in notes)
    if not reasons:
        reasons = ["the manifests hold no container to check"]
    return "nothing checked: " + "; ".join(reasons)


def junit_xml(check: dict[str, Any]) -> str:
    """The check as JUnit XML: a test case per container (a failure per drift, skipped
    when unchecked), in one test suite."""
    summary = check["summary"]
    nothing = check["verdict"] == VERDICT_NOTHING_CHECKED
    suites = ET.Element("testsuites", name="vpaweb drift check")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="vpaweb drift check",
        tests=str(summary["containers"] + nothing),
        failures=str(summary[VERDICT_DRIFT]),
        errors=str(int(nothing)),
        skipped=str(summary[VERDICT_UNCHECKED]),
    )
    if nothing:
        # Skipped cases alone read as green in most CI systems: an error says it.
        case = ET.SubElement(
            suite, "testcase", classname="vpaweb", name="nothing checked"
        )
        error = ET.SubElement(
            case, "error", message=check["message"], type="nothing_checked"
        )
        error.text = check["message"]
    for container in check["containers"]:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"{container['namespace']}/{container['kind']}/"
            f"{container['name']}",
            name=container["container"],
        )
        if container["verdict"] == VERDICT_DRIFT:
            messages = [
                r["message"] for r in container["resources"] if r["verdict"] == "drift"
            ]
            failure = ET.SubElement(
                case, "failure", message="; ".join(messages), type="drift"
            )
            failure.text = "\n".join(
                [*(r["message"] for r in container["resources"]), container["reason"]]
            )
        elif container["verdict"] == VERDICT_UNCHECKED:
            ET.SubElement(case, "skipped", message=container["reason"])
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        + ET.tostring(suites, encoding="unicode")
        + "\n"
    )
