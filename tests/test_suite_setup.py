"""The suite's own setup (tests/conftest.py): passwords are hashed cheaply in tests,
while the settings a deployment runs with keep Django's default hasher; the Makefile's
two runs share the schemathesis shards, each shard in one of them."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import global_settings
from django.contrib.auth.hashers import get_hasher, make_password

from tests.conftest import FAST_PASSWORD_HASHERS


def test_tests_hash_passwords_with_the_fast_hasher():
    assert get_hasher().algorithm == "md5"
    assert make_password("pw-for-tests-only").startswith("md5$")


def test_the_fast_hasher_is_not_what_a_deployment_uses():
    # vpaweb/settings.py sets no PASSWORD_HASHERS: Django's default (PBKDF2) applies.
    from vpaweb import settings as deployed

    assert not hasattr(deployed, "PASSWORD_HASHERS")
    assert global_settings.PASSWORD_HASHERS[0] not in FAST_PASSWORD_HASHERS


def _run_markers(target: str) -> str:
    """The ``-m`` expression of a Makefile test target."""
    makefile = (Path(__file__).resolve().parent.parent / "Makefile").read_text()
    # The target's line names its prerequisites (setup, the helm binary, ...).
    recipe = re.split(rf"\n{target}: setup[^\n]*\n", makefile, maxsplit=1)[1]
    recipe = recipe.split("\n\n", 1)[0]
    (expression,) = re.findall(r'-m "([^"]+)"', recipe)
    return expression


def test_each_schemathesis_shard_runs_in_exactly_one_of_the_two_runs():
    from _pytest.mark.expression import Expression

    from tests.api.test_schemathesis import POSTGRES_SHARDS, SHARDS

    runs = {
        target: Expression.compile(_run_markers(target))
        for target in ("test-sqlite", "test-pg")
    }
    where = {}
    for shard in range(SHARDS):
        markers = {"schemathesis", "django_db"}
        if shard in POSTGRES_SHARDS:
            markers.add("on_postgres")
        chosen = [
            target
            for target, expression in runs.items()
            if expression.evaluate(lambda name, m=markers: name in m)
        ]
        assert len(chosen) == 1, (shard, chosen)
        where[shard] = chosen[0]
    assert set(where.values()) == set(runs)
