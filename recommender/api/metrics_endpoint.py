"""``GET /metrics``: vpaweb's own metrics in Prometheus' text format, and ``GET
/metrics/recommendations``: the recommendations as series (docs/metrics.md).

Outside /api/ but here for the one error shape: both ask for
``Authorization: Bearer $VPAWEB_METRICS_TOKEN``; with no token configured they are off
(404), so nothing is exposed by accident. The recommendations are a separate endpoint
because their series grow with the fleet: Prometheus scrapes them on their own
interval, bounded by the query (``namespace``, ``top``), which a scrape config's
``params`` sets.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_safe
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from recommender.api.errors import error_body
from recommender.metrics import exposition, token_matches
from recommender.services.readmodels import recommendation_metrics


def _refusal(request: HttpRequest) -> HttpResponse | None:
    """404 with no token configured, 401 without the right one; else None."""
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
    return None


@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    """The process counters and the database gauges, for the bearer token only."""
    refused = _refusal(request)
    if refused is not None:
        return refused
    body, content_type = exposition(with_database=True)
    return HttpResponse(body, content_type=content_type)


@require_safe
def recommendations(request: HttpRequest) -> HttpResponse:
    """The recommendation series of ``namespace`` (repeatable or comma-separated;
    all when absent), at most ``top`` containers, for the bearer token only."""
    refused = _refusal(request)
    if refused is not None:
        return refused
    namespaces = tuple(
        name.strip()
        for value in request.GET.getlist("namespace")
        for name in value.split(",")
        if name.strip()
    )
    top_text = request.GET.get("top", str(recommendation_metrics.DEFAULT_TOP))
    limit = recommendation_metrics.MAX_TOP
    if not top_text.isdigit() or not 1 <= int(top_text) <= limit:
        message = f"top must be a whole number from 1 to {limit:,}"
        return JsonResponse(
            error_body("invalid", message, {"top": [message]}), status=400
        )
    bound = recommendation_metrics.Bound(namespaces=namespaces, top=int(top_text))
    body = recommendation_metrics.exposition(bound=bound, now=timezone.now())
    return HttpResponse(body, content_type=CONTENT_TYPE_PLAIN_0_0_4)
