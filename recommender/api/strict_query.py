"""Unknown query parameters are a 400 naming them, on every API operation.

The OpenAPI schema is the one list of what each operation takes: the parameters a view
declares (filter serializers, pagination, ``format``) are what drf-spectacular
documents, so the check reads them from the schema rather than from a second list that
could drift from it. A misspelled filter (``?namespac=web``) therefore never lists
everything; a new endpoint is strict as soon as it is in the schema."""
# The schema is generated once per process, on the first API request (about a second;
# gunicorn's master does it before forking, ``vpaweb/gunicorn_conf.py``). URLs that are
# not operations of the schema (the schema and docs pages, the JSON 404) are not
# checked.

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from recommender.api.errors import API_PREFIX, error_body

# (view function, method) → the query parameters its operation documents.
_Allowed = dict[tuple[Callable[..., Any], str], frozenset[str]]
_lock = threading.Lock()
_allowed: _Allowed | None = None


def allowed_query_parameters() -> _Allowed:
    """Each API operation's documented query parameters, keyed by the view function
    the URL resolver returns and the HTTP method (built once, then cached)."""
    global _allowed
    with _lock:
        if _allowed is None:
            # Imported here: the generator imports every view.
            from drf_spectacular.generators import SchemaGenerator

            # drf-spectacular is untyped: the generator is read as Any.
            generator: Any = SchemaGenerator()  # type: ignore[no-untyped-call]
            schema = generator.get_schema(request=None, public=True)
            allowed: _Allowed = {}
            for path, _regex, method, callback in generator.endpoints or []:
                # The schema's spelling of the path ({pk} becomes {id}).
                view = generator.create_view(callback, method)
                documented = generator.coerce_path(path, method, view)
                operation = schema["paths"].get(documented, {}).get(method.lower())
                if operation is None:
                    continue
                allowed[(callback, method.upper())] = frozenset(
                    parameter["name"]
                    for parameter in operation.get("parameters", [])
                    if parameter["in"] == "query"
                )
            _allowed = allowed
        return _allowed


def unknown_parameters_error(unknown: list[str], known: frozenset[str]) -> dict:
    """The 400 body naming each unknown parameter and what the operation takes."""
    takes = ", ".join(sorted(known)) if known else "no query parameters"
    message = f"unknown query parameter; this endpoint takes {takes}"
    return error_body(
        "invalid",
        f"{', '.join(unknown)}: {message}",
        {name: [message] for name in unknown},
    )


class StrictQueryMiddleware:
    """Answer 400 when an /api/ request carries a query parameter its operation does
    not document (OPTIONS and HEAD are checked as the GET they describe)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., Any],
        view_args: Any,
        view_kwargs: Any,
    ) -> HttpResponse | None:
        if not request.path.startswith(API_PREFIX) or not request.GET:
            return None
        method = "GET" if request.method in ("HEAD", "OPTIONS") else request.method
        known = allowed_query_parameters().get((view_func, str(method)))
        if known is None:
            return None  # not an operation of the schema (docs pages, the 404)
        unknown = sorted(name for name in request.GET if name not in known)
        if not unknown:
            return None
        return JsonResponse(unknown_parameters_error(unknown, known), status=400)
