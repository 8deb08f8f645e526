"""API views of resize changes: list, approve, reject, and the same decisions in bulk
for a workload or a namespace (approve, reject, withdraw an approval)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import (
    extend_schema,
    extend_schema_view,
)
from rest_framework import viewsets
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from recommender.api import change_serializers as cs
from recommender.api import serializers as s
from recommender.api.auth import CanRead, CanWrite, actor_of
from recommender.api.formats import FormParser, JSONParser
from recommender.api.queries import Pagination, filtered
from recommender.models import (
    ResizeChange,
)
from recommender.services.actuation import approvals
from recommender.services.actuation import approve_all as bulk


@extend_schema_view(
    list=extend_schema(
        summary="List resize changes",
        parameters=[s.ChangeFilterSerializer],
        tags=["changes"],
    ),
    retrieve=extend_schema(summary="Get a resize change", tags=["changes"]),
)
class ResizeChangeViewSet(viewsets.ReadOnlyModelViewSet):
    """Resize changes proposed by the updater, and their decisions."""

    permission_classes = [CanRead]
    serializer_class = cs.ResizeChangeSerializer
    pagination_class = Pagination
    lookup_value_regex = "[0-9]{1,18}"

    def get_queryset(self) -> QuerySet[ResizeChange]:
        queryset = ResizeChange.objects.select_related(
            "workload__cluster", "decided_by"
        )
        if self.action != "list":
            return queryset
        return filtered(queryset, s.ChangeFilterSerializer, self.request)


class ApproveChangeView(APIView):
    """Approve a proposed resize; the updater applies it on its next pass."""

    permission_classes = [CanWrite]
    extra_error_statuses = {
        "409": "The change is not proposed, or its workload is Off."
    }

    @extend_schema(
        summary="Approve a resize change (write scope or operator role; audited)",
        request=None,
        responses=cs.ResizeChangeSerializer,
        tags=["changes"],
    )
    def post(self, request: Request, pk: str) -> Response:
        actor, label = actor_of(request)
        change = approvals.approve_change(
            change_id=int(pk), approved_by=actor, actor_label=label, now=timezone.now()
        )
        return Response(cs.ResizeChangeSerializer(_reload_change(change.pk)).data)


class RejectChangeView(APIView):
    """Reject a proposed (or approved, not yet applied) resize."""

    permission_classes = [CanWrite]
    # Forms too: the browsable API and `curl -d reason=...` send them.
    parser_classes = [JSONParser, FormParser, MultiPartParser]
    extra_error_statuses = {
        "409": "The change was already applied, rejected or failed."
    }

    @extend_schema(
        summary="Reject a resize change (write scope or operator role; audited)",
        request=cs.RejectSerializer,
        responses=cs.ResizeChangeSerializer,
        tags=["changes"],
    )
    def post(self, request: Request, pk: str) -> Response:
        serializer = cs.RejectSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        actor, label = actor_of(request)
        change = approvals.reject_change(
            change_id=int(pk),
            rejected_by=actor,
            actor_label=label,
            reason=serializer.validated_data.get("reason", ""),
            snooze=serializer.validated_data["snooze"],
            now=timezone.now(),
        )
        return Response(cs.ResizeChangeSerializer(_reload_change(change.pk)).data)


def _bulk_result(result: bulk.BulkResult) -> Response:
    return Response(
        {
            "approved": result.approved,
            "skipped": [
                {"id": pk, "reason": reason} for pk, reason in result.skipped.items()
            ],
        }
    )


class BulkApproveWorkloadView(APIView):
    """Approve every proposed change of one workload."""

    permission_classes = [CanWrite]

    @extend_schema(
        summary="Approve a workload's proposed changes (write scope or operator; "
        "audited)",
        request=None,
        responses=cs.BulkApproveResultSerializer,
        tags=["changes"],
        operation_id="workload_changes_approve",
    )
    def post(self, request: Request, pk: str) -> Response:
        actor, label = actor_of(request)
        return _bulk_result(
            bulk.approve_all(
                approved_by=actor,
                actor_label=label,
                now=timezone.now(),
                workload_id=int(pk),
            )
        )


class BulkApproveNamespaceView(APIView):
    """Approve every proposed change of one namespace of a cluster."""

    permission_classes = [CanWrite]

    @extend_schema(
        summary="Approve a namespace's proposed changes (write scope or operator; "
        "audited)",
        request=None,
        responses=cs.BulkApproveResultSerializer,
        tags=["changes"],
        operation_id="namespace_changes_approve",
    )
    def post(self, request: Request, cluster: str, namespace: str) -> Response:
        actor, label = actor_of(request)
        return _bulk_result(
            bulk.approve_all(
                approved_by=actor,
                actor_label=label,
                now=timezone.now(),
                cluster=cluster,
                namespace=namespace,
            )
        )


def _decision(result: bulk.BulkDecision) -> Response:
    return Response(
        {
            "decided": result.decided,
            "skipped": [
                {"id": pk, "reason": reason} for pk, reason in result.skipped.items()
            ],
        }
    )


class BulkRejectView(APIView):
    """Reject every open change of a workload, or of a namespace of a cluster, with
    one reason and one snooze."""

    permission_classes = [CanWrite]
    parser_classes = [JSONParser, FormParser, MultiPartParser]

    @extend_schema(
        summary="Reject the open changes of a workload or a namespace (write scope or "
        "operator; one audit event per change)",
        request=cs.RejectSerializer,
        responses=cs.BulkDecisionResultSerializer,
        tags=["changes"],
    )
    def post(self, request: Request, **scope: Any) -> Response:
        serializer = cs.RejectSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        actor, label = actor_of(request)
        return _decision(
            bulk.reject_all(
                rejected_by=actor,
                actor_label=label,
                now=timezone.now(),
                reason=serializer.validated_data.get("reason", ""),
                snooze=serializer.validated_data["snooze"],
                **_scope(scope),
            )
        )


class BulkWithdrawView(APIView):
    """Withdraw every approval not yet applied of a workload or a namespace."""

    permission_classes = [CanWrite]

    @extend_schema(
        summary="Withdraw the approved, unapplied changes of a workload or a "
        "namespace (write scope or operator; one audit event per change)",
        request=None,
        responses=cs.BulkDecisionResultSerializer,
        tags=["changes"],
    )
    def post(self, request: Request, **scope: Any) -> Response:
        actor, label = actor_of(request)
        return _decision(
            bulk.withdraw_all(
                withdrawn_by=actor,
                actor_label=label,
                now=timezone.now(),
                **_scope(scope),
            )
        )


def _scope(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The URL's scope as the bulk services take it."""
    if "pk" in kwargs:
        return {"workload_id": int(kwargs["pk"])}
    return {"cluster": kwargs["cluster"], "namespace": kwargs["namespace"]}


def _reload_change(change_id: int) -> ResizeChange:
    return ResizeChange.objects.select_related("workload__cluster", "decided_by").get(
        pk=change_id
    )
