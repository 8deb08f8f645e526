"""The typed environment readers used by settings."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from vpaweb.env import (
    database_from_url,
    env_bool,
    env_float,
    env_int,
    env_list,
    env_name,
    env_secret,
)


@pytest.mark.parametrize(
    ("raw", "expected"), [("true", True), ("ON", True), ("0", False), ("no", False)]
)
def test_env_bool_reads_words(monkeypatch, raw, expected):
    monkeypatch.setenv("X_FLAG", raw)
    assert env_bool("X_FLAG") is expected


def test_env_bool_rejects_other_words_naming_the_variable(monkeypatch):
    monkeypatch.setenv("X_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="X_FLAG='maybe'"):
        env_bool("X_FLAG")


def test_env_int_default_minimum_and_errors(monkeypatch):
    monkeypatch.delenv("X_INT", raising=False)
    assert env_int("X_INT", 7) == 7
    monkeypatch.setenv("X_INT", "12")
    assert env_int("X_INT", 7, minimum=5) == 12
    monkeypatch.setenv("X_INT", "3")
    with pytest.raises(ImproperlyConfigured, match="X_INT=3 must be at least 5"):
        env_int("X_INT", 7, minimum=5)
    monkeypatch.setenv("X_INT", "twelve")
    with pytest.raises(ImproperlyConfigured, match="X_INT='twelve' is not an integer"):
        env_int("X_INT", 7)


def test_env_float_rejects_nan_and_text(monkeypatch):
    monkeypatch.setenv("X_NUM", "0.5")
    assert env_float("X_NUM", 1.0) == 0.5
    monkeypatch.setenv("X_NUM", "nan")
    with pytest.raises(ImproperlyConfigured, match="finite"):
        env_float("X_NUM", 1.0)
    monkeypatch.setenv("X_NUM", "cheap")
    with pytest.raises(ImproperlyConfigured, match="X_NUM"):
        env_float("X_NUM", 1.0)


def test_env_list_splits_and_drops_blanks(monkeypatch):
    monkeypatch.setenv("X_LIST", "a, b,,c ")
    assert env_list("X_LIST") == ["a", "b", "c"]
    monkeypatch.delenv("X_LIST")
    assert env_list("X_LIST", ["d"]) == ["d"]


def test_env_name_reads_a_kubernetes_name_or_the_default(monkeypatch):
    monkeypatch.delenv("X_NAME", raising=False)
    assert env_name("X_NAME", "vpaweb") == "vpaweb"
    monkeypatch.setenv("X_NAME", "  ")
    assert env_name("X_NAME", "vpaweb") == "vpaweb"
    monkeypatch.setenv("X_NAME", " team-a.recommender ")
    assert env_name("X_NAME", "vpaweb") == "team-a.recommender"


@pytest.mark.parametrize("raw", ["VPAweb", "-vpaweb", "vpa web", "vpaweb-", "x" * 254])
def test_env_name_rejects_what_kubernetes_would_not_accept(monkeypatch, raw):
    monkeypatch.setenv("X_NAME", raw)
    with pytest.raises(
        ImproperlyConfigured, match=r"X_NAME=.* is not a Kubernetes name"
    ):
        env_name("X_NAME", "vpaweb")


def test_env_secret_prefers_file(monkeypatch, tmp_path):
    secret_file = tmp_path / "key"
    secret_file.write_text("from-file\n")
    monkeypatch.setenv("X_SECRET", "from-env")
    assert env_secret("X_SECRET") == "from-env"
    monkeypatch.setenv("X_SECRET_FILE", str(secret_file))
    assert env_secret("X_SECRET") == "from-file"
    monkeypatch.setenv("X_SECRET_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="X_SECRET_FILE"):
        env_secret("X_SECRET")


def test_database_from_url_postgres_and_sqlite():
    pg = database_from_url("DATABASE_URL", "postgres://u:p%40ss@db.example:6543/vpa")
    assert pg["ENGINE"] == "django.db.backends.postgresql"
    assert (pg["NAME"], pg["USER"], pg["PASSWORD"], pg["HOST"], pg["PORT"]) == (
        "vpa",
        "u",
        "p@ss",
        "db.example",
        "6543",
    )
    # JIT compilation costs more than the dashboard's aggregates it would speed up.
    assert pg["OPTIONS"] == {"options": "-c jit=off"}
    assert (
        database_from_url("DATABASE_URL", "sqlite:////tmp/x.db")["NAME"] == "/tmp/x.db"
    )
    assert database_from_url("DATABASE_URL", "sqlite:///var/x.db")["NAME"] == "var/x.db"


@pytest.mark.parametrize(
    "url", ["mysql://h/db", "postgres://host/", "postgres://h:port/db", "sqlite://"]
)
def test_database_from_url_rejects_bad_urls_naming_the_variable(url):
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL"):
        database_from_url("DATABASE_URL", url)


def _settings_load(**env: str):
    import os
    import subprocess
    import sys
    from pathlib import Path

    return subprocess.run(
        [sys.executable, "-c", "import vpaweb.settings"],
        cwd=Path(__file__).resolve().parents[1],
        env={"PATH": os.environ.get("PATH", ""), **env},
        capture_output=True,
        text=True,
    )


def test_the_public_demo_key_is_refused_unless_this_is_the_demo():
    from pathlib import Path

    demo = dict(
        line.split("=", 1)
        for line in (Path(__file__).resolve().parents[1] / "deploy/compose/demo.env")
        .read_text()
        .splitlines()
        if line and not line.startswith("#")
    )
    refused = _settings_load(SECRET_KEY=demo["SECRET_KEY"])
    assert refused.returncode != 0
    assert "SECRET_KEY is the public demo key" in refused.stderr
    # The compose demo sets VPAWEB_DEMO beside the key, and keeps working.
    assert demo["VPAWEB_DEMO"] == "true"
    allowed = _settings_load(SECRET_KEY=demo["SECRET_KEY"], VPAWEB_DEMO="true")
    assert allowed.returncode == 0, allowed.stderr
    assert _settings_load(SECRET_KEY="a-key-of-my-own").returncode == 0


def test_the_trial_overlays_key_is_refused_unless_this_is_the_trial():
    from pathlib import Path

    import yaml

    overlay = yaml.safe_load(
        (
            Path(__file__).resolve().parents[1]
            / "deploy/overlays/trial/kustomization.yaml"
        ).read_text()
    )
    literals = dict(
        item.split("=", 1) for item in overlay["secretGenerator"][0]["literals"]
    )
    key = literals["SECRET_KEY"]
    refused = _settings_load(SECRET_KEY=key)
    assert refused.returncode != 0
    assert "SECRET_KEY is the public demo key" in refused.stderr
    # The trial's own ConfigMap says it is one.
    from tests.deploy.test_manifests import named, render

    config = named(render("trial"), "ConfigMap", "vpaweb-config")["data"]
    assert config["VPAWEB_DEMO"] == "true"
    assert _settings_load(SECRET_KEY=key, VPAWEB_DEMO="true").returncode == 0


@pytest.mark.parametrize("key", ["x", "short-but-not-fifty-characters", "ab" * 40])
def test_a_short_key_is_refused_where_served_over_https(key: str) -> None:
    refused = _settings_load(SECRET_KEY=key, SESSION_COOKIE_SECURE="true")
    assert refused.returncode != 0
    assert "SECRET_KEY is too short for production" in refused.stderr
    # Without the https switches (tests, `make run` behind no TLS), as before.
    assert _settings_load(SECRET_KEY=key).returncode == 0
    good = "k3y-" + "0123456789abcdef" * 4
    assert _settings_load(SECRET_KEY=good, SESSION_COOKIE_SECURE="true").returncode == 0
