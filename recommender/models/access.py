"""Who did what: the audit trail and API tokens.

Resource amounts are stored as upstream VPA keeps them: CPU in integer millicores,
memory in integer bytes; ``None`` means "not set".
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from recommender.models.fleet import Workload


class AuditEvent(models.Model):
    """Who did what, when, with the state before and after (services/access/audit)."""

    class Action(models.TextChoices):
        """Every audited action, named ``<object>.<verb>``."""

        POLICY_UPDATE = "policy.update"
        POLICY_IMPORT = "policy.import"
        POLICY_ADOPT = "policy.adopt"
        POLICY_RULE_SAVE = "policy_rule.save"
        POLICY_RULE_DELETE = "policy_rule.delete"
        CHANGE_APPROVE = "change.approve"
        CHANGE_REJECT = "change.reject"
        CHANGE_WITHDRAW = "change.withdraw"
        # The updater's transitions (services/actuation/workflow.py).
        CHANGE_PROPOSE = "change.propose"
        # A startup-boosted pod shrunk in place (services/actuation/boost.py).
        POD_UNBOOST = "pod.unboost"
        CHANGE_APPLY = "change.apply"
        CHANGE_APPLIED = "change.applied"
        CHANGE_FAIL = "change.fail"
        CHANGE_EXPIRE = "change.expire"
        CHANGE_SUPERSEDE = "change.supersede"
        UPDATER_KILL_SWITCH = "updater.kill_switch"
        UPDATER_PAUSE = "updater.pause"
        CLUSTER_ACTUATION = "cluster.actuation"
        TOKEN_CREATE = "token.create"
        TOKEN_REVOKE = "token.revoke"
        USER_CREATE = "user.create"
        USER_ROLE = "user.role"
        USER_ACTIVE = "user.active"
        USER_PASSWORD = "user.password"
        COEFFICIENT_UPDATE = "coefficient.update"

    created_at = models.DateTimeField(default=timezone.now)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    # The actor as shown (user name, "token:<name>" or "system"), kept if the user goes.
    actor_label = models.CharField(max_length=200, default="system")
    action = models.CharField(max_length=64)
    workload = models.ForeignKey(
        Workload,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="audit_events",
    )
    object_type = models.CharField(max_length=64, blank=True)
    object_id = models.CharField(max_length=64, blank=True)
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)
    message = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # The audit page lists newest first, filtered by action.
            models.Index(fields=["action", "-created_at"], name="audit_action_time"),
        ]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor_label} {self.action}"


class ApiToken(models.Model):
    """A machine credential for the REST API, read or write; only its hash is stored."""

    class Scope(models.TextChoices):
        READ = "read", "Read"
        WRITE = "write", "Write (change policies, approve or reject changes)"

    name = models.CharField(max_length=100)
    scope = models.CharField(max_length=10, choices=Scope.choices, default=Scope.READ)
    # The first characters of the key, so people can tell tokens apart in lists.
    key_prefix = models.CharField(max_length=16)
    # SHA-256 hex of the whole key: looked up on every API request with a token.
    key_hash = models.CharField(max_length=64, unique=True)
    # The owner: the token acts for this user and never has more rights than they have
    # now; deleting the user deletes their tokens. None = made on the command line.
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
    )
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name", "-created_at"]
        constraints = [
            # A name may be reused once the old token is revoked.
            models.UniqueConstraint(
                fields=["name"],
                condition=models.Q(revoked_at__isnull=True),
                name="api_token_active_name",
            )
        ]

    def __str__(self) -> str:
        return f"token {self.name} ({self.scope})"

    @property
    def is_active(self) -> bool:
        """True until the token is revoked."""
        return self.revoked_at is None

    @property
    def can_write(self) -> bool:
        """Write tokens may change policies and approve or reject changes."""
        return self.scope == self.Scope.WRITE

    @property
    def actor_label(self) -> str:
        """How the token appears in the audit log."""
        return f"token:{self.name}"
