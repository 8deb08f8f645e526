"""Every environment variable the settings read is in .env.example and the settings
page (docs/settings.md)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
READER = re.compile(
    r"env_(?:str|bool|int|float|list|secret|header_pair|name)\(\s*\"([A-Z0-9_]+)\""
)
# vpaweb/gunicorn_conf.py reads gunicorn's variables before Django starts.
GUNICORN_READER = re.compile(
    r"(?:_int|os\.environ\.get|os\.environ\.setdefault)\(\s*\"([A-Z0-9_]+)\""
)


def settings_variables() -> set[str]:
    source = (ROOT / "vpaweb" / "settings.py").read_text()
    gunicorn = (ROOT / "vpaweb" / "gunicorn_conf.py").read_text()
    return set(READER.findall(source)) | set(GUNICORN_READER.findall(gunicorn))


def test_settings_read_variables_at_all():
    assert {"SECRET_KEY", "DATABASE_URL", "REDIS_URL"} <= settings_variables()


def test_every_variable_is_in_env_example():
    listed = set(
        re.findall(r"^([A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.M)
    )
    assert settings_variables() - listed == set()


def test_every_variable_is_on_the_settings_page():
    page = (ROOT / "docs" / "settings.md").read_text()
    missing = {name for name in settings_variables() if f"`{name}`" not in page}
    assert missing == set()


DOCUMENTED = re.compile(r"^\| `([A-Z][A-Z0-9_]+)`", re.M)
DOCS_WITH_SETTINGS = [
    "README.md",
    "docs/settings.md",
    "docs/prometheus.md",
    "docs/kubernetes.md",
]
# Read by the Kubernetes client library itself, not by the settings.
EXTERNAL = {"KUBECONFIG"}


def test_no_document_lists_a_variable_the_settings_do_not_read():
    read = settings_variables()
    listed = set(
        re.findall(r"^([A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.M)
    )
    for name in DOCS_WITH_SETTINGS:
        listed |= set(DOCUMENTED.findall((ROOT / name).read_text()))
    assert listed - read - EXTERNAL == set()


def test_the_backfill_help_names_only_variables_the_settings_read():
    from recommender.management.commands.backfill import Command

    named = set(re.findall(r"\b(?:PROMETHEUS|VPAWEB)_[A-Z0-9_]+", Command.help))
    assert named
    assert named - settings_variables() == set()
