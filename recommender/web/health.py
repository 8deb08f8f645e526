"""Liveness and readiness endpoints: the only pages served without login. They answer
GET and HEAD (uptime monitors often send HEAD)."""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_safe


@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    """The process is up."""
    return JsonResponse({"status": "ok"})


@require_safe
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
