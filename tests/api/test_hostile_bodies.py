"""Hostile bodies against every endpoint that takes one: a 4xx in the one error shape,
naming what was wrong, with bounded memory (measured with tracemalloc, the peak of
Python allocations while the request is served in this process).

Timings are not asserted here (benchmarks/bench_api.py measures them); the limits are
what bound the time: each body is refused after at most the limits' worth of work.
"""

from __future__ import annotations

import functools
import json
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from recommender.models import ResizeChange, Workload

# A request may use this much Python memory at its peak, bodies included (a 5 MB body
# is held as bytes and as text, and libyaml gets a UTF-8 copy of it). Before the
# limits, the alias fan-out alone took about 1 GiB and 5 MB of keys +508 MiB.
MAX_PEAK_BYTES = 64 * 2**20


def alias_fan_out_yaml() -> str:
    """Each document anchors 100 strings and refers to them 100 times: 10,000 values
    per document once expanded, over 100 documents (1,000,000 values from 40 KB)."""
    documents = []
    for index in range(100):
        values = ", ".join(["xxxxxxxx"] * 100)
        refs = ", ".join([f"*a{index}"] * 100)
        documents.append(
            f"kind: ConfigMap\nmetadata: {{name: c{index}}}\n"
            f"data: {{k: &a{index} [{values}]}}\nmore: [{refs}]\n"
        )
    return "---\n" + "---\n".join(documents)


def nested_json() -> str:
    return '{"kind": "Deployment", "spec": ' + "[" * 2000 + "]" * 2000 + "}"


def nested_yaml() -> str:
    return "kind: Deployment\nspec:\n" + "".join(
        "  " * depth + "a:\n" for depth in range(1, 2000)
    )


def many_keys_json() -> str:
    """About 5 MB of keys in one object."""
    keys = ", ".join(f'"key{index:07d}": 1' for index in range(300_000))
    return "{" + keys + "}"


def many_keys_yaml() -> str:
    return "".join(f"key{index:07d}: 1\n" for index in range(350_000))


def many_documents_yaml() -> str:
    return "---\nkind: ConfigMap\nmetadata: {name: c}\n" * 10_000


def many_documents_json() -> str:
    return json.dumps([{"kind": "ConfigMap", "metadata": {"name": "c"}}] * 10_000)


def control_characters_json() -> bytes:
    return b'{"namespace": "a\x00b\x1b[31m", "mode": "\x07"}'


def control_characters_yaml() -> bytes:
    return b'kind: Pod\nmetadata: {name: "a\x00b\x1b[31m"}\n'


# name -> (body, content type)
HOSTILE: dict[str, tuple[Callable[[], str | bytes], str]] = {
    "alias fan-out across documents": (alias_fan_out_yaml, "application/yaml"),
    "2,000-deep nesting (JSON)": (nested_json, "application/json"),
    "2,000-deep nesting (YAML)": (nested_yaml, "application/yaml"),
    "5 MB of keys (JSON)": (many_keys_json, "application/json"),
    "5 MB of keys (YAML)": (many_keys_yaml, "application/yaml"),
    "10,000 documents (YAML)": (many_documents_yaml, "application/yaml"),
    "10,000 documents (JSON)": (many_documents_json, "application/json"),
    "control characters (JSON)": (control_characters_json, "application/json"),
    "control characters (YAML)": (control_characters_yaml, "application/yaml"),
}

# Endpoints that take a body: (method, path template). {workload} and {change} are
# filled with real ids, so a 4xx comes from the body, not from a missing object.
ENDPOINTS = {
    "rightsize": ("post", "/api/v1/rightsize"),
    "recommendation-query": ("post", "/api/v1/recommendation-query"),
    "static-coefficients": ("post", "/api/v1/static-coefficients"),
    "policy": ("patch", "/api/v1/workloads/{workload}/policy"),
    "reject": ("post", "/api/v1/changes/{change}/reject"),
}


@functools.cache
def _build(name: str) -> tuple[bytes, str]:
    make, content_type = HOSTILE[name]
    body = make()
    return (body.encode() if isinstance(body, str) else body), content_type


@pytest.fixture
def change(shop: Workload) -> ResizeChange:
    return ResizeChange.objects.create(workload=shop, pod="web-1")


@pytest.mark.parametrize("endpoint", sorted(ENDPOINTS))
@pytest.mark.parametrize("hostile", list(HOSTILE))
def test_hostile_body_is_a_4xx_in_the_error_shape_with_bounded_memory(
    write_client: Client,
    shop: Workload,
    change: ResizeChange,
    endpoint: str,
    hostile: str,
) -> None:
    method, template = ENDPOINTS[endpoint]
    path = template.format(workload=shop.pk, change=change.pk)
    body, content_type = _build(hostile)
    assert len(body) <= 5 * 2**20 + 2**16  # under (or at) the body-size limit
    send = getattr(write_client, method)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before, _ = tracemalloc.get_traced_memory()
        response = send(path, body, content_type=content_type)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert 400 <= response.status_code < 500, (response.status_code, response.content)
    error = response.json()["error"]
    assert set(error) == {"code", "message", "fields"}, error
    assert error["message"] and isinstance(error["fields"], dict)
    assert b"Traceback" not in response.content
    assert peak - before < MAX_PEAK_BYTES, f"{(peak - before) / 2**20:.1f} MiB"
    change.refresh_from_db()
    assert change.status == ResizeChange.Status.PROPOSED  # nothing was lost or changed


LIMIT_CASES = {
    "alias fan-out across documents": "VPAWEB_API_MAX_NODES",
    "2,000-deep nesting (JSON)": "VPAWEB_API_MAX_DEPTH",
    "2,000-deep nesting (YAML)": "VPAWEB_API_MAX_DEPTH",
    "5 MB of keys (JSON)": "VPAWEB_API_MAX_KEYS",
    "5 MB of keys (YAML)": "VPAWEB_API_MAX_KEYS",
    "10,000 documents (YAML)": "VPAWEB_API_MAX_DOCUMENTS",
    "10,000 documents (JSON)": "VPAWEB_API_MAX_DOCUMENTS",
}


@pytest.mark.parametrize(("hostile", "limit"), list(LIMIT_CASES.items()))
def test_rightsize_names_the_limit_passed(
    read_client: Client, db: Any, hostile: str, limit: str
) -> None:
    body, content_type = _build(hostile)
    response = read_client.post("/api/v1/rightsize", body, content_type=content_type)
    assert response.status_code == 413, response.content
    error = response.json()["error"]
    assert error["code"] == "too_large"
    assert limit in error["message"] and limit in error["fields"]["body"][0]


def test_control_characters_are_a_400_naming_the_body(
    read_client: Client, db: Any
) -> None:
    for make, content_type in (
        (control_characters_yaml, "application/yaml"),
        (control_characters_json, "application/json"),
    ):
        response = read_client.post(
            "/api/v1/rightsize", make(), content_type=content_type
        )
        assert response.status_code == 400, response.content
        error = response.json()["error"]
        assert error["code"] == "malformed"
        assert "body" in error["fields"]


def test_a_long_string_is_refused_naming_the_limit(
    write_client: Client, db: Any
) -> None:
    body = json.dumps({"namespace": "x" * (2**20 + 1), "cpu_factor": 0.5})
    response = write_client.post(
        "/api/v1/static-coefficients", body, content_type="application/json"
    )
    assert response.status_code == 413
    assert "VPAWEB_API_MAX_SCALAR_CHARS" in response.json()["error"]["message"]


def test_a_recursive_alias_is_refused(read_client: Client, db: Any) -> None:
    response = read_client.post(
        "/api/v1/rightsize", "kind: Pod\nspec: &a {x: [*a]}\n", content_type="text/yaml"
    )
    assert response.status_code == 400
    assert "recursive" in response.json()["error"]["message"]


def test_within_the_limits_aliases_still_work(read_client: Client, db: Any) -> None:
    body = (
        "kind: Pod\nmetadata: {name: p, namespace: shop}\n"
        "spec:\n  containers:\n"
        "  - {name: a, resources: &r {requests: {cpu: 100m}}}\n"
        "  - {name: b, resources: *r}\n"
    )
    response = read_client.post("/api/v1/rightsize", body, content_type="text/yaml")
    assert response.status_code == 200, response.content
    spec = response.json()["manifests"][0]["spec"]
    assert spec["containers"][1]["resources"] == {"requests": {"cpu": "100m"}}
