"""Liveness and readiness endpoints: the only pages served without login. They answer
GET and HEAD (uptime monitors often send HEAD).

Readiness needs the database (every page and API call reads it): 503 without it. The
cache (Redis, when ``REDIS_URL`` is set) is checked too and named under
``checks.cache``; without it the pages and the API still answer (the rate limit is not
applied) but comparisons and what-ifs are refused with a 503, so the answer is 200 with
``status`` ``degraded``: taking every pod out of service would refuse everything.
"""

from __future__ import annotations

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_safe


@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    """The process is up."""
    return JsonResponse({"status": "ok"})


def _cache_check() -> str:
    """ "ok" when the shared cache answers, else its error."""
    try:
        cache.get("vpaweb:readyz")
    except Exception as exc:  # any client error means "away"
        return f"{type(exc).__name__}: {exc}"
    return "ok"


@require_safe
def readyz(request: HttpRequest) -> JsonResponse:
    """The process can serve: the database answers (and whether the cache does)."""
    checks: dict[str, str] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any driver error means "not ready"
        checks["database"] = str(exc)
    else:
        checks["database"] = "ok"
    if settings.REDIS_URL:
        checks["cache"] = _cache_check()
    if checks["database"] != "ok":
        return JsonResponse({"status": "unavailable", "checks": checks}, status=503)
    status = "ok" if all(v == "ok" for v in checks.values()) else "degraded"
    return JsonResponse({"status": status, "checks": checks})
