"""Property-based tests of the whole API against its own OpenAPI schema (schemathesis).

Every operation gets generated requests, valid ones and deliberately invalid ones, sent
in-process through the WSGI app with a write token; every response must pass
schemathesis' checks (no 5xx, status code, content type, headers and body as the schema
documents them). Failures are collected, not stopped at, so the report shows all of them
with their counts.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.conf import settings as django_settings
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import override_settings
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import (
    negative_data_rejection,
    positive_data_acceptance,
)

from recommender.models import (
    Policy,
    RefreshRun,
    ResizeChange,
    StaticCoefficient,
    Workload,
)
from vpaweb.wsgi import application

# At least MIN_CASES cases over the whole schema, with a fixed seed (derandomize): each
# operation gets its share, two thirds valid and one third invalid
# (``examples_per_operation``), so the budget stays the same as operations are added.
# VPAWEB_SCHEMATHESIS_POSITIVE / _NEGATIVE set the examples per operation instead.
MIN_CASES = 2000
# The operations are split into this many tests (operation i in shard i % SHARDS), so
# pytest-xdist's workers share them; MIN_CASES holds for their sum, each shard its part.
# The shards in POSTGRES_SHARDS (marker ``on_postgres``) run in test-pg, the others in
# test-sqlite: each operation once per `make test`, and the two runs end closer
# together.
SHARDS = 4
POSTGRES_SHARDS = frozenset({2, 3})
# Operations whose bodies the schema can only sketch, and the input-strictness checks
# that would only restate it. rightsize and check take a YAML text of manifests (any
# string is "schema-valid"); a RecommendationQuery's pod is a Kubernetes pod spec whose
# rules (unique DNS-1123 container names, quantities such as "250Mi") the schema does
# not carry, so schema-valid pods can be refused. Their validation lives in the services
# and answers a 400 naming the field (test_rightsize.py, test_query_export_errors.py).
# Schema-invalid bodies must still be refused by both (negative_data_rejection runs for
# the query), and every response of theirs is checked against the schema like all
# others. A policy's container policies must name containers of that workload (or "*"),
# a rule of the stored workload that no schema can carry; PATCH policy's own tests
# (tests/api/test_commands.py) check each refusal names its field.
# A policy change that would more than double a target without confirm_large_increase
# is a 409 (test_policy_bounds.py).
SCHEMA_SKETCHES = {
    "POST /api/v1/rightsize": [positive_data_acceptance, negative_data_rejection],
    "POST /api/v1/check": [positive_data_acceptance, negative_data_rejection],
    "POST /api/v1/recommendation-query": [positive_data_acceptance],
    "PATCH /api/v1/workloads/{id}/policy": [positive_data_acceptance],
    # A what-if's profile_overrides are checked as the policy editor checks them: field
    # names and ranges of the chosen profile, which the schema leaves open.
    "POST /api/v1/workloads/{id}/what-if": [positive_data_acceptance],
    # A policy rule's selectors (Kubernetes syntax), cluster name and policy fields
    # are checked by the service as the policy editor checks them, which the schema
    # leaves open (tests/api/test_policy_rules.py checks each refusal names its field).
    "POST /api/v1/policy-rules/": [positive_data_acceptance],
    "PATCH /api/v1/policy-rules/{id}/": [positive_data_acceptance],
}


def examples_per_operation(operations: int) -> tuple[int, int]:
    """Valid and invalid examples per operation: MIN_CASES shared by ``operations``
    (or the environment's counts)."""
    each = -(-MIN_CASES // operations)
    negative = each // 3
    return (
        int(os.environ.get("VPAWEB_SCHEMATHESIS_POSITIVE", each - negative)),
        int(os.environ.get("VPAWEB_SCHEMATHESIS_NEGATIVE", negative)),
    )


@pytest.fixture
def in_process_wsgi() -> Iterator[None]:
    """Keep the test's database connection across WSGI requests, like the test client.

    The WSGI handler closes "obsolete" connections at each request's start and end, and
    a connection inside the test's transaction looks obsolete to it.
    """
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def fuzz_data(shop: Workload) -> None:
    """Rows the generated ids and names can land on."""
    Policy.objects.filter(workload=shop).update(mode=Policy.Mode.INITIAL)
    for pod in ("web-1", "web-2", "web-3"):
        ResizeChange.objects.create(workload=shop, pod=pod)
    RefreshRun.objects.create(cluster=shop.cluster, finished_at=timezone.now())
    StaticCoefficient.objects.create(namespace="", cpu_factor=0.7)


@pytest.mark.schemathesis
@pytest.mark.django_db
@pytest.mark.parametrize(
    "shard",
    [
        pytest.param(i, marks=[pytest.mark.on_postgres] if i in POSTGRES_SHARDS else [])
        for i in range(SHARDS)
    ],
)
def test_every_operation_conforms_to_the_schema(
    shard: int, fuzz_data: None, write_key: str, in_process_wsgi: None
) -> None:
    # Generous budget: the point here is conformance, throttling has its own test.
    rest = {
        **django_settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"api": "100000/min"},
    }
    with override_settings(REST_FRAMEWORK=rest):
        headers = {"Authorization": f"Bearer {write_key}"}
        schema = schemathesis.openapi.from_wsgi(
            "/api/v1/schema/", application, headers=headers
        )
        cases: Counter[str] = Counter()
        statuses: Counter[int] = Counter()
        failures: dict[str, list[str]] = {}

        operations = [result.ok() for result in schema.get_all_operations()]
        mine = operations[shard::SHARDS]
        positive, negative = examples_per_operation(len(operations))
        for operation in mine:
            skip = SCHEMA_SKETCHES.get(operation.label, [])
            for mode, examples in (
                (GenerationMode.POSITIVE, positive),
                (GenerationMode.NEGATIVE, negative),
            ):

                @given(case=operation.as_strategy(generation_mode=mode))
                @settings(
                    max_examples=examples,
                    deadline=None,
                    database=None,
                    derandomize=True,
                    suppress_health_check=list(HealthCheck),
                )
                # run() is called right below, within this iteration (so B023 is moot).
                def run(case: Any) -> None:
                    label = case.operation.label
                    cases[label] += 1
                    response = case.call(headers=headers)
                    statuses[response.status_code] += 1
                    try:
                        case.validate_response(
                            response,
                            headers=headers,
                            excluded_checks=skip,  # noqa: B023
                        )
                    except (Exception, BaseExceptionGroup) as exc:  # report all
                        failures.setdefault(label, []).append(
                            f"{mode} {response.status_code}: {str(exc)[:2000]}"  # noqa: B023
                        )

                run()

    total = sum(cases.values())
    server_errors = sum(n for code, n in statuses.items() if code >= 500)
    print(
        f"\nschemathesis: {total} cases over {len(cases)} operations; "
        f"statuses {dict(sorted(statuses.items()))}; server errors {server_errors}; "
        f"failed checks {sum(len(f) for f in failures.values())}"
    )
    assert not failures, "\n\n".join(
        f"{label}: {len(messages)} failures\n  " + "\n  ".join(messages[:2])
        for label, messages in failures.items()
    )
    assert server_errors == 0
    # This shard's part of MIN_CASES (its operations' share of every operation).
    assert total >= MIN_CASES * len(mine) / len(operations)
    assert len(cases) == len(mine)
