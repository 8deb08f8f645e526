"""Loaded with ``-p tests.database_split`` (pyproject's addopts).

``--database-tests-only`` (``make test-pg``) deselects every test that cannot depend on
the database backend, because ``make test-sqlite`` runs it already: a test that is not
``integration`` and reaches no database. pytest-django refuses database access to such
a test, so its result is the same on SQLite and PostgreSQL. A test reaches the database
through the ``django_db`` marker, a fixture of ``DATABASE_FIXTURES`` anywhere in its
fixture closure, or ``django_db_blocker`` requested by the test or one of the suite's
own fixtures (which may unblock the database by hand)."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

# pytest-django's fixtures that open the test database (live_server's helper asks for
# transactional_db at run time, so live_server itself counts).
DATABASE_FIXTURES = frozenset(
    {
        "db",
        "transactional_db",
        "django_db_reset_sequences",
        "django_db_serialized_rollback",
        "live_server",
    }
)
# Markers that keep a test in the PostgreSQL run whatever its fixtures: `django_db`
# opens the database; `integration` tests (real Redis, Celery, Prometheus) run only
# there.
KEPT_MARKERS = frozenset({"django_db", "integration"})


def needs_database_run(
    markers: Iterable[str], fixtures: Iterable[str], unblocks_by_hand: bool
) -> bool:
    """Whether a test with these markers and fixture closure belongs in the
    PostgreSQL run (see the module's docstring)."""
    return (
        bool(KEPT_MARKERS & set(markers))
        or bool(DATABASE_FIXTURES & set(fixtures))
        or unblocks_by_hand
    )


def _unblocks_by_hand(item: pytest.Item) -> bool:
    """The test, or a fixture not of pytest-django, requests ``django_db_blocker``."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    if "django_db_blocker" in info.argnames:
        return True
    return any(
        "django_db_blocker" in definition.argnames
        and not getattr(definition.func, "__module__", "").startswith("pytest_django")
        for definitions in info.name2fixturedefs.values()
        for definition in definitions
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--database-tests-only",
        action="store_true",
        help="deselect tests that reach no database and are not integration tests "
        "(the PostgreSQL run of `make test`; the SQLite run has them)",
    )


def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
    if not config.getoption("database_tests_only"):
        return
    kept, deselected = [], []
    for item in items:
        markers = {marker.name for marker in item.iter_markers()}
        fixtures = getattr(item, "fixturenames", ())
        if needs_database_run(markers, fixtures, _unblocks_by_hand(item)):
            kept.append(item)
        else:
            deselected.append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept
