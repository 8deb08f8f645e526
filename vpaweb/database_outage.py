"""A database outage is a 503 with ``Retry-After``, not a 500 per request: the API
answers in its one error shape (code ``database_unavailable``), pages with a plain
"database unavailable" page.

``DatabaseUnavailableMiddleware`` catches Django's ``OperationalError`` and
``InterfaceError`` from views; DRF's views answer through the API's exception handler
and errors raised in other middleware (a session saved after the view) through
``handler500``, which both call ``database_unavailable`` below. Django closes the broken
connection at the end of the request, so the first request after the database's
return opens a new one.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from recommender.api.errors import database_unavailable, is_database_outage


class DatabaseUnavailableMiddleware:
    """Answer a view's lost or refused database connection with 503."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(
        self, request: HttpRequest, exception: Exception
    ) -> HttpResponse | None:
        """The 503 for an outage; anything else goes on to Django's handling."""
        if not is_database_outage(exception):
            return None
        return database_unavailable(request, exception)
