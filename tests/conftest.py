"""Fixtures shared by the whole suite."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def service_missing(what: str) -> NoReturn:
    """Fail under CI (a missing service is a broken run), else skip."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{what} is required when CI=true", pytrace=False)
    pytest.skip(f"{what} is not available here")
