"""Liveness, readiness and metrics: the only pages served without login (/metrics asks
for its own bearer token)."""

from __future__ import annotations

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

from recommender.metrics import exposition, token_matches


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """The process is up."""
    return JsonResponse({"status": "ok"})


@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """The process can serve: the database answers."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any driver error means "not ready"
        return JsonResponse(
            {"status": "unavailable", "checks": {"database": str(exc)}}, status=503
        )
    return JsonResponse({"status": "ok", "checks": {"database": "ok"}})


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """vpaweb's own metrics in Prometheus' text format (docs/metrics.md).

    Asks for ``Authorization: Bearer $VPAWEB_METRICS_TOKEN``; with no token configured
    the endpoint is off (404), so nothing is exposed by accident.
    """
    from recommender.api.errors import error_body  # imports DRF: not at URLconf load

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
