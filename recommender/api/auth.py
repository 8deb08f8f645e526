"""Who may call the API: token and session authentication, permissions, throttling.

Machines send ``Authorization: Bearer vpaweb_…`` (a read or write token); people use
their dashboard session in the browsable API. Read access needs a token of either scope
or the viewer role; changes (policies, approvals, coefficients) need a write token or
the operator role. Every view names its permission class explicitly.
"""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.utils import timezone
from redis.exceptions import RedisError
from rest_framework import authentication, exceptions, permissions, throttling
from rest_framework.request import Request
from rest_framework.settings import api_settings

from recommender.models import ApiToken
from recommender.roles import Role, has_role
from recommender.services.access import budgets
from recommender.services.access.tokens import authenticate_key

logger = logging.getLogger(__name__)

# Authorization header keywords accepted for tokens.
TOKEN_KEYWORDS = ("bearer", "token")


class TokenUser(AnonymousUser):
    """``request.user`` for a token: authenticated, but holding no dashboard role."""

    is_active = True  # type: ignore[assignment]  # AnonymousUser says Literal[False]

    def __init__(self, token: ApiToken) -> None:
        self.token = token
        self.username = token.actor_label  # type: ignore[assignment]

    def __str__(self) -> str:
        return self.token.actor_label

    @property
    def is_anonymous(self) -> bool:  # type: ignore[override]
        return False

    @property
    def is_authenticated(self) -> bool:  # type: ignore[override]
        return True


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer <key>`` (or ``Token <key>``) for machines."""

    def authenticate(self, request: Request) -> tuple[TokenUser, ApiToken] | None:
        """(user, token); None without a token header, 401 on a bad one."""
        header = authentication.get_authorization_header(request).split()
        if (
            not header
            or header[0].lower().decode(errors="replace") not in TOKEN_KEYWORDS
        ):
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(
                "the Authorization header must be 'Bearer <token>'"
            )
        try:
            key = header[1].decode()
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed(
                "the token is not valid text"
            ) from None
        token = authenticate_key(key=key, now=timezone.now())
        if token is None:
            raise exceptions.AuthenticationFailed(
                "the token is unknown, revoked, or its owner is deactivated"
            )
        return TokenUser(token), token

    def authenticate_header(self, request: Request) -> str:
        """Makes DRF answer 401 (not 403) without credentials."""
        return 'Bearer realm="vpaweb"'


def token_of(request: Request) -> ApiToken | None:
    """The API token of this request, or None for a session."""
    return request.auth if isinstance(request.auth, ApiToken) else None


def requester_of(request: Request) -> str:
    """Whose budgets a request takes from: the person behind it ("user-<id>": a
    session's user, a token's owner, so more tokens buy no more), "token-<id>" for a
    token made on the command line (no owner), or ""."""
    token = token_of(request)
    if token is not None:
        if token.created_by_id is not None:
            return f"user-{token.created_by_id}"
        return f"token-{token.pk}"
    if request.user and request.user.is_authenticated:
        return f"user-{request.user.pk}"
    return ""


def actor_of(request: Request) -> tuple[Any, str]:
    """(user, label) for audit events: a token acts as its creator, labelled."""
    token = token_of(request)
    if token is not None:
        return token.created_by, token.actor_label
    return request.user, request.user.get_username()


def token_may(token: ApiToken, role: Role) -> bool:
    """A token never has more rights than its owner has now (a token made on the command
    line, with no owner, has exactly its scope)."""
    return token.created_by is None or has_role(token.created_by, role)


class CanRead(permissions.BasePermission):
    """A token of any scope, or a signed-in viewer (or stronger)."""

    message = "reading needs an API token or the viewer role"

    def has_permission(self, request: Request, view: Any) -> bool:
        """Allow tokens and viewers."""
        token = token_of(request)
        if token is not None:
            return token_may(token, Role.VIEWER)
        return has_role(request.user, Role.VIEWER)


class CanWrite(permissions.BasePermission):
    """A write-scope token, or a signed-in operator (or admin)."""

    message = "this change needs a write-scope token or the operator role"

    def has_permission(self, request: Request, view: Any) -> bool:
        """Allow write tokens and operators."""
        token = token_of(request)
        if token is not None:
            return token.can_write and token_may(token, Role.OPERATOR)
        return has_role(request.user, Role.OPERATOR)


class CanReadOrWrite(permissions.BasePermission):
    """Reads (GET, HEAD, OPTIONS) as CanRead, anything else as CanWrite."""

    def has_permission(self, request: Request, view: Any) -> bool:
        """Safe methods need read access, the others write access."""
        check = CanRead() if request.method in permissions.SAFE_METHODS else CanWrite()
        self.message = check.message
        return check.has_permission(request, view)


class ApiRateThrottle(throttling.SimpleRateThrottle):
    """One request budget per token (per user for sessions, else per address), counted
    atomically across processes (``services/access/budgets.py``: a Redis INCR per
    window, not DRF's read-append-write history, which let concurrent clients through
    uncounted)."""

    scope = "api"
    retry_after_s = 0.0
    # Set by SimpleRateThrottle.__init__ from the rate (its stubs do not declare them).
    num_requests: int | None
    duration: int | None

    def allow_request(self, request: Request, view: Any) -> bool:
        """Take one request from the budget; False once it is spent this window.
        While the cache holding the budget (Redis) is away, allow the request and log
        it: an API that reads the database keeps answering instead of failing every
        request with a 500 (docs/security.md, "Faults")."""
        if self.rate is None or self.num_requests is None or self.duration is None:
            return True
        try:
            taken = budgets.take(
                key=self.get_cache_key(request, view),
                limit=self.num_requests,
                period_s=self.duration,
                now=self.timer(),
            )
        except RedisError as exc:
            logger.warning("API rate limit not applied: its cache is away: %s", exc)
            return True
        self.retry_after_s = taken.retry_after_s
        return taken.is_allowed

    def wait(self) -> float:
        """Seconds until the budget's window ends (DRF's Retry-After)."""
        return max(1.0, self.retry_after_s)

    def get_rate(self) -> str | None:
        """Read the rate per request, so changed settings (and tests) take effect."""
        rate = api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)
        return None if rate is None else str(rate)

    def get_cache_key(self, request: Request, view: Any) -> str:
        """Key by token id, user id or client address."""
        ident = requester_of(request) or f"addr-{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}
