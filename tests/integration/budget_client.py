"""One client process of tests/integration/test_budgets.py: ``python -m
tests.integration.budget_client RATE TOKEN_ID ATTEMPTS START_AT``.

Waits until the Unix time START_AT (so every process starts at once), asks the API's
throttle ATTEMPTS times for token TOKEN_ID at RATE, and prints how many it allowed."""

from __future__ import annotations

import os
import sys
import time

import django


def main() -> None:
    rate, token_id, attempts, start_at = sys.argv[1:5]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "vpaweb.settings")
    django.setup()
    from django.test import RequestFactory
    from rest_framework.request import Request

    from recommender.api.auth import ApiRateThrottle
    from recommender.models import ApiToken

    request = Request(RequestFactory().get("/api/v1/clusters/"))
    request.auth = ApiToken(pk=int(token_id))  # what token authentication sets
    throttle = ApiRateThrottle()
    throttle.rate = rate
    throttle.num_requests, throttle.duration = throttle.parse_rate(rate)
    time.sleep(max(0.0, float(start_at) - time.time()))
    allowed = sum(throttle.allow_request(request, None) for _ in range(int(attempts)))
    print(allowed)


if __name__ == "__main__":
    main()
