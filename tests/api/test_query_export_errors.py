"""RecommendationQuery, recommendation exports, the one error shape, and the schema."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
import yaml
from django.test import Client, override_settings

from recommender.models import Policy, StaticCoefficient, Workload

pytestmark = pytest.mark.django_db


def _query(client: Client, body: Any):
    return client.post(
        "/api/v1/recommendation-query", body, content_type="application/json"
    )


def test_query_for_a_pod_of_a_known_workload(
    read_client: Client, shop: Workload
) -> None:
    Policy.objects.filter(workload=shop).update(
        container_policies=[{"containerName": "*", "minAllowed": {"memory": "256Mi"}}]
    )
    query = {
        "apiVersion": "vpaweb.io/v1",
        "kind": "RecommendationQuery",
        "metadata": {"namespace": "shop"},
        "spec": {
            "owner": {"kind": "Deployment", "name": "web"},
            "pod": {
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                        },
                        {"name": "sidecar"},
                    ]
                }
            },
        },
    }
    response = _query(read_client, query)
    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["spec"] == query["spec"]
    status = answer["status"]
    assert status["recommendation"] == {
        "containerRecommendations": [
            {
                "containerName": "app",
                "target": {"cpu": "587m", "memory": "256Mi"},
                "lowerBound": {"cpu": "469m", "memory": "256Mi"},
                "upperBound": {"cpu": "704m", "memory": "300Mi"},
                "uncappedTarget": {"cpu": "587m", "memory": "250Mi"},
            }
        ]
    }
    assert status["workload"]["id"] == shop.pk
    app, sidecar = status["containers"]
    assert app["caps"] == ["memory capped to minAllowed"]
    assert app["explanation"] == {"samples": 1440}
    assert sidecar["source"] == "none"


def test_query_owner_from_owner_references_and_static_coefficient(
    read_client: Client, db: Any
) -> None:
    StaticCoefficient.objects.create(namespace="", cpu_factor=0.5)
    response = _query(
        read_client,
        {
            "spec": {
                "pod": {
                    "metadata": {
                        "namespace": "x",
                        "ownerReferences": [
                            {"kind": "StatefulSet", "name": "db", "controller": True}
                        ],
                    },
                    "spec": {
                        "containers": [
                            {"name": "db", "resources": {"requests": {"cpu": "3"}}}
                        ]
                    },
                }
            }
        },
    )
    status = response.json()["status"]
    assert status["workload"] is None
    assert status["recommendation"]["containerRecommendations"] == [
        {"containerName": "db", "target": {"cpu": "1500m"}}
    ]
    assert status["containers"][0]["source"] == "static_coefficient"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "spec"),
        ({"spec": {}}, "spec.pod"),
        (
            {"spec": {"pod": {"spec": {"containers": "app"}}}},
            "spec.pod.spec.containers",
        ),
        (
            {
                "spec": {
                    "pod": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "a",
                                    "resources": {"requests": {"cpu": "12 cores"}},
                                }
                            ]
                        }
                    }
                }
            },
            "spec.pod.spec.containers[0].resources.requests.cpu",
        ),
        (
            {"spec": {"owner": {"kind": "Pod", "name": "x"}, "pod": {}}},
            "spec.owner.kind",
        ),
        ({"kind": "Pod", "spec": {"pod": {}}}, "kind"),
    ],
)
def test_bad_queries_name_the_field(
    read_client: Client, db: Any, body: dict[str, Any], field: str
) -> None:
    response = _query(read_client, body)
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"], response.json()


def test_export_csv_json_yaml(read_client: Client, shop: Workload) -> None:
    as_csv = read_client.get("/api/v1/recommendations/export?format=csv&namespace=shop")
    assert as_csv["Content-Type"].startswith("text/csv")
    assert "attachment" in as_csv["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(as_csv.getvalue().decode())))
    assert [
        (r["container"], r["target_cpu"], r["target_memory_bytes"]) for r in rows
    ] == [
        ("app", "587m", str(250 * 2**20)),
        ("sidecar", "", ""),
    ]
    as_json = json.loads(
        read_client.get("/api/v1/recommendations/export?format=json").getvalue()
    )
    assert as_json[0]["target_memory"] == "250Mi" and as_json[1]["target_cpu"] is None
    as_yaml = read_client.get("/api/v1/recommendations/export?format=yaml")
    assert yaml.safe_load(as_yaml.getvalue()) == as_json
    assert (
        read_client.get("/api/v1/recommendations/export?format=csv&kind=Job")
        .getvalue()
        .count(b"\n")
        == 1
    )  # header only


def test_export_errors_are_json_even_when_csv_was_asked(
    read_client: Client, db: Any
) -> None:
    response = read_client.get(
        "/api/v1/recommendations/export?format=csv&mode=Sometimes"
    )
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"]["fields"] == {
        "mode": [
            '"Sometimes" is not a mode; the modes are Off, Initial, Recreate, '
            "InPlaceOrRecreate, InPlace (and Auto, upstream's alias of Recreate)"
        ]
    }


def test_unknown_format_is_404_in_the_error_shape(read_client: Client, db: Any) -> None:
    response = read_client.get("/api/v1/recommendations/export?format=xlsx")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_api_404_outside_drf_views_is_json(read_client: Client) -> None:
    for path in ("/api/v1/no/such/thing", "/api/v2/", "/api/v1/workloads"):
        response = read_client.get(path)
        assert response.status_code == 404, path
        assert response.json()["error"]["code"] == "not_found"
    assert (
        "did you mean /api/v1/workloads/"
        in read_client.get("/api/v1/workloads").json()["error"]["message"]
    )


def test_method_not_allowed_uses_the_error_shape(
    read_client: Client, shop: Workload
) -> None:
    response = read_client.delete(f"/api/v1/workloads/{shop.pk}/")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_unexpected_errors_are_a_500_without_stack_trace(
    read_client: Client, shop: Workload, monkeypatch: pytest.MonkeyPatch
) -> None:
    from recommender.api import views

    def explode(*, query: Any) -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(views, "query_recommendation", explode)
    response = _query(read_client, {"spec": {"pod": {}}})
    assert response.status_code == 500
    assert response.json() == {
        "error": {
            "code": "server_error",
            "message": "internal server error; it has been logged",
            "fields": {},
        }
    }
    assert b"secret" not in response.content and b"Traceback" not in response.content


@override_settings(DEBUG=False)
def test_handler500_is_json_under_api(rf: Any) -> None:
    from recommender.api.errors import server_error

    response = server_error(rf.get("/api/v1/anything"))
    assert response.status_code == 500
    assert json.loads(response.content)["error"]["code"] == "server_error"
    assert b"<html" in server_error(rf.get("/dashboard")).content.lower()


def test_schema_and_docs_are_served_without_a_cdn(read_client: Client) -> None:
    schema = yaml.safe_load(read_client.get("/api/v1/schema/").content)
    assert "/api/v1/rightsize" in schema["paths"]
    docs = read_client.get("/api/v1/docs/").content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in docs
    assert "cdn" not in docs.lower() and "https://" not in docs


def test_every_offset_the_schema_allows_is_answered_and_one_past_it_is_a_400(
    read_client: Client, shop: Workload
) -> None:
    # The schema's largest offset is what the parser takes, on the export as on the
    # lists (schemathesis once sent the export a 20-digit offset the schema allowed).
    schema = yaml.safe_load(read_client.get("/api/v1/schema/").content)
    for path, query in (
        ("/api/v1/recommendations/export", {"format": "json"}),
        ("/api/v1/workloads/", {}),
    ):
        (offset,) = [
            p
            for p in schema["paths"][path]["get"]["parameters"]
            if p["name"] == "offset"
        ]
        largest = offset["schema"]["maximum"]
        answered = read_client.get(path, {**query, "offset": largest})
        assert answered.status_code == 200, (path, answered.content)
        refused = read_client.get(path, {**query, "offset": largest + 1})
        assert refused.status_code == 400, path
        assert list(refused.json()["error"]["fields"]) == ["offset"], path
