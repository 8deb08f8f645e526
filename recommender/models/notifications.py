"""Notification channels: where digests of what needs people go (chat, webhooks)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class NotificationChannel(models.Model):
    """An incoming webhook an admin configured: Slack-compatible, Microsoft
    Teams-compatible or plain JSON, with the events it wants and filters by cluster,
    namespace and workload label. Its URL (a secret: whoever has it may post) is stored
    encrypted (``url_encrypted``, see services/operations/notifications.py) or read
    from the environment variable ``url_env``."""

    class Kind(models.TextChoices):
        SLACK = "slack", "Slack-compatible incoming webhook"
        TEAMS = "teams", "Microsoft Teams-compatible incoming webhook"
        WEBHOOK = "webhook", "Plain JSON webhook"

    class Event(models.TextChoices):
        PROPOSAL = "proposal", "New proposals awaiting approval"
        AT_RISK = "at_risk", "Workloads newly at risk (OOM kills)"
        CHANGE_FAILED = "change_failed", "Failed or refused changes"
        CLUSTER_FAILING = "cluster_failing", "A failing cluster"
        WEEKLY_DIGEST = "weekly_digest", "Weekly savings digest"

    name = models.SlugField(max_length=63, unique=True)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    url_encrypted = models.TextField(blank=True)
    url_env = models.CharField(
        max_length=128,
        blank=True,
        help_text="read the URL from this environment variable instead",
    )
    # Empty lists and mappings mean "all".
    events = models.JSONField(default=list, blank=True)
    clusters = models.JSONField(default=list, blank=True)
    namespaces = models.JSONField(default=list, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    min_interval_s = models.PositiveIntegerField(
        default=300, help_text="at most one message per this many seconds"
    )
    is_enabled = models.BooleanField(default=True)
    last_sent_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.name


class NotificationDelivery(models.Model):
    """An event a channel was told about: each event (its key) reaches a channel
    once."""

    channel = models.ForeignKey(
        NotificationChannel, on_delete=models.CASCADE, related_name="deliveries"
    )
    key = models.CharField(max_length=200)
    event = models.CharField(max_length=20)
    sent_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["channel", "key"], name="notification_once_per_channel"
            )
        ]

    def __str__(self) -> str:
        return f"{self.channel} {self.key}"
