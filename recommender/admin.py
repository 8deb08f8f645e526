"""Django admin for every model, read-mostly: work is done on vpaweb's own pages."""

from typing import Any

from django import forms
from django.contrib import admin
from django.db import transaction
from django.db.models import Model
from django.http import HttpRequest
from django.utils import timezone

from recommender import models
from recommender.errors import InvalidInput
from recommender.services.actuation import control
from recommender.services.operations.clusters import checked_namespace_selector
from recommender.services.operations.notifications import encrypt_url
from recommender.services.policy.windows import parse_windows
from recommender.services.readmodels.generation import (
    mark_admission_data_changed,
    note_admission_changes,
)


class ReadOnly:
    """Rows vpaweb writes itself (history, read models, discovery's records, resize
    changes, the audit trail, leases, tokens, deliveries): shown, never added or
    edited here (deleting stays allowed)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyAdmin(ReadOnly, admin.ModelAdmin):
    """The admin of a row vpaweb writes itself, registered with its options from
    ``READ_ONLY``."""


class WebhookInputAdmin(admin.ModelAdmin):
    """An admin of rows the webhook's cache holds (workloads, containers, policies,
    recommendations): an edit or a delete there is journaled like the services' own,
    so the webhook reloads that workload at once."""

    def _changed(self, obj: Any) -> None:
        workload = self.workload_of(obj)
        note_admission_changes(
            cluster_id=workload.cluster_id, workload_ids=[workload.pk]
        )
        transaction.on_commit(mark_admission_data_changed)

    def workload_of(self, obj: Any) -> models.Workload:
        """The workload whose webhook inputs ``obj`` is part of."""
        raise NotImplementedError

    def save_model(
        self, request: HttpRequest, obj: Any, form: Any, change: bool
    ) -> None:
        super().save_model(request, obj, form, change)
        self._changed(obj)

    def save_related(
        self, request: HttpRequest, form: Any, formsets: Any, change: bool
    ) -> None:
        super().save_related(request, form, formsets, change)
        self._changed(form.instance)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        self._changed(obj)
        super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for obj in queryset:
            self._changed(obj)
        super().delete_queryset(request, queryset)


class ClusterForm(forms.ModelForm):
    """A cluster; its namespace opt-in selector is checked before it is saved."""

    class Meta:
        model = models.Cluster
        fields = [
            "name",
            "kind",
            "context",
            "namespace_selector",
            "is_enabled",
            "last_discovered_at",
            "vpa_objects_without_target",
            "maintenance_windows",
            "created_at",
        ]

    def clean_maintenance_windows(self) -> Any:
        windows = self.cleaned_data.get("maintenance_windows") or []
        try:
            parse_windows(windows)
        except InvalidInput as exc:
            raise forms.ValidationError(exc.message) from None
        return windows

    def clean_namespace_selector(self) -> str:
        try:
            return checked_namespace_selector(
                self.cleaned_data.get("namespace_selector") or ""
            )
        except InvalidInput as exc:
            raise forms.ValidationError(exc.message) from None


@admin.register(models.Cluster)
class ClusterAdmin(admin.ModelAdmin):
    form = ClusterForm
    list_display = [
        "name",
        "kind",
        "context",
        "namespace_selector",
        "is_enabled",
        "updates_paused",
        "last_discovered_at",
    ]
    # Pausing goes through the service (audited): the Changes page or these actions.
    # The refresh stores the namespaces' totals.
    readonly_fields = ["updates_paused", "totals_at"]
    actions = ["pause_updates", "resume_updates"]

    def _pause(self, request: HttpRequest, queryset: Any, paused: bool) -> None:
        for cluster in queryset:
            control.set_cluster_paused(
                cluster=cluster, paused=paused, actor=request.user, now=timezone.now()
            )

    @admin.action(description="Pause the updater's writes (audited)")
    def pause_updates(self, request: HttpRequest, queryset: Any) -> None:
        self._pause(request, queryset, True)

    @admin.action(description="Resume the updater's writes (audited)")
    def resume_updates(self, request: HttpRequest, queryset: Any) -> None:
        self._pause(request, queryset, False)


@admin.register(models.ActuationControl)
class ActuationControlAdmin(admin.ModelAdmin):
    """The global kill switch: saving it goes through the service, which audits it."""

    list_display = ["writes_stopped", "reason", "updated_at", "updated_by"]
    fields = ["writes_stopped", "reason"]

    def save_model(
        self, request: HttpRequest, obj: Any, form: Any, change: bool
    ) -> None:
        saved = control.set_kill_switch(
            stopped=obj.writes_stopped,
            actor=request.user,
            now=timezone.now(),
            reason=obj.reason,
        )
        obj.pk = saved.pk


# Rows vpaweb writes itself, with who writes them: one ReadOnlyAdmin each, of these
# options.
READ_ONLY: dict[type[Model], dict[str, Any]] = {
    # Taken and renewed by the updater (a database lease).
    models.UpdaterLock: {
        "list_display": ["cluster", "holder", "acquired_at", "expires_at"],
    },
    # Written by discovery from the cluster's LimitRanges.
    models.NamespaceLimitRange: {
        "list_display": ["namespace", "cluster", "updated_at"],
        "list_filter": ["cluster"],
    },
    # Written by the refresh cycle (the savings trend).
    models.SavingsSnapshot: {
        "list_display": [
            "taken_at",
            "cluster",
            "namespace",
            "workloads",
            "savings_monthly",
        ],
        "list_filter": ["cluster"],
        "date_hierarchy": "taken_at",
    },
    # Written by the refresh (the overview's sums).
    models.NamespaceTotals: {
        "list_display": [
            "cluster",
            "namespace",
            "computed_at",
            "workloads",
            "containers",
        ],
        "list_filter": ["cluster"],
    },
    # Written by the refresh (nodes you can free).
    models.NodePool: {
        "list_display": [
            "cluster",
            "name",
            "nodes",
            "nodes_needed_now",
            "nodes_needed_after",
            "computed_at",
        ],
        "list_filter": ["cluster"],
    },
    # Written by the refresh (the lists' facts).
    models.WorkloadTotals: {
        "list_display": ["workload", "shortfall", "missing_count", "no_data_count"],
        "list_select_related": ["workload"],
        "raw_id_fields": ["workload"],
    },
    # Written by the refresh (the rollups' amounts).
    models.WorkloadAmounts: {
        "list_display": [
            "workload",
            "containers",
            "covered",
            "requested_cpu_millicores",
        ],
        "list_select_related": ["workload"],
        "raw_id_fields": ["workload"],
    },
    # Written by the refresh (the rollups' sums per group): shown, never edited here.
    models.GroupTotals: {
        "list_display": [
            "cluster",
            "namespace",
            "kind",
            "label",
            "workloads",
            "savings",
        ],
        "list_filter": ["cluster"],
    },
    # Written by the refresh (the workload charts' hourly usage).
    models.UsageHour: {
        "list_display": ["container", "ends_at", "cpu_max_cores", "memory_max_bytes"],
        "list_select_related": ["container"],
        "raw_id_fields": ["container"],
    },
    # Written by discovery from the pods' owner references.
    models.WorkloadPod: {
        "list_display": ["name", "namespace", "workload", "owner_kind", "last_seen_at"],
        "list_filter": ["cluster"],
        "search_fields": ["name", "namespace", "workload__name"],
        "raw_id_fields": ["workload"],
    },
    models.Checkpoint: {
        "list_display": [
            "container",
            "histogram_key",
            "last_sample_at",
            "sample_count",
            "version",
        ],
        "raw_id_fields": ["container"],
        "exclude": ["state"],
    },
    models.OomKill: {
        "list_display": [
            "container",
            "pod",
            "occurred_at",
            "memory_request_bytes",
            "is_eviction",
        ],
        "raw_id_fields": ["container"],
    },
    models.RefreshRun: {
        "list_display": [
            "kind",
            "cluster",
            "shard",
            "status",
            "started_at",
            "finished_at",
            "progress",
        ],
        "list_filter": ["kind", "status", "cluster"],
    },
    # A status changes only through ResizeChange.transition (approvals, the updater).
    models.ResizeChange: {
        "list_display": [
            "workload",
            "pod",
            "method",
            "status",
            "created_at",
            "decided_by",
        ],
        "list_filter": ["status", "method"],
        "raw_id_fields": ["workload"],
    },
    # The trail is written by record_audit beside each change, never by hand.
    models.AuditEvent: {
        "list_display": ["created_at", "actor_label", "action", "workload", "message"],
        "list_filter": ["action"],
        "raw_id_fields": ["workload"],
    },
    # Tokens are created and revoked through the dashboard or `manage.py apitoken`,
    # which show the key once and audit the change; the admin only lists them.
    models.ApiToken: {
        "list_display": [
            "name",
            "scope",
            "key_prefix",
            "created_by",
            "created_at",
            "revoked_at",
        ],
        "list_filter": ["scope"],
        "exclude": ["key_hash"],
    },
    # The webhook's journal of changed workloads, written by the services.
    models.AdmissionChange: {
        "list_display": ["id", "cluster", "workload_id", "created_at"],
        "list_filter": ["cluster"],
    },
    # Each webhook process's acknowledgement of the journal it has loaded, which the
    # updater waits for before it evicts or resizes.
    models.WebhookAck: {
        "list_display": ["process", "cluster", "journal_after", "loaded_at", "seen_at"],
        "list_filter": ["cluster"],
    },
    models.AdmissionCount: {
        "list_display": ["cluster_name", "minute", "outcome", "count"],
        "list_filter": ["outcome", "cluster_name"],
        "date_hierarchy": "minute",
    },
    # Policy rules are edited through the API (services/policy/rule_edits.py): an
    # edit previews and resolves every policy it changes, which a save here would not.
    models.PolicyRule: {
        "list_display": ["name", "priority", "is_enabled", "cluster", "updated_at"],
    },
    # Which event reached which channel (read-only).
    models.NotificationDelivery: {
        "list_display": ["channel", "event", "key", "sent_at"],
        "list_filter": ["channel", "event"],
    },
}
for _model, _options in READ_ONLY.items():
    admin.site.register(_model, ReadOnlyAdmin, **_options)


@admin.register(models.SimulatedPodState)
class SimulatedPodStateAdmin(admin.ModelAdmin):
    list_display = ["cluster", "namespace", "pod", "generation", "uid_suffix"]


@admin.register(models.SimulatedHpaState)
class SimulatedHpaStateAdmin(admin.ModelAdmin):
    list_display = ["cluster", "namespace", "name", "resource_version", "updated_at"]


@admin.register(models.SimulatedWorkloadState)
class SimulatedWorkloadStateAdmin(admin.ModelAdmin):
    # A simulated workload's annotations (vpaweb.io/mode, …), as ``kubectl annotate``
    # sets them on a real one: the next refresh reads them.
    list_display = ["cluster", "namespace", "kind", "name", "annotations"]


class ContainerInline(admin.TabularInline):
    model = models.Container
    extra = 0
    fields = [
        "name",
        "kind",
        "request_cpu_millicores",
        "request_memory_bytes",
        "limit_cpu_millicores",
        "limit_memory_bytes",
    ]


@admin.register(models.Workload)
class WorkloadAdmin(WebhookInputAdmin):
    list_display = ["name", "kind", "namespace", "cluster", "replicas", "is_active"]
    list_filter = ["cluster", "kind", "is_active"]
    search_fields = ["name", "namespace"]
    inlines = [ContainerInline]

    def workload_of(self, obj: Any) -> models.Workload:
        return obj  # type: ignore[no-any-return]


@admin.register(models.Container)
class ContainerAdmin(WebhookInputAdmin):
    list_display = [
        "name",
        "workload",
        "kind",
        "request_cpu_millicores",
        "request_memory_bytes",
    ]
    search_fields = ["name", "workload__name"]
    raw_id_fields = ["workload", "latest_recommendation"]

    def workload_of(self, obj: Any) -> models.Workload:
        return obj.workload  # type: ignore[no-any-return]


@admin.register(models.Policy)
class PolicyAdmin(WebhookInputAdmin):
    list_display = ["workload", "mode", "profile", "source", "vpa_object", "updated_at"]
    list_filter = ["mode", "profile", "source"]
    raw_id_fields = ["workload"]
    # Discovery's record of the VPA object targeting the workload.
    readonly_fields = ["vpa_object", "vpa_object_mode"]

    def workload_of(self, obj: Any) -> models.Workload:
        return obj.workload  # type: ignore[no-any-return]


@admin.register(models.Recommendation)
class RecommendationAdmin(ReadOnly, WebhookInputAdmin):
    list_display = [
        "container",
        "created_at",
        "target_cpu_millicores",
        "target_memory_bytes",
        "profile",
    ]
    raw_id_fields = ["container"]

    def workload_of(self, obj: Any) -> models.Workload:
        return obj.container.workload  # type: ignore[no-any-return]


@admin.register(models.StaticCoefficient)
class StaticCoefficientAdmin(admin.ModelAdmin):
    list_display = [
        "namespace",
        "cpu_factor",
        "memory_factor",
        "updated_at",
        "updated_by",
    ]


class NotificationChannelForm(forms.ModelForm):
    """A channel; its webhook URL is written here and stored encrypted, never shown."""

    url = forms.URLField(
        required=False,
        assume_scheme="https",
        widget=forms.PasswordInput(render_value=False),
        help_text="the incoming webhook's URL (stored encrypted; leave empty to keep "
        "the stored one, or set url env instead)",
    )

    class Meta:
        model = models.NotificationChannel
        fields = [
            "name",
            "kind",
            "url",
            "url_env",
            "events",
            "clusters",
            "namespaces",
            "labels",
            "min_interval_s",
            "is_enabled",
        ]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        has_stored = bool(self.instance.url_encrypted)
        if not (cleaned.get("url") or cleaned.get("url_env") or has_stored):
            raise forms.ValidationError("give the webhook URL, or url env")
        unknown = set(cleaned.get("events") or []) - set(
            models.NotificationChannel.Event.values
        )
        if unknown:
            self.add_error(
                "events",
                f"unknown events {sorted(unknown)}; choose from "
                f"{', '.join(models.NotificationChannel.Event.values)}",
            )
        return cleaned

    def save(self, commit: bool = True) -> Any:
        if self.cleaned_data.get("url"):
            self.instance.url_encrypted = encrypt_url(self.cleaned_data["url"])
        return super().save(commit=commit)


@admin.register(models.NotificationChannel)
class NotificationChannelAdmin(admin.ModelAdmin):
    """Chat and webhook channels; failures show in the list (last error)."""

    form = NotificationChannelForm
    list_display = [
        "name",
        "kind",
        "is_enabled",
        "last_sent_at",
        "last_error_at",
        "last_error",
    ]
    readonly_fields = ["last_sent_at", "last_error", "last_error_at", "created_at"]
