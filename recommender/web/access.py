"""Role checks of dashboard views: every view names the least role it needs.

Also who may create and revoke which API tokens on the tokens page.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.models import User
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

from recommender.models import ApiToken
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


def acting_user(request: HttpRequest) -> User:
    """The signed-in user a view acts for (every dashboard view requires a role)."""
    user = request.user
    if not isinstance(user, User):
        raise PermissionDenied("sign in first")
    return user


def is_htmx(request: HttpRequest) -> bool:
    """True for htmx requests, which get a partial instead of the whole page."""
    return request.headers.get("HX-Request") == "true"


def token_scopes_for(user: Any) -> list[str]:
    """The API token scopes ``user`` may create.

    A token acts for the user who created it, so it never gets more than that user's
    role gives a session: viewers read (read tokens), operators and admins also write.
    """
    if has_role(user, Role.OPERATOR):
        return [ApiToken.Scope.READ, ApiToken.Scope.WRITE]
    if has_role(user, Role.VIEWER):
        return [ApiToken.Scope.READ]
    return []


def may_revoke_token(user: Any, token: ApiToken) -> bool:
    """Admins revoke any token; everyone else only the tokens they created."""
    if has_role(user, Role.ADMIN):
        return True
    return (
        has_role(user, Role.VIEWER)
        and token.created_by_id is not None
        and token.created_by_id == user.pk
    )
