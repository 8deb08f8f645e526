"""One YAML renderer: the manifests renderer writes any other answer (an error) as
the YAML renderer does, and the streamed rows are the same text."""

from __future__ import annotations

from recommender.api.formats import ManifestsYAMLRenderer, YAMLRenderer, stream_rows

ERROR = {"error": {"code": "not_found", "message": "no workload café/web"}}


def test_an_answer_without_manifests_is_written_by_the_one_yaml_renderer():
    written = ManifestsYAMLRenderer().render(ERROR)
    assert written == YAMLRenderer().render(ERROR)
    assert "café".encode() in written  # UTF-8, not an escape


def test_streamed_rows_are_the_yaml_renderer_s_text():
    rows = [{"workload": "café/web", "cpu": 1}, {"workload": "b", "cpu": None}]
    streamed = b"".join(stream_rows(iter(rows), format="yaml", columns=["workload"]))
    assert streamed == YAMLRenderer().render(rows)
