"""Fixtures shared by the whole suite."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import pytest
from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.locmem import LocMemCache
from django.test import override_settings


def service_missing(what: str) -> NoReturn:
    """Fail under CI (a missing service is a broken run), else skip."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{what} is required when CI=true", pytrace=False)
    pytest.skip(f"{what} is not available here")


# Tests render pages without a `collectstatic` run first: plain static names, served
# from the source folders (tests/web/test_static.py collects with the real storage).
PLAIN_STATIC_STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}


@pytest.fixture(autouse=True, scope="session")
def _plain_static_storage() -> Iterator[None]:
    """The whole session uses plain static names (see PLAIN_STATIC_STORAGES)."""
    if not settings.configured:
        yield
        return
    with override_settings(STORAGES=PLAIN_STATIC_STORAGES, WHITENOISE_USE_FINDERS=True):
        yield


# Django's default hasher (PBKDF2, 1,000,000 iterations) costs about 0.3 s of CPU per
# password set or checked; every test that makes a user paid it (hundreds per run). No
# test checks the hashing itself; the production settings keep the default.
FAST_PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True, scope="session")
def _fast_password_hashing() -> Iterator[None]:
    """The whole session hashes passwords with FAST_PASSWORD_HASHERS."""
    if not settings.configured:
        yield
        return
    with override_settings(PASSWORD_HASHERS=FAST_PASSWORD_HASHERS):
        yield


@pytest.fixture(autouse=True, scope="session")
def _flush_by_delete() -> Iterator[None]:
    """Transactional tests on PostgreSQL are emptied by DELETE (tests/fast_flush.py)."""
    if not settings.configured:
        yield
        return
    from tests.fast_flush import flush_by_delete

    with flush_by_delete():
        yield


@pytest.fixture(autouse=True, scope="module")
def _vacuumed_after_module(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each module, a PostgreSQL test database's tables with many dead rows
    are vacuumed (tests/fast_flush.py)."""
    yield
    if not settings.configured:
        return
    from django.db import connection

    if (
        connection.vendor != "postgresql"
        or connection.in_atomic_block
        or not str(connection.settings_dict["NAME"]).startswith("test_")
    ):
        return  # SQLite, a module's own transaction, or no test database yet
    from tests.fast_flush import vacuum_dead_tables

    with request.getfixturevalue("django_db_blocker").unblock():
        vacuum_dead_tables(connection)


@pytest.fixture(autouse=True)
def _cold_engine_state() -> None:
    """Each test starts as a fresh worker process: no engine rows kept from another
    test's cycles (services/refresh/warm_state.py; a rolled-back test's ids can come
    back in the next test's rows)."""
    if not settings.configured:
        return  # engine tests run without Django too (pytest -p no:django)
    from recommender.services.admission import counters
    from recommender.services.refresh import warm_state

    warm_state.forget_all()
    # Nor admission counts another test's reviews left unsaved in this process (the
    # next flush would write them into this test's database).
    counters._pending.clear()
    # Nor objects a refresh froze out of the collector (cycle.cyclic_gc_paused): a
    # worker process's hourly full collection never comes within a test run.
    gc.unfreeze()


@pytest.fixture(autouse=True)
def _no_throttle_history() -> None:
    """Each test starts with no API throttle counters, budget counters or heavy-job
    slots and dedupe entries (they live in the cache, and in Redis they outlive the
    run that wrote them)."""
    if not settings.configured:
        return  # engine tests run without Django too (pytest -p no:django)
    cache = caches["default"]
    if isinstance(cache, LocMemCache):
        cache.clear()
        return
    # Redis: delete only the counters, because the same database carries Celery's broker
    # state, which a flush would lose under a running worker.
    client = cache._cache.get_client(write=True)  # type: ignore[attr-defined]
    from recommender.services.access import budgets, heavy_jobs

    patterns = [
        "*throttle_*",
        f"*{budgets.KEY_PREFIX}*",
        f"*{heavy_jobs.RUNNING_KEY}*",
        f"*{heavy_jobs.SAME_KEY}*",
    ]
    keys = [key for pattern in patterns for key in client.scan_iter(match=pattern)]
    if keys:
        client.delete(*keys)


@pytest.fixture
def migrate_to() -> Iterator[Callable[[str], Any]]:
    """For a test of a migration: ``migrate_to(name)`` migrates the schema to that
    recommender migration and returns its historical apps. After the test the schema
    is migrated to the end again, for the transactional tests that follow (a flush
    does not re-migrate, and a schema left at an older migration breaks them)."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    def migrate(name: str) -> Any:
        target = [("recommender", name)]
        executor = MigrationExecutor(connection)
        executor.migrate(target)
        return executor.loader.project_state(target).apps

    yield migrate
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.fixture
def redis_away(settings: Any) -> None:
    """The cache pointed at a loopback port nothing listens on: Redis really away."""
    from benchmarks.bench_slowloris import free_port

    url = f"redis://127.0.0.1:{free_port()}/0"
    settings.REDIS_URL = url
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": url,
        }
    }
