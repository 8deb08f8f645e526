"""The suite's own setup (tests/conftest.py): passwords are hashed cheaply in tests,
while the settings a deployment runs with keep Django's default hasher."""

from __future__ import annotations

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
