"""The fake API server's HorizontalPodAutoscaler answers are the recorded ones: each
recorded request of k8s-wire hpa/ is sent again to the fake holding the object as it
was before, and the answer must be the recorded one (its status; the whole body of an
error; the spec of a success)."""

from __future__ import annotations

import copy
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.k8s_fake.server import TOKEN, FakeApiServer

HPA = Path(__file__).resolve().parents[1] / "fixtures" / "k8s-wire" / "hpa"


def recorded(name: str) -> dict[str, Any]:
    (path,) = HPA.glob(f"{name}-*.json")
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def _object(name: str) -> dict[str, Any]:
    return copy.deepcopy(recorded(name)["response"]["body"])


def _at_75() -> dict[str, Any]:
    # worker-two after file 14 (its JSON patch set the cpu target to 75).
    obj = _object("05")
    obj["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] = 75
    return obj


# Each replayed file, and the object as it was before its request.
BEFORE = {
    "05": lambda: _object("05"),
    "12": lambda: _object("05"),
    "13": lambda: _object("12"),
    "16": _at_75,
    "17": lambda: _object("16"),
    "18": lambda: _object("16"),
    "20": lambda: _object("19"),
    "21": lambda: _object("20"),
    "22": lambda: _object("02"),
    "23": lambda: _object("02"),
    "24": lambda: _object("03"),
    "25": lambda: _object("02"),
    "26": lambda: _object("02"),
}


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    fake = FakeApiServer().start()
    yield fake
    fake.stop()


def send(server: FakeApiServer, request: dict[str, Any]) -> tuple[int, Any]:
    headers = {
        k: v for k, v in request["headers"].items() if k in ("Content-Type", "Accept")
    }
    body = request.get("body")
    http = urllib.request.Request(
        server.url + request["path"],
        data=None if body is None else json.dumps(body).encode(),
        method=request["method"],
        headers={**headers, "Authorization": f"Bearer {TOKEN}"},
    )
    try:
        with urllib.request.urlopen(http, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_the_fake_answers_each_recorded_request_as_recorded(server, name):
    server.add(BEFORE[name]())
    wire = recorded(name)
    status, body = send(server, wire["request"])
    expected = wire["response"]
    assert status == expected["status"]
    if status >= 400:
        assert body == expected["body"]
    else:
        assert body["spec"] == expected["body"]["spec"]
        # HPAs have no generation (README section 8, fact 2).
        assert "generation" not in body["metadata"]


def test_a_stale_resource_version_test_is_a_bare_422_not_a_409(server):
    obj = _object("05")
    server.add(obj)
    wire = recorded("15")
    status, body = send(server, wire["request"])
    assert (status, body) == (422, wire["response"]["body"])


def test_a_patch_the_role_does_not_grant_is_the_recorded_403(server):
    server.add(_object("02"))
    server.deny("autoscaling", "horizontalpodautoscalers", "patch")
    wire = recorded("28")
    status, body = send(server, wire["request"])
    assert (status, body) == (403, wire["response"]["body"])
