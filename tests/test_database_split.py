"""``--database-tests-only`` (tests/database_split.py) keeps in the PostgreSQL run
every test that reaches a database or real services, and only those."""

from __future__ import annotations

import pytest

from tests.database_split import needs_database_run

pytest_plugins = ["pytester"]


@pytest.mark.parametrize(
    ("markers", "fixtures", "by_hand", "kept"),
    [
        ((), ("monkeypatch", "tmp_path"), False, False),
        (("parametrize",), ("request",), False, False),
        (("django_db",), (), False, True),
        (("integration",), ("tmp_path",), False, True),
        ((), ("db",), False, True),
        ((), ("transactional_db",), False, True),
        ((), ("django_db_reset_sequences",), False, True),
        ((), ("django_db_serialized_rollback",), False, True),
        ((), ("live_server",), False, True),
        ((), ("django_db_blocker",), True, True),
    ],
)
def test_the_rule(markers, fixtures, by_hand, kept):
    assert needs_database_run(markers, fixtures, by_hand) is kept


def test_the_option_deselects_only_tests_that_reach_no_database(pytester):
    pytester.makeconftest(
        """
        import pytest

        pytest_plugins = ["tests.database_split"]

        def pytest_configure(config):
            config.addinivalue_line("markers", "integration: real services")

        @pytest.fixture
        def fleet(db):
            return 1

        @pytest.fixture
        def raw(django_db_blocker):
            return 2
        """
    )
    pytester.makepyfile(
        test_split="""
        import pytest

        def test_pure(): pass
        def test_settings(settings): pass
        @pytest.mark.django_db
        def test_marked(): pass
        @pytest.mark.integration
        def test_services(): pass
        def test_via_fixture(fleet): pass
        def test_unblocked(raw): pass
        def test_server(live_server): pass
        """
    )
    both = pytester.runpytest("-p", "no:xdist", "--collect-only", "-q")
    split = pytester.runpytest(
        "-p", "no:xdist", "--collect-only", "-q", "--database-tests-only"
    )
    assert "7 tests collected" in both.stdout.str()
    kept = {line.split("::")[1] for line in split.stdout.lines if "::" in line}
    assert kept == {
        "test_marked",
        "test_services",
        "test_via_fixture",
        "test_unblocked",
        "test_server",
    }
    split.stdout.fnmatch_lines(["*5/7 tests collected (2 deselected)*"])
