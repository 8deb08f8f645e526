"""Every request example the API documents (the OpenAPI schema's examples and the
JSON examples in docs/api.md) is accepted by the server."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.test import Client

from recommender.models import Workload

ROOT = Path(__file__).resolve().parents[2]
HTTP_EXAMPLE = re.compile(r"```http\n(PATCH|POST) (/api/v1/\S+)\n(.*?)```", re.S)


def _path(template: str, shop: Workload, sim: Workload) -> str:
    # A what-if needs usage history: the simulated fleet's workload has it.
    pk = sim.pk if template.endswith("/what-if") else shop.pk
    return re.sub(r"\{[^}]+\}", str(pk), template).replace("/42/", f"/{pk}/")


def test_every_openapi_request_example_is_accepted(
    write_client: Client, shop: Workload, sim_workload: Workload
) -> None:
    schema = yaml.safe_load(write_client.get("/api/v1/schema/").content)
    sent = 0
    for template, operations in schema["paths"].items():
        if "{" in template and "{id}" not in template:
            continue  # the natural-key variants share the examples of the id routes
        for method, operation in operations.items():
            content = (operation.get("requestBody") or {}).get("content", {})
            for media_type, body in content.items():
                for name, example in (body.get("examples") or {}).items():
                    value = example["value"]
                    data: Any = value if isinstance(value, str) else json.dumps(value)
                    response = getattr(write_client, method)(
                        _path(template, shop, sim_workload),
                        data,
                        content_type=media_type,
                    )
                    assert response.status_code < 300, (
                        f"{method.upper()} {template} example {name!r}: "
                        f"{response.status_code} {response.content[:500]!r}"
                    )
                    sent += 1
    assert sent >= 5


def test_every_docs_api_example_is_accepted(
    write_client: Client, shop: Workload, sim_workload: Workload
) -> None:
    examples = HTTP_EXAMPLE.findall((ROOT / "docs" / "api.md").read_text())
    assert examples
    for method, path, body in examples:
        response = getattr(write_client, method.lower())(
            _path(path, shop, sim_workload),
            body.strip(),
            content_type="application/json",
        )
        assert response.status_code < 300, (method, path, response.content[:500])


@pytest.mark.parametrize(
    ("method", "path", "body", "component"),
    [
        ("patch", "/api/v1/workloads/{id}/policy", {"mdoe": "Initial"}, "Patched"),
        (
            "post",
            "/api/v1/static-coefficients",
            {"namespace": "", "cpu_factor": 0.7, "memory_factor": None, "x": 1},
            "StaticCoefficientInputRequest",
        ),
        (
            "post",
            "/api/v1/recommendation-query",
            {"spec": {"pod": {"spec": {"containers": [{"name": "a"}]}}}, "extra": 1},
            "RecommendationQueryRequest",
        ),
    ],
)
def test_unknown_keys_are_refused_as_the_schema_says(
    write_client: Client,
    shop: Workload,
    method: str,
    path: str,
    body: dict[str, Any],
    component: str,
) -> None:
    response = getattr(write_client, method)(
        path.replace("{id}", str(shop.pk)), body, content_type="application/json"
    )
    assert response.status_code == 400, response.content
    unknown = (set(body) - {"namespace", "cpu_factor", "memory_factor", "spec"}).pop()
    assert unknown in response.json()["error"]["fields"]
    schema = yaml.safe_load(write_client.get("/api/v1/schema/").content)
    components = schema["components"]["schemas"]
    closed = [
        name
        for name, value in components.items()
        if name.startswith(component) and value.get("additionalProperties") is False
    ]
    assert closed, component
