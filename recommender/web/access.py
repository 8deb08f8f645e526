"""Role checks of dashboard views: every view names the least role it needs."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

from recommender.roles import Role, has_role

View = Callable[..., HttpResponse]


def require_role(role: Role) -> Callable[[View], View]:
    """Send anonymous users to log in; refuse users below ``role`` with 403."""

    def decorator(view: View) -> View:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not has_role(request.user, role):
                raise PermissionDenied(f"this page needs the {role.value} role")
            return view(request, *args, **kwargs)

        # The URLconf test reads this to prove every dashboard view checks a role.
        wrapped.required_role = role  # type: ignore[attr-defined]
        return wrapped

    return decorator


def is_htmx(request: HttpRequest) -> bool:
    """True for htmx requests, which get a partial instead of the whole page."""
    return request.headers.get("HX-Request") == "true"
