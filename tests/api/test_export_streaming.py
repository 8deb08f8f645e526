"""The recommendation export streams: rows are read from the database a chunk of
workloads at a time and written as they come (the bytes are what the renderers write
for the whole list); ?limit=/?offset= give the paginated API form; filters apply."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
import yaml
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from recommender.api import formats, views
from recommender.api.formats import CSVRenderer, YAMLRenderer, stream_rows
from recommender.api.views import EXPORT_COLUMNS
from tests.factories import make_cluster, make_recommendation, make_workload

EXPORT = "/api/v1/recommendations/export"


@pytest.fixture
def fleet(db: Any) -> list[str]:
    """Five workloads of one container each (a recommendation each), and one
    workload in another cluster; the names in export order."""
    cluster = make_cluster("prod")
    names = [f"w{i}" for i in range(5)]
    for name in names:
        workload = make_workload(cluster, name, namespace="shop")
        make_recommendation(workload.containers.get(), cpu_millicores=100)
    make_workload(make_cluster("staging"), "other", namespace="lab")
    return names


def _prefetches(queries: CaptureQueriesContext) -> int:
    """Queries reading the containers of a chunk of workloads."""
    return sum(
        '"recommender_container"."workload_id" IN (' in q["sql"]
        for q in queries.captured_queries
    )


def test_the_export_is_read_and_written_a_chunk_at_a_time(
    read_client: Client, fleet: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(views, "EXPORT_CHUNK", 2)
    monkeypatch.setattr(formats, "STREAM_ROWS_PER_CHUNK", 1)

    response = read_client.get(f"{EXPORT}?format=csv&cluster=prod")

    assert response.streaming
    chunks = iter(response.streaming_content)
    with CaptureQueriesContext(connection) as before_any_row:
        header = next(chunks)
    # The header leaves before the database is asked for a row.
    assert header.decode().startswith("cluster,namespace,kind,workload,")
    assert _prefetches(before_any_row) == 0
    with CaptureQueriesContext(connection) as first:
        row = next(chunks)
    # The first row needs the first chunk of workloads only.
    assert row.decode().split(",")[3] == "w0"
    assert _prefetches(first) == 1
    with CaptureQueriesContext(connection) as rest:
        tail = b"".join(chunks)
    assert _prefetches(rest) == 2  # workloads 3-4 and 5
    rows = list(csv.DictReader(io.StringIO((header + row + tail).decode())))
    assert [r["workload"] for r in rows] == fleet


@pytest.mark.parametrize("count", [0, 1, 501, 1000])
def test_streamed_bytes_are_what_the_renderers_write_for_the_whole_list(
    count: int,
) -> None:
    rows = [
        {
            "cluster": "=prod" if i % 2 else "prod",
            "workload": f"wé{i}",
            "savings_monthly": i / 3,
            "target_cpu": None,
        }
        for i in range(count)
    ]
    columns = list(rows[0]) if rows else ["cluster"]

    def streamed(fmt: str) -> bytes:
        return b"".join(stream_rows(iter(rows), format=fmt, columns=columns))

    class View:
        csv_columns = columns

    assert streamed("csv") == CSVRenderer().render(rows, None, {"view": View()})
    assert streamed("yaml") == YAMLRenderer().render(rows)
    from rest_framework.renderers import JSONRenderer

    assert streamed("json") == JSONRenderer().render(rows)
    assert json.loads(streamed("json")) == rows


def test_limit_and_offset_give_a_page_of_workloads_in_the_envelope(
    read_client: Client, fleet: list[str]
) -> None:
    page = read_client.get(f"{EXPORT}?format=json&cluster=prod&limit=2&offset=1")

    assert not page.streaming
    body = page.json()
    assert body["count"] == 5
    assert [r["workload"] for r in body["results"]] == fleet[1:3]
    assert "offset=3" in body["next"]
    as_yaml = yaml.safe_load(
        read_client.get(f"{EXPORT}?format=yaml&cluster=prod&limit=2").content
    )
    assert [r["workload"] for r in as_yaml["results"]] == fleet[:2]
    # CSV has no envelope: the page's rows.
    as_csv = read_client.get(f"{EXPORT}?format=csv&cluster=prod&offset=4").content
    rows = list(csv.DictReader(io.StringIO(as_csv.decode())))
    assert [r["workload"] for r in rows] == fleet[4:]
    assert set(rows[0]) == set(EXPORT_COLUMNS)


def test_a_bad_limit_names_the_field(read_client: Client, fleet: list[str]) -> None:
    response = read_client.get(f"{EXPORT}?format=csv&limit=0")

    assert response.status_code == 400
    assert "limit" in response.json()["error"]["fields"]


def test_cluster_namespace_and_status_filter_the_stream(
    read_client: Client, fleet: list[str]
) -> None:
    def workloads(query: str) -> list[str]:
        body = read_client.get(f"{EXPORT}?format=json&{query}").getvalue()
        return [row["workload"] for row in json.loads(body)]

    assert workloads("cluster=staging") == ["other"]
    assert workloads("namespace=lab") == ["other"]
    assert workloads("cluster=prod&namespace=lab") == []
    # "other" has no recommendation: no data.
    assert workloads("status=no-data") == ["other"]
    assert "other" not in workloads("status=over")


@pytest.mark.parametrize(("fmt", "before_first_row"), [("yaml", 0), ("csv", 1)])
def test_the_first_row_leaves_before_the_second_is_read(
    fmt: str, before_first_row: int
) -> None:
    read = []

    def rows():
        for i in range(1000):
            read.append(i)
            yield {"workload": f"w{i}"}

    stream = stream_rows(rows(), format=fmt, columns=["workload"])
    for _ in range(before_first_row):
        next(stream)  # the CSV header, before any row is read
    first = next(stream)

    assert b"w0" in first and b"w1" not in first
    assert read == [0]
