"""Each pytest-xdist worker gets a Redis database of its own
(tests/xdist_services.py)."""

from __future__ import annotations

import pytest

from tests.xdist_services import worker_redis_url


def test_each_worker_gets_its_own_redis_database() -> None:
    url = "redis://127.0.0.1:6379/15"
    assert worker_redis_url(url, "gw0") == url
    assert worker_redis_url(url, "gw1") == "redis://127.0.0.1:6379/14"
    assert worker_redis_url(url, "master") == url


def test_a_url_without_room_for_the_worker_is_refused() -> None:
    with pytest.raises(ValueError, match="gw2"):
        worker_redis_url("redis://127.0.0.1:6379/1", "gw2")
