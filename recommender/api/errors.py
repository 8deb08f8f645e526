"""The one error shape of the API, produced in exactly one place.

Every error under /api/ looks like::

    {"error": {"code": "invalid", "message": "mode: must be one of …",
               "fields": {"mode": ["must be one of …"]}}}"""
# ``exception_handler`` maps ``recommender.errors`` and DRF/Django exceptions (DRF calls
# it for every API view); ``not_found`` and ``server_error`` give the same shape for
# /api/ URLs that no view matched and for crashes outside DRF. No stack trace ever
# reaches a client: unexpected exceptions are logged here with the request path and
# answered with a generic 500.

from __future__ import annotations

import logging
import sys
from typing import Any

from django.core.exceptions import (
    DisallowedHost,
    RequestDataTooBig,
    SuspiciousOperation,
)
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.urls import Resolver404, resolve
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, status
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import set_rollback

from recommender import errors

logger = logging.getLogger(__name__)

API_PREFIX = "/api/"
# The URL name of the catch-all route at the end of recommender/api/urls.py.
CATCH_ALL_NAME = "api-not-found"

# recommender.errors → HTTP status: the only place this mapping exists.
STATUS_OF_ERROR: dict[type[errors.VpawebError], int] = {
    errors.NotFound: status.HTTP_404_NOT_FOUND,
    errors.InvalidInput: status.HTTP_400_BAD_REQUEST,
    errors.Conflict: status.HTTP_409_CONFLICT,
    errors.Forbidden: status.HTTP_403_FORBIDDEN,
    errors.Throttled: status.HTTP_429_TOO_MANY_REQUESTS,
    errors.SourceUnavailable: status.HTTP_503_SERVICE_UNAVAILABLE,
    errors.TooLarge: status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
}
# DRF's default codes, renamed where ours are clearer.
DRF_CODES = {
    "parse_error": "malformed",
    "not_authenticated": "not_authenticated",
    "authentication_failed": "authentication_failed",
    "permission_denied": "permission_denied",
    "not_found": "not_found",
    "method_not_allowed": "method_not_allowed",
    "not_acceptable": "not_acceptable",
    "unsupported_media_type": "unsupported_media_type",
    "throttled": "throttled",
}


# When a client should try again after a database outage (seconds): about how long a
# PostgreSQL restart or a failover takes.
DATABASE_RETRY_AFTER_S = 10
DATABASE_UNAVAILABLE_MESSAGE = (
    "the database is unavailable; nothing was changed, retry later"
)
DATABASE_UNAVAILABLE_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Database unavailable</title></head>
<body><h1>Database unavailable</h1>
<p>vpaweb cannot reach its database just now. Nothing was changed; try again in a
minute.</p></body></html>
"""


def is_database_outage(exc: BaseException | None) -> bool:
    """Whether ``exc`` is a lost or refused database connection (psycopg and sqlite3
    raise these as Django's ``OperationalError`` or ``InterfaceError``)."""
    return isinstance(exc, OperationalError | InterfaceError)


def database_unavailable(request: HttpRequest, exc: BaseException) -> HttpResponse:
    """503 with Retry-After: the error shape under /api/, a plain page elsewhere."""
    logger.warning(
        "database unavailable: %s %s: %s: %s",
        request.method,
        request.path,
        type(exc).__name__,
        str(exc).strip().splitlines()[0] if str(exc).strip() else "",
    )
    response: HttpResponse
    if request.path.startswith(API_PREFIX):
        response = JsonResponse(
            error_body("database_unavailable", DATABASE_UNAVAILABLE_MESSAGE), status=503
        )
    else:
        response = HttpResponse(DATABASE_UNAVAILABLE_PAGE, status=503)
    response["Retry-After"] = str(DATABASE_RETRY_AFTER_S)
    # Logged above in one line: not again as an error with a traceback per request.
    response._has_been_logged = True  # type: ignore[attr-defined]
    return response


class RequestDeadlineExceeded(Exception):
    """The request ran past ``VPAWEB_REQUEST_DEADLINE_S`` (api/deadline.py)."""

    def __init__(self, seconds: float) -> None:
        self.message = (
            f"the request was stopped after {seconds:g} s "
            "(VPAWEB_REQUEST_DEADLINE_S) and nothing it did was kept; "
            "send less at once or retry later"
        )
        super().__init__(self.message)


def error_body(
    code: str, message: str, fields: dict[str, list[str]] | None = None
) -> dict:
    """The error shape; ``fields`` is always there (``{}`` when no field is named)."""
    return {"error": {"code": code, "message": message, "fields": dict(fields or {})}}


def _flatten(detail: Any, prefix: str, out: dict[str, list[str]]) -> None:
    """DRF's nested ValidationError detail as ``{"a.b[0].c": ["message"]}``."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = str(key)
            if name in ("non_field_errors", "detail"):
                _flatten(value, prefix, out)
            else:
                _flatten(value, f"{prefix}.{name}" if prefix else name, out)
    elif isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            out.setdefault(prefix or "body", []).extend(str(item) for item in detail)
        else:
            for index, item in enumerate(detail):
                _flatten(item, f"{prefix}[{index}]", out)
    else:
        out.setdefault(prefix or "body", []).append(str(detail))


def _validation_body(exc: exceptions.ValidationError) -> dict:
    fields: dict[str, list[str]] = {}
    _flatten(exc.detail, "", fields)
    fields = {name: messages for name, messages in fields.items() if messages}
    if fields:
        name, messages = next(iter(fields.items()))
        message = messages[0] if name == "body" else f"{name}: {messages[0]}"
    else:
        message = "invalid input"
    return error_body("invalid", message, fields)


def _api_exception_body(exc: exceptions.APIException) -> dict:
    if isinstance(exc, exceptions.ValidationError):
        return _validation_body(exc)
    codes = exc.get_codes()
    code = codes if isinstance(codes, str) else exc.default_code
    detail = exc.detail
    message = (
        str(detail) if not isinstance(detail, dict | list) else str(exc.default_detail)
    )
    code = DRF_CODES.get(code, code)
    # A body that could not be read is the body's fault: name it as the field.
    fields = (
        {"body": [message]} if code in ("malformed", "unsupported_media_type") else {}
    )
    return error_body(code, message, fields)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF's EXCEPTION_HANDLER: every API error as the one error shape."""
    headers: dict[str, str] = {}
    if isinstance(exc, errors.VpawebError):
        code = STATUS_OF_ERROR.get(type(exc), status.HTTP_400_BAD_REQUEST)
        for cls, mapped in STATUS_OF_ERROR.items():
            if isinstance(exc, cls):
                code = mapped
        body = error_body(exc.code, exc.message, exc.fields)
        status_code = code
        if isinstance(exc, errors.Throttled | errors.Busy):
            headers["Retry-After"] = str(max(1, round(exc.retry_after_s)))
    elif isinstance(exc, RequestDataTooBig):
        message = str(exc) or "the request body is too large"
        body = error_body("too_large", message, {"body": [message]})
        status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    elif isinstance(exc, RequestDeadlineExceeded):
        logger.warning(
            "request deadline passed: %s %s",
            getattr(context.get("request"), "method", "?"),
            getattr(context.get("request"), "path", "?"),
        )
        body = error_body("timeout", exc.message)
        status_code = status.HTTP_503_SERVICE_UNAVAILABLE
        headers["Retry-After"] = "5"
    elif is_database_outage(exc):
        logger.warning(
            "database unavailable: %s %s: %s",
            getattr(context.get("request"), "method", "?"),
            getattr(context.get("request"), "path", "?"),
            type(exc).__name__,
        )
        body = error_body("database_unavailable", DATABASE_UNAVAILABLE_MESSAGE)
        status_code = status.HTTP_503_SERVICE_UNAVAILABLE
        headers["Retry-After"] = str(DATABASE_RETRY_AFTER_S)
    elif isinstance(exc, SuspiciousOperation):
        # Too many form fields, a malformed multipart body, and the like: the client's
        # fault, said in one line (Django would log a traceback and answer 400 HTML).
        message = str(exc) or "the request is malformed"
        body = error_body("malformed", message, {"body": [message]})
        status_code = status.HTTP_400_BAD_REQUEST
    else:
        if isinstance(exc, Http404):
            exc = exceptions.NotFound(str(exc) or "not found")
        elif isinstance(exc, DjangoPermissionDenied):
            exc = exceptions.PermissionDenied(str(exc) or None)
        if isinstance(exc, exceptions.APIException):
            if getattr(exc, "auth_header", None):
                headers["WWW-Authenticate"] = exc.auth_header  # type: ignore[attr-defined]
            if getattr(exc, "wait", None):
                headers["Retry-After"] = str(int(exc.wait))  # type: ignore[attr-defined]
            body = _api_exception_body(exc)
            status_code = exc.status_code
        else:
            request = context.get("request")
            logger.exception(
                "unhandled error in API view %s %s",
                getattr(request, "method", "?"),
                getattr(request, "path", "?"),
            )
            body = error_body(
                "server_error", "internal server error; it has been logged"
            )
            status_code = status.HTTP_500_INTERNAL_SERVER_ERROR
    set_rollback()
    request = context.get("request")
    if isinstance(exc, errors.Busy):
        logger.warning(
            "busy: %s %s: %s",
            getattr(request, "method", "?"),
            getattr(request, "path", "?"),
            exc.message,
        )
    renderer = getattr(request, "accepted_renderer", None)
    if request is not None and not isinstance(
        renderer, JSONRenderer | BrowsableAPIRenderer
    ):
        # Errors are JSON even when the client asked for CSV, YAML or manifests.
        request.accepted_renderer = JSONRenderer()
        request.accepted_media_type = "application/json"
    response = Response(body, status=status_code, headers=headers)
    if isinstance(exc, errors.Busy) or is_database_outage(exc):
        # An expected overload or outage, logged above in one line: not again by
        # Django as a server error per refused request.
        response._has_been_logged = True  # type: ignore[attr-defined]
    return response


@csrf_exempt  # refused before any view: no CSRF token to check
def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """400 for a request Django refused before any view (a Host header the server
    does not answer to, a malformed multipart body): the error shape under /api/,
    Django's page elsewhere (handler400)."""
    if not request.path.startswith(API_PREFIX):
        return defaults.bad_request(request, exception)
    if isinstance(exception, DisallowedHost):
        message = "the Host header names no host this server answers to"
    else:
        message = "the request was refused before reaching the API"
    return JsonResponse(error_body("invalid", message, {}), status=400)


@csrf_exempt  # a 404 is a 404, also for a POST without a CSRF token
def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """404 for an /api/ URL no view matched; Django's page elsewhere (handler404)."""
    if not request.path.startswith(API_PREFIX):
        return defaults.page_not_found(request, exception)
    message = f"no API endpoint at {request.path}"
    if not request.path.endswith("/"):
        try:
            match = resolve(request.path + "/")
        except Resolver404:
            match = None
        if match is not None and match.url_name != CATCH_ALL_NAME:
            message += f"; did you mean {request.path}/ ?"
    return JsonResponse(error_body("not_found", message), status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    """500 outside DRF views: JSON under /api/, Django's page elsewhere (handler500);
    503 when the exception being handled is a database outage."""
    exc = sys.exc_info()[1]
    if is_database_outage(exc):
        assert exc is not None
        return database_unavailable(request, exc)
    if not request.path.startswith(API_PREFIX):
        return defaults.server_error(request)
    return JsonResponse(
        error_body("server_error", "internal server error; it has been logged"),
        status=500,
    )
