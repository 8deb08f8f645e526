"""Where schemathesis found the schema looser than the server (schema-valid requests
refused, ST202), the schema now says what the server takes: a window's HH:MM, the
profile names, a YAML body of manifests (not one scalar), a query's pod with its
containers. Values the server takes stay schema-valid."""

from __future__ import annotations

import re
from typing import Any

import jsonschema
import pytest
from drf_spectacular.generators import SchemaGenerator

from recommender.api.rightsize_views import RIGHTSIZE_EXAMPLE_YAML
from recommender.engine import PROFILES


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return SchemaGenerator().get_schema(request=None, public=True)


def _component(schema: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    """The component ``ref`` names (a field with a description wraps it in allOf)."""
    if "allOf" in ref:
        (ref,) = ref["allOf"]
    return schema["components"]["schemas"][ref["$ref"].rsplit("/", 1)[1]]


def _request(schema: dict[str, Any], path: str, media_type: str) -> dict[str, Any]:
    content = schema["paths"][path]["post"]["requestBody"]["content"]
    found = content[media_type]["schema"]
    return _component(schema, found) if "$ref" in found else found


def test_a_window_time_is_a_clock_time(schema):
    window = schema["components"]["schemas"]["MaintenanceWindowRequest"]
    for field in ("start", "end"):
        pattern = window["properties"][field]["pattern"]
        for bad in ("84:25", "24:00", "9:60", "1:5", "٣:00"):
            assert re.search(pattern, bad) is None, (field, bad)
        for good in ("0:00", "9:05", "09:05", "23:59"):
            assert re.search(pattern, good), (field, good)


def test_compare_profiles_takes_profile_names_only(schema):
    body = _request(
        schema,
        "/api/v1/clusters/{cluster}/namespaces/{namespace}/compare-profiles",
        "application/json",
    )
    for field in ("profile_a", "profile_b"):
        enum = _component(schema, body["properties"][field])["enum"]
        assert sorted(enum) == sorted(PROFILES)
        assert "0" not in enum


@pytest.mark.parametrize("path", ["/api/v1/rightsize", "/api/v1/check"])
def test_a_yaml_body_is_manifests_not_one_scalar(schema, path):
    yaml_body = _request(schema, path, "application/yaml")
    for bad in ("0", "some text", "- a\n- b\n"):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, yaml_body)
    jsonschema.validate(RIGHTSIZE_EXAMPLE_YAML, yaml_body)
    jsonschema.validate('{"apiVersion": "v1", "kind": "Pod"}', yaml_body)


def test_a_recommendation_query_needs_a_pod_with_containers(schema):
    query = _request(schema, "/api/v1/recommendation-query", "application/json")
    spec = _component(schema, query["properties"]["spec"])
    assert "pod" in spec["required"]
    pod = spec["properties"]["pod"]
    for bad in ({}, "pod", 0, {"spec": {}}, {"containers": []}, {"containers": [{}]}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, pod)
    for good in (
        {"spec": {"containers": [{"name": "app", "image": "x"}]}},
        {"containers": [{"name": "app"}]},
    ):
        jsonschema.validate(good, pod)
