"""The PROMETHEUS_* settings refuse values that would make every back-fill fail."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

SETTINGS_FILE = Path(__file__).resolve().parents[2] / "vpaweb" / "settings.py"


def load_settings(monkeypatch, **env: str):
    """Execute vpaweb/settings.py afresh under ``env`` (django.conf is untouched)."""
    monkeypatch.setenv("SECRET_KEY", "t")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    spec = importlib.util.spec_from_file_location("fresh_settings", SETTINGS_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("days", ["0", "0.0", "-1", "367"])
def test_backfill_days_outside_what_backfill_accepts_fail_at_startup(monkeypatch, days):
    with pytest.raises(ImproperlyConfigured, match="PROMETHEUS_BACKFILL_DAYS"):
        load_settings(monkeypatch, PROMETHEUS_BACKFILL_DAYS=days)


def test_a_fraction_of_a_day_is_a_valid_backfill(monkeypatch):
    module = load_settings(monkeypatch, PROMETHEUS_BACKFILL_DAYS="0.5")

    assert module.PROMETHEUS_BACKFILL_DAYS == 0.5
