"""A webhook patch is admitted whenever the pod as received is: generated cases.

Each case is a LimitRange, a pod and a recommendation (tests/k8s_fake/
limit_range_cases.py); the fake LimitRanger (tests/k8s_fake/limit_ranger.py, its own
quantity arithmetic, the recorded messages) judges the pod as received and as
patched. ``python -m benchmarks limitranger`` runs 10,000 and more.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.k8s_fake.limit_range_cases import (
    NAMESPACE,
    decide_case,
    recommendation,
    run_cases,
)
from tests.k8s_fake.limit_ranger import (
    admit_pod,
    default_limit_range,
    forbidden,
    validate_pod,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "k8s-wire"


def test_no_patched_pod_is_refused_where_the_original_is_admitted():
    tally = run_cases(1000, seed=23)
    assert tally.refused == [], json.dumps(tally.refused[:3], indent=1)
    # Not vacuous: a fair share of originals pass, most of those are patched.
    assert tally.original_admitted > 200
    assert tally.patched > tally.original_admitted // 2


def test_the_fake_limit_ranger_refuses_as_recorded():
    """The recorded refusals, rebuilt: the ratio one (a RequestsOnly patch lowered the
    request under an unchanged limit) and the max one (d2)."""
    audit = json.loads(
        (FIXTURES / "limitranger" / "ratio-refusal.audit.json").read_text()
    )
    ratio_range = {
        "spec": {
            "limits": [
                {
                    "type": "Container",
                    "max": {"cpu": "500m", "memory": "512Mi"},
                    "default": {"cpu": "300m", "memory": "256Mi"},
                    "defaultRequest": {"cpu": "100m", "memory": "128Mi"},
                    "maxLimitRequestRatio": {"cpu": "3500m"},
                }
            ]
        }
    }
    patched = {
        "metadata": {"name": "light-7d6c6f59d8-pr65l"},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "resources": {
                        "requests": {"cpu": "78m", "memory": "128Mi"},
                        "limits": {"cpu": "300m", "memory": "256Mi"},
                    },
                }
            ]
        },
    }
    status = forbidden(patched, validate_pod(patched, [ratio_range]))
    assert status == audit["responseStatus"] | {"apiVersion": "v1", "kind": "Status"}

    create = json.loads(
        (
            FIXTURES / "admission" / "d2-limitrange-max-violated-by-webhook-patch"
            ".create.json"
        ).read_text()
    )
    max_range = {"spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}}]}}
    exceeding = {
        "metadata": {"name": "lr-exceed"},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}},
                }
            ]
        },
    }
    status = forbidden(exceeding, validate_pod(exceeding, [max_range]))
    assert status == create["response"]["body"]


def test_a_requests_only_patch_keeps_the_limit_to_request_ratio():
    """The refused pod of the ratio recording, made again: RequestsOnly, limit 300m,
    maxLimitRequestRatio 3.5, a recommendation of 78m. The request is raised to the
    least the ratio admits with that limit (300m / 3.5 = 85.7m: 86m)."""
    stored_range = default_limit_range(
        {
            "metadata": {"name": "limits", "namespace": NAMESPACE},
            "spec": {
                "limits": [
                    {
                        "type": "Container",
                        "max": {"cpu": "500m", "memory": "512Mi"},
                        "default": {"cpu": "300m", "memory": "256Mi"},
                        "defaultRequest": {"cpu": "100m", "memory": "128Mi"},
                        "maxLimitRequestRatio": {"cpu": "3500m"},
                    }
                ]
            },
        }
    )
    received = admit_pod(
        {
            "metadata": {
                "name": "web-0",
                "namespace": NAMESPACE,
                "ownerReferences": [
                    {"kind": "StatefulSet", "name": "web", "controller": True}
                ],
            },
            "spec": {"containers": [{"name": "app", "image": "light:1"}]},
        },
        [stored_range],
    )
    assert validate_pod(received, [stored_range]) == []
    decision, patched = decide_case(
        stored_range,
        received,
        [{"containerName": "*", "controlledValues": "RequestsOnly"}],
        {"app": recommendation(78, 128 * 2**20)},
    )
    assert patched is not None, decision.reason
    assert validate_pod(patched, [stored_range]) == []
    resources = patched["spec"]["containers"][0]["resources"]
    assert resources["requests"]["cpu"] == "86m"
    assert resources["limits"]["cpu"] == "300m"
    assert "maxLimitRequestRatio" in decision.containers[0].notes[-1]
