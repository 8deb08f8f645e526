"""Signals on the user model, so no path that changes an account can forget to revoke:
``pre_save`` compares the stored password hash, ``is_active`` and ``is_superuser`` with
the ones being saved; ``m2m_changed`` sees role groups added or removed; either calls
``services/access/revocation.revoke_credentials_of``. The Users page revokes first, so
its audit events name the admin; these handlers then find no token left and record
"system".
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, User
from django.db.models.signals import m2m_changed, post_save, pre_save

from recommender.roles import ROLE_ORDER
from recommender.services.access.revocation import revoke_credentials_of

# Set on the instance by pre_save, read by post_save: why its credentials end.
_REASON = "_vpaweb_credentials_reason"


def _changed(instance: User, update_fields: Any) -> str | None:
    fields = {"password", "is_active", "is_superuser"}
    if update_fields is not None:
        fields &= set(update_fields)
    if instance.pk is None or not fields:
        return None
    stored = (
        get_user_model()
        .objects.filter(pk=instance.pk)
        .values("password", "is_active", "is_superuser")
        .first()
    )
    if stored is None:
        return None
    if "password" in fields and stored["password"] != instance.password:
        return "new password"
    if "is_active" in fields and stored["is_active"] != instance.is_active:
        return "reactivated" if instance.is_active else "deactivated"
    if "is_superuser" in fields and stored["is_superuser"] != instance.is_superuser:
        return "new role"
    return None


def _before_user_save(
    sender: type, instance: User, update_fields: Any = None, **kwargs: Any
) -> None:
    if kwargs.get("raw"):
        return  # fixtures loading
    setattr(instance, _REASON, _changed(instance, update_fields))


def _after_user_save(
    sender: type, instance: User, created: bool, **kwargs: Any
) -> None:
    reason = instance.__dict__.pop(_REASON, None)
    if reason is not None and not created:
        revoke_credentials_of(user=instance, reason=reason)


def _role_groups_changed(
    sender: type,
    instance: Any,
    action: str,
    reverse: bool,
    pk_set: set[int] | None,
    **kwargs: Any,
) -> None:
    if action not in ("post_add", "post_remove", "pre_clear"):
        return
    role_names = [role.value for role in ROLE_ORDER]
    users: list[User]
    if not reverse:
        if action == "pre_clear":
            involved = instance.groups.filter(name__in=role_names).exists()
        else:
            involved = Group.objects.filter(
                pk__in=pk_set or (), name__in=role_names
            ).exists()
        users = [instance] if involved else []
    elif instance.name in role_names:
        model = get_user_model()
        if action == "pre_clear":
            users = list(model.objects.filter(groups=instance))
        else:
            users = list(model.objects.filter(pk__in=pk_set or ()))
    else:
        users = []
    for user in users:
        revoke_credentials_of(user=user, reason="new role")


def connect() -> None:
    """Connect the handlers (the app's ``ready``)."""
    user_model = get_user_model()
    pre_save.connect(_before_user_save, sender=user_model, dispatch_uid=__name__)
    post_save.connect(_after_user_save, sender=user_model, dispatch_uid=__name__)
    m2m_changed.connect(
        _role_groups_changed,
        sender=user_model.groups.through,
        dispatch_uid=__name__,
    )
