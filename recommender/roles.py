"""The three roles of vpaweb, kept as Django groups.

- viewer: reads everything;
- operator: also edits policies and approves or rejects resize changes;
- admin: also manages users, tokens and settings (a superuser is always an admin).

Roles are cumulative: an operator is also a viewer, an admin also an operator.
"""

from __future__ import annotations

from typing import Literal, cast

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group
from django.db import models


class Role(models.TextChoices):
    """Role names, ordered from least to most powerful."""

    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"


ROLE_ORDER = [Role.VIEWER, Role.OPERATOR, Role.ADMIN]


def ensure_role_groups() -> None:
    """Create the role groups if they are missing (idempotent)."""
    for role in ROLE_ORDER:
        Group.objects.get_or_create(name=role.value)


def role_of(user: AbstractBaseUser | AnonymousUser) -> Role | None:
    """The strongest role of ``user``; None if anonymous or without a role."""
    if not user.is_authenticated or not user.is_active:
        return None
    if getattr(user, "is_superuser", False):
        return Role.ADMIN
    # Cached on the user object: templates ask several times per page.
    cached = cast("Role | Literal[False] | None", getattr(user, "_vpaweb_role", False))
    if cached is not False:
        return cached
    # .all(), not values_list: a list of users with prefetch_related("groups") then
    # costs no query per user.
    names = {group.name for group in user.groups.all()}  # type: ignore[attr-defined]
    role = None
    for candidate in ROLE_ORDER:
        if candidate.value in names:
            role = candidate
    user._vpaweb_role = role  # type: ignore[attr-defined]
    return role


def has_role(user: AbstractBaseUser | AnonymousUser, role: Role) -> bool:
    """True when ``user`` holds ``role`` or a stronger one."""
    actual = role_of(user)
    return actual is not None and ROLE_ORDER.index(actual) >= ROLE_ORDER.index(role)


def grant_role(user: AbstractBaseUser, role: Role) -> None:
    """Give ``user`` exactly ``role`` (replacing any other role group)."""
    ensure_role_groups()
    groups = user.groups  # type: ignore[attr-defined]
    # Only what differs: each change of role groups revokes the user's credentials
    # (services/access/revocation.py), so giving a user the role they hold changes
    # nothing.
    held = set(groups.filter(name__in=[r.value for r in ROLE_ORDER]))
    target = Group.objects.get(name=role.value)
    if held - {target}:
        groups.remove(*(held - {target}))
    if target not in held:
        groups.add(target)
    if hasattr(user, "_vpaweb_role"):
        del user._vpaweb_role
