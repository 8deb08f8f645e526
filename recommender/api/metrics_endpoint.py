"""``GET /metrics``: vpaweb's own metrics in Prometheus' text format (docs/metrics.md).

Outside /api/ but here for the one error shape: it asks for
``Authorization: Bearer $VPAWEB_METRICS_TOKEN``; with no token configured the endpoint
is off (404), so nothing is exposed by accident.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_safe

from recommender.api.errors import error_body
from recommender.metrics import exposition, token_matches


@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    """The process counters and the database gauges, for the bearer token only."""
    expected = settings.METRICS_TOKEN
    if not expected:
        return JsonResponse(
            error_body("not_found", "/metrics is off: set VPAWEB_METRICS_TOKEN"),
            status=404,
        )
    if not token_matches(expected, request.headers):
        response = JsonResponse(
            error_body("not_authenticated", "/metrics needs its bearer token"),
            status=401,
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    body, content_type = exposition(with_database=True)
    return HttpResponse(body, content_type=content_type)
