"""Site-wide HTTP hardening that is not Django's own: the Content-Security-Policy
header, the client address for login throttling behind proxies, and one-line logs for
client errors."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse


class ContentSecurityPolicyMiddleware:
    """Send ``CONTENT_SECURITY_POLICY`` with every response that has none.

    The dashboard needs no inline script: its scripts (htmx, plotly, its own) are static
    files, so ``script-src 'self'`` holds. An empty setting sends no header.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        policy = settings.CONTENT_SECURITY_POLICY
        if policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = policy
        return response


def client_ip(request: HttpRequest) -> str:
    """The client's address for login throttling (django-axes' AXES_CLIENT_IP_CALLABLE).

    With ``VPAWEB_TRUSTED_PROXY_COUNT`` = N > 0 (N reverse proxies in front, each
    appending to X-Forwarded-For), the N-th address from the right of X-Forwarded-For;
    otherwise the peer address. Addresses further left are the client's own claim.
    """
    remote = str(request.META.get("REMOTE_ADDR") or "")
    count = settings.TRUSTED_PROXY_COUNT
    if count <= 0:
        return remote
    chain = [
        part.strip()
        for part in str(request.META.get("HTTP_X_FORWARDED_FOR") or "").split(",")
        if part.strip()
    ]
    return chain[-count] if len(chain) >= count else remote


class OneLineClientErrors(logging.Filter):
    """Log 4xx answers (403 above all) as one line: Django adds the traceback of the
    PermissionDenied it caught, which says nothing about a client's mistake."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Drop the traceback of records about client errors; keep the line."""
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and 400 <= status < 500:
            record.exc_info = None
            record.exc_text = None
            record.stack_info = None
        return True
