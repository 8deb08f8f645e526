"""Static files as served in production: hashed names, precompressed copies and a
long immutable cache (WhiteNoise's CompressedManifestStaticFilesStorage)."""

from __future__ import annotations

import gzip
import re
import runpy
from pathlib import Path

import pytest
from django.contrib.staticfiles.storage import staticfiles_storage
from django.core.management import CommandError, call_command
from django.http import HttpResponse
from django.test import RequestFactory, override_settings
from whitenoise.middleware import WhiteNoiseMiddleware

from vpaweb import settings as project_settings

REPO = Path(__file__).resolve().parents[2]


def production_static(source: Path, root: Path) -> override_settings:
    """The project's own storage, collecting only ``source`` (not plotly's 4.8 MB)
    into ``root``."""
    return override_settings(
        STORAGES=project_settings.STORAGES,
        WHITENOISE_USE_FINDERS=False,
        STATICFILES_DIRS=[source],
        STATICFILES_FINDERS=["django.contrib.staticfiles.finders.FileSystemFinder"],
        STATIC_ROOT=root,
    )


def test_collected_files_are_hashed_compressed_and_cached_for_good(tmp_path):
    body = (REPO / "static" / "vendor" / "htmx.min.js").read_bytes()
    (tmp_path / "src" / "vendor").mkdir(parents=True)
    (tmp_path / "src" / "vendor" / "lib.min.js").write_bytes(body)
    root = tmp_path / "static-root"

    with production_static(tmp_path / "src", root):
        call_command("collectstatic", interactive=False, verbosity=0)
        url = staticfiles_storage.url("vendor/lib.min.js")
        serve = WhiteNoiseMiddleware(lambda request: HttpResponse(status=404))
        as_gzip = serve(RequestFactory().get(url, HTTP_ACCEPT_ENCODING="gzip"))

    assert re.fullmatch(r"/static/vendor/lib\.min\.[0-9a-f]{12}\.js", url)
    hashed = root / url.removeprefix("/static/")
    assert {p.name for p in hashed.parent.iterdir()} == {
        hashed.name,
        f"{hashed.name}.gz",
    }  # only hashed names are kept
    assert as_gzip.status_code == 200
    assert as_gzip["Content-Encoding"] == "gzip"
    assert gzip.decompress(b"".join(as_gzip.streaming_content)) == body
    cache = as_gzip["Cache-Control"]
    assert "immutable" in cache
    assert int(re.search(r"max-age=(\d+)", cache)[1]) >= 365 * 24 * 3600


def test_serve_refuses_to_start_without_collected_files(tmp_path):
    (tmp_path / "src").mkdir()
    with (
        production_static(tmp_path / "src", tmp_path / "empty"),
        pytest.raises(
            CommandError, match=re.escape("run `manage.py collectstatic --no-input`")
        ),
    ):
        call_command("serve", "--no-scheduler")


def test_the_redoc_copy_loads_nothing_from_outside():
    tool = runpy.run_path(str(REPO / "tools" / "vendor_redoc.py"))
    original = tool["SOURCE"].read_text(encoding="utf-8")

    copy = tool["vendored"](original)

    assert tool["LOGO"] in original  # what the copy is for is still there upstream
    assert tool["LOGO"] not in copy
    assert re.search(r"//# sourceMappingURL=\S+\s*$", original)
    assert not re.search(r"//# sourceMappingURL=\S+\s*$", copy)  # the map is not copied
    with pytest.raises(SystemExit, match="would load from outside"):
        tool["vendored"](original + '\nload("https://cdn.example.org/x.js");\n')


CHART_TRACES = re.compile(r"""type:\s*["'](\w+)["']""")


def test_charts_use_the_basic_plotly_bundle_only_on_pages_that_draw_them():
    """plotly.js' basic bundle (scatter, bar, pie: 1.2 MB instead of the full 4.8 MB)
    holds every trace the dashboard draws, and only chart pages load it."""
    bundle = REPO / "static" / "vendor" / "plotly-basic.min.js"
    assert bundle.stat().st_size < 1_500_000
    assert "plotly.js (basic - minified)" in bundle.read_text()[:200]
    assert (
        "MIT" in (REPO / "static" / "vendor" / "plotly-basic.LICENSE.txt").read_text()
    )
    traces = set()
    for script in (REPO / "static" / "js").glob("*.js"):
        text = script.read_text()
        if "Plotly." in text:
            traces |= {
                t
                for t in CHART_TRACES.findall(text)
                if t not in {"date", "rect", "line"}
            }
    assert traces and traces <= {"scatter", "bar", "pie"}
    templates = REPO / "templates" / "recommender"
    loading = {
        page.name
        for page in templates.glob("*.html")
        if "vendor/plotly" in page.read_text()
    }
    assert loading == {"workload.html", "rollups.html", "whatif.html"}
    for page in loading:
        assert "vendor/plotly-basic.min.js" in (templates / page).read_text()
    assert "plotly" not in (REPO / "templates" / "base.html").read_text()
