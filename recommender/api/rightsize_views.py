"""Right-sizing endpoints for CI/CD: manifests in, right-sized manifests out, and the
static coefficients that size workloads vpaweb does not know yet.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from recommender.api import rightsize_serializers as s
from recommender.api.auth import CanRead, CanReadOrWrite, actor_of
from recommender.api.bodies import JSON_MEDIA_TYPES, decode_text, load_manifests
from recommender.api.formats import (
    MANIFEST_PARSERS,
    JSONParser,
    JUnitXMLRenderer,
    ManifestsYAMLRenderer,
    RawBody,
)
from recommender.api.queries import query_filters, single_query_value
from recommender.api.views import NATURAL_KEY_PARAMETERS
from recommender.errors import InvalidInput
from recommender.models import StaticCoefficient
from recommender.services.advice import drift, patches, rightsize
from recommender.services.advice.namespace_patch import namespace_patch


class StaticCoefficientView(APIView):
    """First-deploy coefficients per namespace, with a global default (namespace "")."""

    permission_classes = [CanReadOrWrite]
    parser_classes = [JSONParser]

    @extend_schema(
        summary="List static coefficients",
        responses=s.StaticCoefficientSerializer(many=True),
        tags=["rightsize"],
    )
    def get(self, request: Request) -> Response:
        rows = StaticCoefficient.objects.order_by("namespace")
        return Response(s.StaticCoefficientSerializer(rows, many=True).data)

    @extend_schema(
        summary=(
            "Set a namespace's static coefficient "
            "(write scope or operator role; audited)"
        ),
        request=s.StaticCoefficientInputSerializer,
        responses={
            200: s.StaticCoefficientSerializer,
            204: OpenApiResponse(
                description="both factors were null: the coefficient is gone"
            ),
        },
        tags=["rightsize"],
        examples=[
            OpenApiExample(
                "CPU only",
                value={"namespace": "", "cpu_factor": 0.7, "memory_factor": None},
                request_only=True,
            )
        ],
    )
    def post(self, request: Request) -> Response:
        serializer = s.StaticCoefficientInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        actor, label = actor_of(request)
        row = rightsize.set_static_coefficient(
            namespace=serializer.validated_data["namespace"],
            cpu_factor=serializer.validated_data["cpu_factor"],
            memory_factor=serializer.validated_data["memory_factor"],
            actor=actor,
            actor_label=label,
            now=timezone.now(),
        )
        if row is None:
            return Response(status=204)
        return Response(s.StaticCoefficientSerializer(row).data)


RIGHTSIZE_EXAMPLE_YAML = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  template:
    spec:
      containers:
      - name: app
        image: shop/web:1.4
        resources:
          requests: {cpu: "1", memory: 1Gi}
          limits: {cpu: "2", memory: 2Gi}
"""


# The body of rightsize and check: manifests as YAML or JSON. A YAML text holds at least
# one object with a kind (a text that is one scalar, such as "0", is refused): as much
# of the manifests' rules as a pattern can say.
MANIFESTS_YAML = {
    "type": "string",
    "minLength": 6,
    # Also a flow mapping or JSON text ("kind": "Deployment"), which is YAML too.
    "pattern": "kind[\"']?[ \\t]*:[ \\t]*[\"']?[A-Za-z]",
    "description": "one or more YAML documents of Kubernetes manifests",
}
MANIFESTS_REQUEST = {
    "application/yaml": MANIFESTS_YAML,
    "application/json": OpenApiTypes.OBJECT,
}
MANIFESTS_EXAMPLES = [
    OpenApiExample(
        "a Deployment",
        value=RIGHTSIZE_EXAMPLE_YAML,
        media_type="application/yaml",
        request_only=True,
    ),
]


def posted_manifests(request: Request) -> tuple[RawBody, list[Any]]:
    """The posted body and its manifests; InvalidInput naming the body otherwise."""
    body = request.data
    if not isinstance(body, RawBody):
        raise InvalidInput(
            "the body holds no manifests: send YAML or JSON manifests as the body",
            field="body",
        )
    return body, load_manifests(body=body.data, media_type=body.media_type)


class RightsizeView(APIView):
    """Right-size Kubernetes manifests before they are deployed."""

    permission_classes = [CanRead]
    parser_classes = MANIFEST_PARSERS
    renderer_classes = [JSONRenderer, ManifestsYAMLRenderer, BrowsableAPIRenderer]

    @extend_schema(
        summary="Right-size manifests (YAML or JSON, multi-document, Lists)",
        description=(
            "Sets each container's requests from its workload's latest recommendation, "
            "capped as the admission webhook caps it, and limits at the original "
            "limit:request ratio unless the container policy says RequestsOnly. "
            "A recommendation with too little history is left out, as the webhook "
            "leaves it (`include_short_history`). Unknown workloads get the "
            "namespace's static coefficient (or stay as they are, with a note). An "
            "HPA of a right-sized workload in the same manifests is kept in step. "
            "Other kinds pass through. Ask for `Accept: application/yaml` (or "
            "`?format=yaml`) to get only the manifests, ready for `kubectl apply -f -`."
        ),
        parameters=[s.RightsizeOptionsSerializer],
        request=MANIFESTS_REQUEST,
        responses={
            (200, "application/json"): s.RightsizeResponseSerializer,
            (200, "application/yaml"): OpenApiTypes.STR,
        },
        tags=["rightsize"],
        examples=MANIFESTS_EXAMPLES,
    )
    def post(self, request: Request) -> Response:
        single_query_value(request, "format")
        given = query_filters(s.RightsizeOptionsSerializer, request)
        output = given.pop("output", "manifests")
        values_path = given.pop("values_path", "resources")
        hpa_values_path = given.pop("hpa_values_path", "autoscaling")
        diff_path = given.pop("diff_path", "manifests.yaml")
        options = rightsize.RightsizeOptions(**given)
        body, documents = posted_manifests(request)
        result = rightsize.rightsize_manifests(
            documents=documents,
            options=options,
            max_containers=settings.API_MAX_CONTAINERS,
        )
        answer = patches.rightsize_answer(
            result,
            output=output,
            text=decode_text(body.data),
            is_json=body.media_type in JSON_MEDIA_TYPES,
            values_path=values_path,
            hpa_values_path=hpa_values_path,
            diff_path=diff_path,
        )
        return Response(answer)


def tolerance_of(given: dict[str, Any]) -> drift.Tolerance:
    """The tolerance of validated query options (``ToleranceSerializer``'s fields are
    taken out of ``given``)."""
    return drift.Tolerance.from_settings(
        cpu_percent=given.pop("cpu_percent", None),
        memory_percent=given.pop("memory_percent", None),
        cpu_floor_millicores=given.pop("cpu_floor", None),
        memory_floor_bytes=given.pop("memory_floor", None),
    )


class CheckView(APIView):
    """The drift check for pipelines: posted requests against the recommendations."""

    permission_classes = [CanRead]
    parser_classes = MANIFEST_PARSERS
    renderer_classes = [JSONRenderer, JUnitXMLRenderer, BrowsableAPIRenderer]

    @extend_schema(
        summary="Check manifests' requests against the recommendations (drift)",
        description=(
            "Answers per container whether each request is within the tolerance of "
            "what `rightsize` would write: `ok`, `drift`, or `unchecked` (no "
            "recommendation, or one behind the history gate). `verdict` and "
            "`exit_code` (0 ok, 1 drift, 2 nothing checked: an unknown workload, "
            "say) sum it up; the `Vpaweb-Exit-Code` header carries the exit code "
            "too. Ask for "
            "`Accept: application/xml` (or `?format=junit`) to get JUnit XML."
        ),
        parameters=[s.CheckOptionsSerializer],
        request=MANIFESTS_REQUEST,
        responses={
            (200, "application/json"): s.CheckResponseSerializer,
            (200, "application/xml"): OpenApiTypes.STR,
        },
        tags=["rightsize"],
        examples=MANIFESTS_EXAMPLES,
    )
    def post(self, request: Request) -> Response:
        single_query_value(request, "format")
        given = query_filters(s.CheckOptionsSerializer, request)
        tolerance = tolerance_of(given)
        _, documents = posted_manifests(request)
        result = rightsize.rightsize_manifests(
            documents=documents,
            options=rightsize.RightsizeOptions(**given),
            max_containers=settings.API_MAX_CONTAINERS,
        )
        check = drift.check_drift(result, tolerance=tolerance)
        return Response(check, headers={"Vpaweb-Exit-Code": str(check["exit_code"])})


@extend_schema(
    summary="The patch set of a namespace's workloads outside tolerance (for a PR)",
    description=(
        "Every active workload of the namespace (narrowed by `selector`) whose "
        "requests are outside the drift check's tolerance: strategic-merge patches "
        "of the containers outside it, a kustomization.yaml fragment naming them, "
        "and a Markdown summary (what, why, savings, risk) for a pull request."
    ),
    parameters=[*NATURAL_KEY_PARAMETERS[:2], s.NamespacePatchOptionsSerializer],
    responses=s.NamespacePatchSerializer,
    tags=["rightsize"],
)
class NamespacePatchView(APIView):
    """What a pull request would change in one namespace."""

    permission_classes = [CanRead]

    def get(self, request: Request, cluster: str, namespace: str) -> Response:
        given = query_filters(s.NamespacePatchOptionsSerializer, request)
        answer = namespace_patch(
            cluster=cluster,
            namespace=namespace,
            selector=given.pop("selector", None),
            include_short_history=given.pop("include_short_history", False),
            tolerance=tolerance_of(given),
            dashboard_url=request.build_absolute_uri("/").rstrip("/"),
            now=timezone.now(),
        )
        return Response(answer)
