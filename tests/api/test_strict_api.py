"""A strict, consistent API: unknown query parameters, sorting, mode Auto, notes."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client

from recommender.models import Workload

pytestmark = pytest.mark.django_db

PATH_VALUES = {
    "id": "1",
    "name": "simulated",
    "cluster": "simulated",
    "namespace": "shop",
    "kind": "Deployment",
    "job": "0123456789abcdef",
}


def _operations(client: Client) -> list[tuple[str, str, list[str]]]:
    schema = client.get("/api/v1/schema/?format=json").json()
    operations = []
    for path, methods in schema["paths"].items():
        url = re.sub(r"\{(\w+)\}", lambda m: PATH_VALUES[m.group(1)], path)
        for method, operation in methods.items():
            names = [
                p["name"] for p in operation.get("parameters", []) if p["in"] == "query"
            ]
            operations.append((method, url, names))
    return operations


def test_every_operation_refuses_an_unknown_query_parameter_naming_it(
    write_client: Client,
) -> None:
    operations = _operations(write_client)
    assert len(operations) > 25
    for method, url, names in operations:
        call = getattr(write_client, method)
        response = call(f"{url}?namespac=web&zz=1", content_type="application/json")
        assert response.status_code == 400, (method, url, response.content)
        error = response.json()["error"]
        assert error["code"] == "invalid"
        assert set(error["fields"]) == {"namespac", "zz"}, (method, url)
        assert error["message"].startswith("namespac, zz: unknown query parameter")
        for name in names:
            assert name in error["fields"]["namespac"][0]


def test_a_misspelled_filter_no_longer_lists_everything(
    read_client: Client, shop: Workload
) -> None:
    assert read_client.get("/api/v1/workloads/?namespace=shop").status_code == 200
    response = read_client.get("/api/v1/workloads/?namespac=shop")
    assert response.status_code == 400
    assert "namespace" in response.json()["error"]["fields"]["namespac"][0]


def test_documented_parameters_still_pass(read_client: Client, shop: Any) -> None:
    response = read_client.get(
        "/api/v1/recommendations/export?format=csv&namespace=shop&ordering=-risk"
    )
    assert response.status_code == 200, response.content
    response = read_client.get("/api/v1/workloads/?limit=5&offset=0&search=web")
    assert response.status_code == 200, response.content


def test_mode_auto_is_taken_as_recreate_and_the_answer_says_so(
    write_client: Client, shop: Workload
) -> None:
    response = write_client.patch(
        f"/api/v1/workloads/{shop.pk}/policy",
        {"mode": "Auto"},
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["mode"] == "Recreate"
    assert body["notes"] == [
        "mode Auto is upstream VPA's alias of Recreate (deprecated upstream, where it "
        "currently means Recreate); stored as Recreate"
    ]
    shop.policy.refresh_from_db()
    assert shop.policy.mode == "Recreate"
    # The filter takes it too.
    listed = write_client.get("/api/v1/workloads/?mode=Auto").json()
    assert [w["id"] for w in listed["results"]] == [shop.pk]


def test_an_unknown_mode_is_refused_listing_the_modes(
    write_client: Client, shop: Workload
) -> None:
    response = write_client.patch(
        f"/api/v1/workloads/{shop.pk}/policy",
        {"mode": "auto"},
        content_type="application/json",
    )
    assert response.status_code == 400
    message = response.json()["error"]["fields"]["mode"][0]
    assert message == (
        '"auto" is not a mode; the modes are Off, Initial, Recreate, '
        "InPlaceOrRecreate, InPlace (and Auto, upstream's alias of Recreate)"
    )


MISSPELLED = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  template:
    spec:
      containers:
      - name: app
        image: shop/web:1.4
        resourcez:
          requests: {cpu: "1", memory: 1Gi}
      - name: sidecar
        resources:
          request: {cpu: 100m}
"""


def test_rightsize_notes_unknown_container_fields(
    read_client: Client, shop: Workload
) -> None:
    response = read_client.post(
        "/api/v1/rightsize", MISSPELLED, content_type="application/yaml"
    )
    assert response.status_code == 200, response.content
    containers = response.json()["documents"][0]["containers"]
    notes = {c["name"]: c["notes"] for c in containers}
    assert (
        "unknown container field resourcez (did you mean resources?): kept as sent, "
        "but the API server will refuse it; vpaweb read only the fields it knows"
    ) in notes["app"]
    assert any(
        n.startswith(
            "unknown container field resources.request "
            "(did you mean resources.requests?)"
        )
        for n in notes["sidecar"]
    )


def test_the_export_says_each_containers_kind(
    read_client: Client, shop: Workload
) -> None:
    from recommender.models import Container

    Container.objects.create(
        workload=shop, name="migrate", kind=Container.Kind.INIT, position=5
    )
    Container.objects.create(
        workload=shop, name="proxy", kind=Container.Kind.SIDECAR, position=6
    )
    # The export streams its rows (StreamingHttpResponse).
    answer = read_client.get("/api/v1/recommendations/export?format=json")
    rows = json.loads(b"".join(answer.streaming_content))
    kinds = {row["container"]: row["container_kind"] for row in rows}
    assert kinds == {
        "app": "app",
        "sidecar": "app",
        "migrate": "init",
        "proxy": "sidecar",
    }
    csv_answer = read_client.get("/api/v1/recommendations/export?format=csv")
    csv_text = b"".join(csv_answer.streaming_content)
    header = csv_text.decode().splitlines()[0].split(",")
    assert header[4:6] == ["container", "container_kind"]


def test_a_host_the_server_does_not_answer_to_gets_the_error_shape(
    read_client: Client, db: Any
) -> None:
    # Django refuses it before any view (DisallowedHost): under /api/ the answer is
    # still the one JSON error shape, never Django's HTML page.
    response = read_client.get("/api/v1/workloads/", HTTP_HOST="wO")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"] == {
        "code": "invalid",
        "message": "the Host header names no host this server answers to",
        "fields": {},
    }
    page = read_client.get("/", HTTP_HOST="wO")
    assert page.status_code == 400
    assert page["Content-Type"].startswith("text/html")
