"""REST API v1 views: thin readers of the models and callers of the services.

Resources are read-only viewsets; each command (approve, reject, query) is one APIView.
The right-sizing endpoints for CI/CD live in ``rightsize_views.py``. Every view names
its permission class; errors go through ``api.errors``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from django.db.models import Count, Prefetch, QuerySet
from django.http import HttpResponseBase, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    extend_schema,
    extend_schema_view,
)
from rest_framework import generics, viewsets
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from recommender.api import policy_serializers as ps
from recommender.api import serializers as s
from recommender.api.auth import CanRead, CanReadOrWrite, CanWrite, actor_of
from recommender.api.fields import MODE_ALIASES, mode_alias_note
from recommender.api.formats import (
    CSVRenderer,
    JSONParser,
    YAMLRenderer,
    stream_rows,
)
from recommender.api.queries import (
    MAX_OFFSET,
    MAX_PAGE_SIZE,
    Pagination,
    WorkloadFilterSerializer,
    filter_workloads,
    filtered,
    needs_facts,
    query_filters,
    single_query_value,
    workload_order,
    workload_queryset,
)
from recommender.api.workload_rows import workload_rows, workload_values
from recommender.engine.quantity import readable_resource_list
from recommender.models import (
    Cluster,
    Container,
    Policy,
    Recommendation,
    RefreshRun,
    Workload,
)
from recommender.services.advice.advise import workload_hpa_adjustments
from recommender.services.advice.pod_spec import resource_list
from recommender.services.advice.recommendation_query import query_recommendation
from recommender.services.dashboard.ordering import (
    DEFAULT_WORKLOAD_ORDERING,
    ByCluster,
)
from recommender.services.policy import changes as policies
from recommender.services.readmodels.provisioning import Prices, risk_rules

WORKLOAD_FILTER_PARAMETERS = [WorkloadFilterSerializer]
K8S_NAME_PATTERN = "^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"
NATURAL_KEY_PARAMETERS = [
    OpenApiParameter(
        "cluster",
        str,
        OpenApiParameter.PATH,
        description="cluster name",
        pattern="^[-a-zA-Z0-9_]+$",
    ),
    OpenApiParameter("namespace", str, OpenApiParameter.PATH, pattern=K8S_NAME_PATTERN),
    OpenApiParameter("kind", str, OpenApiParameter.PATH, enum=Workload.Kind.values),
    OpenApiParameter(
        "name",
        str,
        OpenApiParameter.PATH,
        description="workload name",
        pattern=K8S_NAME_PATTERN,
    ),
]


@extend_schema_view(
    list=extend_schema(summary="List clusters", tags=["clusters"]),
    retrieve=extend_schema(summary="Get a cluster by name", tags=["clusters"]),
)
class ClusterViewSet(viewsets.ReadOnlyModelViewSet):
    """Clusters vpaweb reads from."""

    permission_classes = [CanRead]
    serializer_class = s.ClusterSerializer
    pagination_class = Pagination
    lookup_field = "name"
    lookup_value_regex = "[-a-zA-Z0-9_]+"
    queryset = Cluster.objects.annotate(workload_count=Count("workloads")).order_by(
        "name"
    )


@extend_schema_view(
    list=extend_schema(
        summary="List workloads",
        parameters=WORKLOAD_FILTER_PARAMETERS,
        tags=["workloads"],
    ),
    retrieve=extend_schema(summary="Get a workload by id", tags=["workloads"]),
)
class WorkloadViewSet(viewsets.ReadOnlyModelViewSet):
    """Workloads with their containers, current requests and latest recommendations."""

    permission_classes = [CanRead]
    serializer_class = s.WorkloadSerializer
    pagination_class = Pagination
    lookup_value_regex = "[0-9]{1,18}"

    def get_queryset(self) -> QuerySet[Workload]:
        queryset = workload_queryset()
        if self.action == "list":
            queryset = filter_workloads(
                queryset, query_filters(WorkloadFilterSerializer, self.request)
            )
        return queryset

    # No docstring: it would become the operation's description in the schema.
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        # A page of workloads: WorkloadSerializer's output from plain rows in a few
        # queries (count, page, containers), without model instances (workload_rows).
        filters = query_filters(WorkloadFilterSerializer, request)
        if needs_facts(filters):
            # Page the ids, then read the page's rows in that order: sorting ids by a
            # fact is cheaper than sorting every whole row (labels and all).
            annotated = workload_queryset(listed=True)
            listed = filter_workloads(annotated, filters).prefetch_related(None)
            page_ids = self.paginate_queryset(listed.values_list("pk", flat=True))
            position = {pk: index for index, pk in enumerate(page_ids or [])}
            page = sorted(
                workload_values(annotated.filter(pk__in=list(position))),
                key=lambda row: position[row[0]],
            )
            return self.get_paginated_response(workload_rows(page))
        # Count and page the plain rows; annotate only the page's workloads.
        plain = filter_workloads(Workload.objects.all(), filters)
        order = workload_order(filters.get("ordering"))
        # In the default order, counted and paged cluster by cluster (an offset
        # deep into 50,000 workloads sorted them all by their cluster's name).
        # (The paginator counts and slices; the stubs expect a QuerySet.)
        pageable: Any = (
            ByCluster(plain)
            if order == DEFAULT_WORKLOAD_ORDERING
            else plain.values_list("pk", flat=True)
        )
        ids = self.paginate_queryset(pageable) or []
        rows = workload_values(
            Workload.objects.filter(pk__in=ids).order_by(*order), facts=False
        )
        return self.get_paginated_response(
            workload_rows(
                rows, prices=Prices.from_settings(), rules=risk_rules(timezone.now())
            )
        )


class WorkloadLookupMixin:
    """Find the workload of a URL: by ``pk``, or by cluster/namespace/kind/name."""

    kwargs: dict[str, Any]

    def get_workload(self, queryset: QuerySet[Workload] | None = None) -> Workload:
        queryset = (
            queryset
            if queryset is not None
            else Workload.objects.select_related("cluster", "policy")
        )
        if "pk" in self.kwargs:
            return get_object_or_404(queryset, pk=self.kwargs["pk"])
        key = {k: self.kwargs[k] for k in ("namespace", "kind", "name")}
        workload = queryset.filter(cluster__name=self.kwargs["cluster"], **key).first()
        if workload is None:
            from django.http import Http404

            raise Http404(
                f"no workload {self.kwargs['namespace']}/{self.kwargs['kind']}/"
                f"{self.kwargs['name']} in cluster {self.kwargs['cluster']!r}"
            )
        return workload


@extend_schema(
    summary="Get a workload by cluster, namespace, kind and name",
    parameters=NATURAL_KEY_PARAMETERS,
    tags=["workloads"],
)
class WorkloadByKeyView(WorkloadLookupMixin, generics.GenericAPIView):
    """A workload found by its natural key."""

    permission_classes = [CanRead]
    serializer_class = s.WorkloadSerializer

    def get(self, request: Request, **kwargs: Any) -> Response:
        workload = self.get_workload(workload_queryset())
        return Response(self.get_serializer(workload).data)


class WorkloadRecommendationView(WorkloadLookupMixin, APIView):
    """The current recommendation of every container, as a VPA's status holds it."""

    permission_classes = [CanRead]

    @extend_schema(
        summary=(
            "Current recommendation (VPA status format) with the engine's explanation"
        ),
        responses=s.WorkloadRecommendationSerializer,
        tags=["recommendations"],
        examples=[
            OpenApiExample(
                "one container",
                value={
                    "workload": {
                        "id": 7,
                        "cluster": "prod",
                        "namespace": "shop",
                        "kind": "Deployment",
                        "name": "web",
                    },
                    "recommendation": {
                        "containerRecommendations": [
                            {
                                "containerName": "app",
                                "target": {"cpu": "587m", "memory": "250Mi"},
                                "lowerBound": {"cpu": "420m", "memory": "200Mi"},
                                "upperBound": {"cpu": "1200m", "memory": "500Mi"},
                                "uncappedTarget": {"cpu": "587m", "memory": "250Mi"},
                            }
                        ]
                    },
                    "explanations": [
                        {
                            "containerName": "app",
                            "created_at": "2026-01-05T10:00:00Z",
                            "profile": "vpa",
                            "explanation": {"cpu": {"percentile": 0.9}},
                        }
                    ],
                },
                response_only=True,
            )
        ],
    )
    def get(self, request: Request, **kwargs: Any) -> Response:
        workload = self.get_workload()
        containers = sorted(
            workload.containers.select_related("latest_recommendation"),
            key=lambda c: c.name,
        )
        entries, explanations = [], []
        for container in containers:
            rec = container.latest_recommendation
            if rec is None:
                continue
            entries.append(s.recommendation_entry(container.name, rec))
            explanations.append(
                {
                    "containerName": container.name,
                    "created_at": rec.created_at,
                    "profile": rec.profile,
                    "explanation": rec.explanation,
                }
            )
        data = {
            "workload": s.workload_brief(workload),
            "recommendation": {"containerRecommendations": entries},
            "explanations": explanations,
            "hpaAdjustments": workload_hpa_adjustments(workload),
        }
        return Response(s.WorkloadRecommendationSerializer(data).data)


class WorkloadHistoryView(WorkloadLookupMixin, generics.ListAPIView):
    """Every stored recommendation of a workload's containers, newest first."""

    permission_classes = [CanRead]
    serializer_class = s.RecommendationHistorySerializer
    pagination_class = Pagination

    @extend_schema(
        summary="Recommendation history, newest first",
        parameters=[s.HistoryFilterSerializer],
        tags=["recommendations"],
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Recommendation]:
        workload = self.get_workload()
        queryset = Recommendation.objects.filter(
            container__workload=workload
        ).select_related("container")
        return filtered(queryset, s.HistoryFilterSerializer, self.request).order_by(
            "-created_at", "-id"
        )


class WorkloadPolicyView(WorkloadLookupMixin, APIView):
    """A workload's policy: read it, or change it with write access (audited)."""

    permission_classes = [CanReadOrWrite]
    parser_classes = [JSONParser]

    def _policy(self, workload: Workload) -> Policy:
        policy = getattr(workload, "policy", None)
        # No row yet means the defaults: Off, the vpa profile (shown, not stored).
        return policy if policy is not None else Policy(workload=workload)

    @extend_schema(
        summary="Get a workload's policy",
        responses=ps.PolicySerializer,
        tags=["policies"],
    )
    def get(self, request: Request, **kwargs: Any) -> Response:
        return Response(ps.PolicySerializer(self._policy(self.get_workload())).data)

    @extend_schema(
        summary="Change a workload's policy (write scope or operator role; audited)",
        request=ps.PolicyUpdateSerializer,
        responses=ps.PolicySerializer,
        tags=["policies"],
        examples=[
            OpenApiExample(
                f"switch to {Policy.Mode.INITIAL} and cap memory",
                value={
                    "mode": Policy.Mode.INITIAL,
                    "container_policies": [
                        {"containerName": "*", "maxAllowed": {"memory": "2Gi"}}
                    ],
                },
                request_only=True,
            ),
            OpenApiExample(
                "target CPU p95 and memory p99 (upper bound at least the target)",
                value={
                    "profile_overrides": {
                        "cpu_target_percentile": 0.95,
                        "memory_target_percentile": 0.99,
                        "memory_upper_percentile": 0.99,
                    }
                },
                request_only=True,
            ),
        ],
    )
    def patch(self, request: Request, **kwargs: Any) -> Response:
        workload = self.get_workload()
        serializer = ps.PolicyUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        given_mode = (
            request.data.get("mode") if isinstance(request.data, dict) else None
        )
        notes = [mode_alias_note(given_mode)] if given_mode in MODE_ALIASES else []
        actor, label = actor_of(request)
        changes = dict(serializer.validated_data)
        confirm = bool(changes.pop("confirm_large_increase", False))
        inherit = list(changes.pop("inherit", []))
        policy = policies.update_policy(
            workload_id=workload.pk,
            changes=changes,
            inherit=inherit,
            actor=actor,
            actor_label=label,
            now=timezone.now(),
            confirm_large_increase=confirm,
        )
        return Response(ps.PolicySerializer(policy, context={"notes": notes}).data)


class AdoptWorkloadView(WorkloadLookupMixin, APIView):
    """Adopt a workload whose policy mirrors a VPA object: vpaweb's own, in Off."""

    permission_classes = [CanWrite]
    extra_error_statuses = {"409": "The policy is already vpaweb's own."}

    @extend_schema(
        summary="Adopt a workload managed by a VPA object (write scope; audited)",
        request=None,
        responses=ps.PolicySerializer,
        tags=["policies"],
    )
    def post(self, request: Request, **kwargs: Any) -> Response:
        workload = self.get_workload()
        actor, label = actor_of(request)
        policy = policies.adopt_policy(
            workload_id=workload.pk, actor=actor, actor_label=label, now=timezone.now()
        )
        return Response(ps.PolicySerializer(policy).data)


@extend_schema_view(
    list=extend_schema(
        summary="List refresh runs, newest first",
        parameters=[s.RunFilterSerializer],
        tags=["runs"],
    ),
    retrieve=extend_schema(summary="Get a refresh run", tags=["runs"]),
)
class RefreshRunViewSet(viewsets.ReadOnlyModelViewSet):
    """Background runs (refresh, back-fill, expiry) with status, counts and errors."""

    permission_classes = [CanRead]
    serializer_class = s.RefreshRunSerializer
    pagination_class = Pagination
    lookup_value_regex = "[0-9]{1,18}"

    def get_queryset(self) -> QuerySet[RefreshRun]:
        queryset = RefreshRun.objects.select_related("cluster")
        if self.action != "list":
            return queryset
        return filtered(queryset, s.RunFilterSerializer, self.request)


class RecommendationQueryView(APIView):
    """The VPA design's RecommendationQuery: pod spec in, recommended resources out."""

    permission_classes = [CanRead]
    parser_classes = [JSONParser]

    @extend_schema(
        summary="Recommend resources for a pod spec that need not exist",
        request=s.RecommendationQuerySerializer,
        responses=s.RecommendationQueryAnswerSerializer,
        tags=["recommendations"],
        examples=[
            OpenApiExample(
                "a pod of a Deployment",
                value={
                    "apiVersion": "vpaweb.io/v1",
                    "kind": "RecommendationQuery",
                    "metadata": {"namespace": "shop"},
                    "spec": {
                        "owner": {"kind": "Deployment", "name": "web"},
                        "pod": {
                            "spec": {
                                "containers": [
                                    {
                                        "name": "app",
                                        "resources": {"requests": {"cpu": "1"}},
                                    }
                                ]
                            }
                        },
                    },
                },
                request_only=True,
            )
        ],
    )
    def post(self, request: Request) -> Response:
        serializer = s.RecommendationQuerySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return Response(query_recommendation(query=request.data))


EXPORT_COLUMNS = list(s.ExportRowSerializer().fields)
# Container.Kind as the export names it: "regular" is what people call an app container.
CONTAINER_KINDS: dict[str, str] = {
    Container.Kind.REGULAR: "app",
    Container.Kind.SIDECAR: "sidecar",
    Container.Kind.INIT: "init",
}


# Workloads fetched per round trip of the export's server-side cursor, each chunk with
# its containers and their latest recommendations (one prefetch query per chunk).
EXPORT_CHUNK = 200
# Columns the export's rows never show: not read.
EXPORT_UNREAD_CONTAINER_FIELDS = [
    "template_resources",
    "resource_sources",
    "latest_recommendation__explanation",
]
EXPORT_UNREAD_WORKLOAD_FIELDS = [
    "selector",
    "labels",
    "pod_disruption_budgets",
    "hpa_conflicts",
    "policy__profile_overrides",
    "policy__container_policies",
    "policy__eviction_requirements",
]


class RecommendationExportView(APIView):
    """Every container's latest recommendation as CSV, JSON or YAML, for reports.

    Streamed: rows are read from a server-side cursor ``EXPORT_CHUNK`` workloads at a
    time and written as they come, so memory does not grow with the fleet and the
    first rows go out at once. With ``?limit=`` or ``?offset=`` (the API form) the
    answer is one page of workloads' rows in the paginated envelope instead."""

    permission_classes = [CanRead]
    renderer_classes = [JSONRenderer, CSVRenderer, YAMLRenderer]
    csv_columns = EXPORT_COLUMNS

    @extend_schema(
        summary="Export recommendations (?format=csv|json|yaml)",
        parameters=[
            *WORKLOAD_FILTER_PARAMETERS,
            OpenApiParameter(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE},
                description="a page of this many workloads' rows (1 to 1000), in the "
                "paginated envelope (JSON, YAML) or as plain rows (CSV); without "
                "limit and offset every row is streamed",
            ),
            OpenApiParameter(
                "offset",
                {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET},
                description="workloads to skip",
            ),
        ],
        responses={
            (200, "application/json"): s.EXPORT_ANSWER,
            (200, "text/csv"): OpenApiTypes.STR,
            (200, "application/yaml"): s.EXPORT_ANSWER,
        },
        tags=["recommendations"],
    )
    def get(self, request: Request) -> HttpResponseBase:
        single_query_value(request, "format")
        filters = query_filters(WorkloadFilterSerializer, request)
        now = timezone.now()
        # Each container's own facts (status, savings) annotated in the prefetch.
        # The JSON columns no row shows are not read (decoding the explanations
        # was most of the time a row took).
        containers = (
            Container.objects.select_related("latest_recommendation")
            .defer(*EXPORT_UNREAD_CONTAINER_FIELDS)
            .with_provisioning(prices=Prices.from_settings(), rules=risk_rules(now))
        )
        workloads = filter_workloads(workload_queryset(now=now, listed=True), filters)
        workloads = (
            workloads.defer(*EXPORT_UNREAD_WORKLOAD_FIELDS)
            .prefetch_related(None)
            .prefetch_related(
                # A list per workload: no queryset is cloned per workload.
                Prefetch("containers", queryset=containers, to_attr="exported")
            )
        )
        renderer = request.accepted_renderer
        response: HttpResponseBase
        if {"limit", "offset"} & set(request.query_params):
            paginator = Pagination()
            page = paginator.paginate_queryset(workloads, request, view=self) or []
            rows = list(_export_rows(page))
            response = (
                Response(rows)
                if renderer.format == "csv"
                else paginator.get_paginated_response(rows)
            )
        else:
            response = StreamingHttpResponse(
                stream_rows(
                    _export_rows(workloads.iterator(chunk_size=EXPORT_CHUNK)),
                    format=renderer.format,
                    columns=EXPORT_COLUMNS,
                ),
                content_type=(
                    f"{renderer.media_type}; charset={renderer.charset}"
                    if renderer.charset
                    else renderer.media_type
                ),
            )
        if renderer.format == "csv":
            response["Content-Disposition"] = (
                'attachment; filename="recommendations.csv"'
            )
        return response


def _export_rows(workloads: Iterable[Workload]) -> Iterator[dict[str, Any]]:
    """The export's rows: one per container, workload by workload."""
    for workload in workloads:
        policy = getattr(workload, "policy", None)
        for container in workload.exported:  # type: ignore[attr-defined]
            rec = container.latest_recommendation
            yield _export_row(workload, container, rec, policy)


def _export_row(
    workload: Workload,
    container: Container,
    rec: Recommendation | None,
    policy: Policy | None,
) -> dict[str, Any]:
    requests = resource_list(container.requests)
    limits = resource_list(container.limits)
    # Recommended amounts for people: readable quantities, rounded up (the exact
    # integers are in the *_bytes / *_millicores columns).
    target = readable_resource_list(rec.target) if rec else {}
    lower = readable_resource_list(rec.lower_bound) if rec else {}
    upper = readable_resource_list(rec.upper_bound) if rec else {}
    return {
        "cluster": workload.cluster.name,
        "namespace": workload.namespace,
        "kind": workload.kind,
        "workload": workload.name,
        "container": container.name,
        "container_kind": CONTAINER_KINDS[container.kind],
        "mode": policy.mode if policy is not None else Policy.Mode.OFF,
        "replicas": workload.replicas,
        # Annotations of Container.objects.with_provisioning (the export's prefetch).
        "status": container.status,  # type: ignore[attr-defined]
        "savings_monthly": round(container.savings, 2),  # type: ignore[attr-defined]
        "request_cpu": requests.get("cpu"),
        "request_memory": requests.get("memory"),
        "limit_cpu": limits.get("cpu"),
        "limit_memory": limits.get("memory"),
        "target_cpu": target.get("cpu"),
        "target_memory": target.get("memory"),
        "lower_cpu": lower.get("cpu"),
        "lower_memory": lower.get("memory"),
        "upper_cpu": upper.get("cpu"),
        "upper_memory": upper.get("memory"),
        "request_cpu_millicores": container.request_cpu_millicores,
        "request_memory_bytes": container.request_memory_bytes,
        "target_cpu_millicores": rec.target_cpu_millicores if rec else None,
        "target_memory_bytes": rec.target_memory_bytes if rec else None,
        "lower_memory_bytes": rec.lower_memory_bytes if rec else None,
        "upper_memory_bytes": rec.upper_memory_bytes if rec else None,
        "recommended_at": rec.created_at.isoformat() if rec else None,
    }
