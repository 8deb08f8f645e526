"""What vpaweb does to clusters: resize changes, the updater's lock, the kill switch,
the simulated pods' state and the admission counters.

Resource amounts are stored as upstream VPA keeps them: CPU in integer millicores,
memory in integer bytes; ``None`` means "not set".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone

from recommender.models.access import AuditEvent
from recommender.models.fleet import Cluster, Workload


class ResizeChangeStatus(models.TextChoices):
    """Where a ResizeChange is (``ResizeChange.Status``)."""

    PROPOSED = "proposed"
    APPROVED = "approved"
    # The updater is writing it to the cluster (set and cleared by the updater).
    APPLYING = "applying"
    REJECTED = "rejected"
    APPLIED = "applied"
    FAILED = "failed"
    # A pod gone (or replaced) before the change was applied.
    EXPIRED = "expired"
    # A newer recommendation (or none needed any more) replaced it before it applied.
    SUPERSEDED = "superseded"


# THE open statuses of a resize change (``ResizeChange.OPEN_STATUSES``): not yet
# decided, or decided and not yet done. The database holds at most one open change per
# pod (ResizeChange's constraint is built from this tuple); a new status that is still
# "open" is added here, and makemigrations moves the constraint with it.
OPEN_RESIZE_STATUSES: tuple[str, ...] = (
    ResizeChangeStatus.PROPOSED,
    ResizeChangeStatus.APPROVED,
    ResizeChangeStatus.APPLYING,
)


# Who moves a resize change: an operator (a person, or an API token acting as its
# owner) decides; the updater applies, verifies, retries and closes.
OPERATOR = "operator"
UPDATER = "updater"

# THE life of a resize change: every move (from, to) it may make and who makes it.
# ``ResizeChange.transition`` is the one way a status changes and refuses any move not
# listed here::
#
#     proposed ──approve──▶ approved ──apply──▶ applying ──verify──▶ applied
#        │  ▲  (automatic)    │  ▲                 │  └──refused, not verified──▶ failed
#        │  └─needs operator──┘  └──try later, fall back to eviction, recovery──┘
#        ├──reject──▶ rejected ◀──reject, withdraw── approved
#        ├──supersede──▶ superseded ◀── approved   (a newer recommendation)
#        └──expire──▶ expired ◀── approved, applying (the pod is gone)
_S = ResizeChangeStatus
RESIZE_TRANSITIONS: dict[tuple[str, str], str] = {
    (_S.PROPOSED, _S.APPROVED): OPERATOR,
    (_S.PROPOSED, _S.REJECTED): OPERATOR,
    # Rejected before the updater took it, or withdrawn: the workload went Off.
    (_S.APPROVED, _S.REJECTED): OPERATOR,
    # Its last replacement pod could not be scheduled: an operator decides again.
    (_S.APPROVED, _S.PROPOSED): UPDATER,
    (_S.APPROVED, _S.APPLYING): UPDATER,
    (_S.APPLYING, _S.APPROVED): UPDATER,
    (_S.APPLYING, _S.APPLIED): UPDATER,
    (_S.APPLYING, _S.FAILED): UPDATER,
    (_S.PROPOSED, _S.EXPIRED): UPDATER,
    (_S.APPROVED, _S.EXPIRED): UPDATER,
    (_S.APPLYING, _S.EXPIRED): UPDATER,
    (_S.PROPOSED, _S.SUPERSEDED): UPDATER,
    (_S.APPROVED, _S.SUPERSEDED): UPDATER,
}


class ResizeChange(models.Model):
    """A proposed resize of a pod's containers: an operator decides, updater applies."""

    Status = ResizeChangeStatus
    OPEN_STATUSES = OPEN_RESIZE_STATUSES
    TRANSITIONS = RESIZE_TRANSITIONS

    class Snooze(models.TextChoices):
        """How long an operator's rejection holds back new proposals of the same
        resize for the workload's containers (docs/updater.md "Rejections stick")."""

        DAY = "1d", "1 day"
        WEEK = "7d", "7 days"
        UNTIL_CHANGED = "until_changed", "until the recommendation changes"

    class Method(models.TextChoices):
        IN_PLACE = "in-place"
        EVICTION = "eviction"

    workload = models.ForeignKey(
        Workload, on_delete=models.CASCADE, related_name="changes"
    )
    pod = models.CharField(max_length=253)
    method = models.CharField(
        max_length=20, choices=Method.choices, default=Method.IN_PLACE
    )
    status = models.CharField(
        max_length=20, choices=Status.choices, default=Status.PROPOSED
    )
    # {"<container>": {"requests": {"cpu": m, "memory": b}, "limits": {...}}}
    resources_before = models.JSONField(default=dict)
    resources_after = models.JSONField(default=dict)
    reason = models.TextField(blank=True)
    priority = models.FloatField(default=0.0)
    created_at = models.DateTimeField(default=timezone.now)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    # Who decided as shown: a user's name, a token's label ("token:<name>") when the
    # token has no owner, "policy (automatic approval)".
    decided_by_label = models.CharField(max_length=200, blank=True)
    # A rejection's snooze ("" for a withdrawal, which holds nothing back) and when it
    # ends (None: only when the recommendation leaves the rejected change's band).
    snooze = models.CharField(max_length=16, choices=Snooze.choices, blank=True)
    snoozed_until = models.DateTimeField(null=True, blank=True)
    applied_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    # The pod's uid when proposed: a pod recreated under the same name is another pod.
    pod_uid = models.CharField(max_length=64, blank=True)
    # Manual or automatic, copied from the policy when proposed.
    approval = models.CharField(max_length=10, default="manual")
    updated_at = models.DateTimeField(default=timezone.now)
    # Apply attempts, and "try later" answers (a PDB's 429, a deferred resize).
    attempts = models.PositiveIntegerField(default=0)
    try_later_count = models.PositiveIntegerField(default=0)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    # When the updater's write for the current attempt was answered (None while
    # applying: the process died between "applying" and its write, or is writing).
    written_at = models.DateTimeField(null=True, blank=True)
    # When the in-place resize was first seen Deferred / in progress (fallback clocks).
    resize_pending_since = models.DateTimeField(null=True, blank=True)
    resize_in_progress_since = models.DateTimeField(null=True, blank=True)
    # The pod's metadata.generation the in-place resize's answer carried: the kubelet
    # has acted on the resize once status.observedGeneration reaches it, and a resize
    # condition written for an older generation is not this resize's.
    written_generation = models.BigIntegerField(null=True, blank=True)
    # The changed containers' restart count and container ID when the write was
    # answered ({"<container>": {"restarts": n, "id": "containerd://…"}}): a resize is
    # verified only if the container runs with the same ones (no restart since).
    written_state = models.JSONField(default=dict, blank=True)
    verified_at = models.DateTimeField(null=True, blank=True)
    # Set at verification: the requests the change removed from the pod, summed over
    # its containers, {"cpu_millicores": m, "memory_bytes": b} (negative: added); the
    # realized savings (services/readmodels/realized.py).
    requests_removed = models.JSONField(default=dict, blank=True)
    # What the pod (or its replacement) carried when last looked at, same shape.
    observed = models.JSONField(default=dict, blank=True)
    # Coordinated HPA mode: the HPA target changes that go with this resize, one
    # per metric: [{"hpa", "index", "path", "resource", "container", "before",
    # "after"}] (MetricTargets as autoscaling/v2 writes them; before == after: the
    # HPA is already where this pod's resize brings it), and where they stand
    # (``HpaState``).
    hpa_changes = models.JSONField(default=list, blank=True)
    # The revert of an eviction whose replacement could not be scheduled: when it was
    # decided (from then on the webhook admits the workload's pods with
    # ``resources_before`` while its recommendation stays in this change's band), the
    # replacement stuck Pending, and when that replacement was evicted (once) so its
    # controller recreates it with them (services/actuation/revert.py).
    reverted_at = models.DateTimeField(null=True, blank=True)
    revert_pod = models.CharField(max_length=253, blank=True, default="")
    revert_evicted_at = models.DateTimeField(null=True, blank=True)

    class HpaState(models.TextChoices):
        NONE = "", "no HPA change"
        PATCHED = "patched", "HPA patched"
        REVERTED = "reverted", "HPA set back"
        REVERT_FAILED = "revert_failed", "HPA could not be set back"

    hpa_state = models.CharField(
        max_length=16, choices=HpaState.choices, blank=True, default=""
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["workload", "status"], name="change_workload_status"),
            models.Index(fields=["status", "-created_at"], name="change_status_time"),
        ]
        constraints = [
            # At most one open change per pod: a second proposal for the same pod
            # while one is open is an IntegrityError, not a race the updater loses.
            models.UniqueConstraint(
                fields=["workload", "pod"],
                condition=models.Q(status__in=OPEN_RESIZE_STATUSES),
                name="resize_change_one_open_per_pod",
            )
        ]

    def __str__(self) -> str:
        return f"resize {self.workload}/{self.pod}: {self.status}"

    @property
    def is_open(self) -> bool:
        """True while the change is proposed, approved or being applied."""
        return self.status in self.OPEN_STATUSES

    def transition(
        self,
        *,
        to: str,
        allowed_from: Iterable[str],
        by: str,
        now: datetime,
        action: str,
        message: str,
        actor: Any = None,
        actor_label: str = "",
        after: Mapping[str, Any] | None = None,
        where: Q | None = None,
        **fields: Any,
    ) -> bool:
        """Move this change to ``to`` if its row is still in one of ``allowed_from``
        (and matches ``where``), storing ``fields`` in the same ``UPDATE``, and store
        its audit event (``after`` adds to its "after" state); the row count says
        whether this caller won (False: nothing written). On success the instance is
        updated too. A move ``RESIZE_TRANSITIONS`` does not give to ``by`` raises
        ValueError."""
        allowed = tuple(allowed_from)
        illegal = sorted(
            str(found) for found in allowed if RESIZE_TRANSITIONS.get((found, to)) != by
        )
        if not allowed or illegal:
            raise ValueError(
                f"a resize change cannot go from {' or '.join(illegal) or 'nowhere'} "
                f"to {to} by the {by}"
            )
        if "status" in fields:
            raise ValueError("fields cannot set the status: pass to=")
        before = self.status
        # No savepoint of its own: callers already hold a transaction, and the
        # audit row stands or falls with the update.
        with transaction.atomic(savepoint=False):
            rows = ResizeChange.objects.filter(pk=self.pk, status__in=allowed)
            if where is not None:
                rows = rows.filter(where)
            if rows.update(status=to, **fields) != 1:
                return False
            AuditEvent(
                created_at=now,
                actor=actor,
                actor_label=actor_label,
                action=action,
                workload_id=self.workload_id,
                object_type="resize_change",
                object_id=str(self.pk),
                before={"status": before},
                after={"status": to, **(after or {})},
                message=message,
            ).save(force_insert=True)
        self.status = to
        for name, value in fields.items():
            setattr(self, name, value)
        return True


class UpdaterLock(models.Model):
    """Which worker runs a cluster's updater (a database lease; docs/updater.md)."""

    cluster = models.OneToOneField(
        Cluster, on_delete=models.CASCADE, related_name="updater_lock"
    )
    holder = models.CharField(max_length=200, blank=True)
    acquired_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"updater lock {self.cluster}: {self.holder or '(free)'}"


class ActuationControl(models.Model):
    """The global kill switch for cluster writes (one row; the admin toggles it)."""

    writes_stopped = models.BooleanField(default=False)
    reason = models.TextField(blank=True)
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        verbose_name = "actuation kill switch"

    def __str__(self) -> str:
        return "cluster writes stopped" if self.writes_stopped else "writes allowed"


_UNREAD = ActuationControl()


def kill_switch_reason(row: ActuationControl | None = _UNREAD) -> str | None:
    """Why every cluster write is stopped (and the webhook leaves new pods as they
    are), or None (``row``: already read)."""
    if settings.UPDATER_KILL_SWITCH:
        return "the kill switch VPAWEB_UPDATER_KILL_SWITCH is on"
    control = ActuationControl.objects.first() if row is _UNREAD else row
    if control is not None and control.writes_stopped:
        reason = f" ({control.reason})" if control.reason else ""
        return f"the actuation kill switch is on{reason}"
    return None


class SimulatedPodState(models.Model):
    """What the simulated cluster's writer changed in a pod (resizes, evictions).

    The simulated fleet is a pure function of its seed; writes live here so every
    process (web, workers) sees the same pods. An evicted pod is recreated at once
    under a new uid with the requests admission gave it.
    """

    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, related_name="simulated_pods"
    )
    namespace = models.CharField(max_length=63)
    pod = models.CharField(max_length=253)
    # {"<container>": {"requests": {...}, "limits": {...}}} (millicores, bytes)
    containers = models.JSONField(default=dict, blank=True)
    generation = models.PositiveIntegerField(default=1)
    uid_suffix = models.PositiveIntegerField(default=0)
    restarted_at = models.DateTimeField(null=True, blank=True)
    annotations = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "namespace", "pod"], name="simulated_pod_unique"
            )
        ]

    def __str__(self) -> str:
        return f"simulated pod {self.namespace}/{self.pod}"


class SimulatedHpaState(models.Model):
    """An HPA of the simulated cluster as its writer left it (coordinated HPA mode):
    its ``spec.metrics`` and ``resourceVersion``, seen by every process."""

    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, related_name="simulated_hpas"
    )
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    metrics = models.JSONField(default=list, blank=True)
    resource_version = models.PositiveIntegerField(default=1)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "namespace", "name"], name="simulated_hpa_unique"
            )
        ]

    def __str__(self) -> str:
        return f"simulated HPA {self.namespace}/{self.name}"


class SimulatedWorkloadState(models.Model):
    """A workload of the simulated cluster as an operator annotated it (``kubectl
    annotate`` on a real one): the annotations discovery reads, seen by every
    process."""

    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, related_name="simulated_workloads"
    )
    namespace = models.CharField(max_length=63)
    kind = models.CharField(max_length=32)
    name = models.CharField(max_length=253)
    annotations = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "namespace", "kind", "name"],
                name="simulated_workload_unique",
            )
        ]

    def __str__(self) -> str:
        return f"simulated {self.kind} {self.namespace}/{self.name}"


class AdmissionCount(models.Model):
    """How many pods the admission webhook patched, left alone or failed open on, per
    cluster and minute (counted in memory, flushed every few seconds: no write per
    pod)."""

    class Outcome(models.TextChoices):
        PATCHED = "patched"
        LEFT_ALONE = "left_alone"
        FAILED_OPEN = "failed_open"

    cluster_name = models.CharField(max_length=63)
    minute = models.DateTimeField()
    outcome = models.CharField(max_length=12, choices=Outcome.choices)
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster_name", "minute", "outcome"],
                name="admission_count_unique",
            )
        ]
        # The overview sums the last hour and day: a range scan on minute.
        indexes = [models.Index(fields=["minute"], name="admission_count_minute")]

    def __str__(self) -> str:
        return f"{self.cluster_name} {self.minute:%H:%M} {self.outcome}: {self.count}"


class AdmissionChange(models.Model):
    """One workload whose webhook inputs changed (its mode or policy, a container's
    latest recommendation, its HPAs, it appeared or vanished), written in the same
    transaction as the change: each webhook process reloads only the workloads
    journaled since its last reload (``services/admission/snapshot.py``)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    # Not a foreign key: the row outlives a deleted workload (which the reload drops).
    workload_id = models.BigIntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        # The webhook reads ``id > its high-water mark`` (the primary key's index);
        # the writers prune rows older than an hour by time.
        indexes = [models.Index(fields=["created_at"], name="admission_change_time")]

    def __str__(self) -> str:
        return f"cluster {self.cluster_id}: workload {self.workload_id}"


class WebhookAck(models.Model):
    """What one ``webhook serve`` process has loaded of one cluster's journal
    (``AdmissionChange``): every id up to ``journal_after`` except the ``journal_holes``
    ranges, and when it was last seen. The updater writes to a workload only once every
    live process has loaded the workload's latest journal row
    (``services/readmodels/webhook_acks.py``)."""

    # The process: host, pid and a token of its start (a restart is a new process).
    process = models.CharField(max_length=200)
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    journal_after = models.BigIntegerField(default=0)
    # [[low, high], ...]: ids below journal_after not visible when it read them.
    journal_holes = models.JSONField(default=list, blank=True)
    loaded_at = models.DateTimeField(default=timezone.now)
    # Its heartbeat: a process not seen for ``handshake.LIVE_S`` is not waited for.
    seen_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["process", "cluster"], name="webhook_ack_process_cluster"
            )
        ]

    def __str__(self) -> str:
        return f"{self.process} @ cluster {self.cluster_id}: {self.journal_after}"

    def has_loaded(self, journal_id: int) -> bool:
        """Whether the process has loaded the journal row ``journal_id``."""
        return journal_id <= self.journal_after and not any(
            low <= journal_id <= high for low, high in self.journal_holes or ()
        )
