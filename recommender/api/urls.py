"""URLs of REST API v1, mounted once under /api/v1/.

Collections and their items end with a slash (``workloads/``, ``workloads/7/``); single
things and commands do not (``workloads/7/policy``, ``workloads/7/adopt``,
``changes/3/approve``, ``rightsize``). Any other URL under /api/v1/ answers the JSON
404 of ``api.errors``.
"""

from __future__ import annotations

from django.urls import include, path, re_path, register_converter
from drf_spectacular.views import (
    SpectacularAPIView,
    SpectacularRedocView,
    SpectacularSwaggerSplitView,
)
from rest_framework.routers import SimpleRouter

from recommender.api import (
    change_views,
    compare_views,
    rightsize_views,
    rollup_views,
    rule_views,
    views,
    whatif_views,
)
from recommender.api.errors import CATCH_ALL_NAME, not_found


class IdConverter:
    """A database id: at most 18 digits, so it always fits a 64-bit integer column."""

    regex = "[0-9]{1,18}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)


class KubernetesNameConverter:
    """A namespace or object name (DNS subdomain characters)."""

    regex = "[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


class KindConverter:
    """A workload kind such as Deployment."""

    regex = "[A-Za-z]{1,40}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(IdConverter, "id")
register_converter(KubernetesNameConverter, "k8sname")
register_converter(KindConverter, "kind")

router = SimpleRouter()
router.register("clusters", views.ClusterViewSet, basename="cluster")
router.register("workloads", views.WorkloadViewSet, basename="workload")
router.register("changes", change_views.ResizeChangeViewSet, basename="change")
router.register("runs", views.RefreshRunViewSet, basename="run")

NATURAL_KEY = (
    "clusters/<slug:cluster>/namespaces/<k8sname:namespace>"
    "/workloads/<kind:kind>/<k8sname:name>"
)

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path(
        "docs/",
        SpectacularSwaggerSplitView.as_view(url_name="api-schema"),
        name="api-docs",
    ),
    path(
        "redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"
    ),
    path("", include(router.urls)),
    path(
        "workloads/<id:pk>/recommendation",
        views.WorkloadRecommendationView.as_view(),
        name="workload-recommendation",
    ),
    path(
        "workloads/<id:pk>/history",
        views.WorkloadHistoryView.as_view(),
        name="workload-history",
    ),
    path(
        "workloads/<id:pk>/policy",
        views.WorkloadPolicyView.as_view(),
        name="workload-policy",
    ),
    path("policy-rules/", rule_views.RuleListView.as_view(), name="policy-rules"),
    path(
        "policy-rules/<id:pk>/",
        rule_views.RuleDetailView.as_view(),
        name="policy-rule",
    ),
    path(
        "workloads/<id:pk>/adopt",
        views.AdoptWorkloadView.as_view(),
        name="workload-adopt",
    ),
    path(
        "workloads/<id:pk>/what-if",
        whatif_views.WhatIfView.as_view(),
        name="workload-what-if",
    ),
    path(
        "what-if-jobs/<slug:job>",
        whatif_views.WhatIfJobView.as_view(),
        name="what-if-job",
    ),
    path(NATURAL_KEY, views.WorkloadByKeyView.as_view(), name="workload-by-key"),
    path(
        f"{NATURAL_KEY}/what-if",
        whatif_views.WhatIfView.as_view(),
        name="workload-by-key-what-if",
    ),
    path(
        f"{NATURAL_KEY}/adopt",
        views.AdoptWorkloadView.as_view(),
        name="workload-by-key-adopt",
    ),
    path(
        f"{NATURAL_KEY}/recommendation",
        views.WorkloadRecommendationView.as_view(),
        name="workload-by-key-recommendation",
    ),
    path(
        f"{NATURAL_KEY}/history",
        views.WorkloadHistoryView.as_view(),
        name="workload-by-key-history",
    ),
    path(
        f"{NATURAL_KEY}/policy",
        views.WorkloadPolicyView.as_view(),
        name="workload-by-key-policy",
    ),
    path(
        "workloads/<id:pk>/changes/approve",
        change_views.BulkApproveWorkloadView.as_view(),
        name="workload-changes-approve",
    ),
    path(
        "clusters/<slug:cluster>/namespaces/<k8sname:namespace>/changes/approve",
        change_views.BulkApproveNamespaceView.as_view(),
        name="namespace-changes-approve",
    ),
    path(
        "workloads/<id:pk>/changes/reject",
        change_views.BulkRejectView.as_view(),
        name="workload-changes-reject",
    ),
    path(
        "workloads/<id:pk>/changes/withdraw",
        change_views.BulkWithdrawView.as_view(),
        name="workload-changes-withdraw",
    ),
    path(
        "clusters/<slug:cluster>/namespaces/<k8sname:namespace>/changes/reject",
        change_views.BulkRejectView.as_view(),
        name="namespace-changes-reject",
    ),
    path(
        "clusters/<slug:cluster>/namespaces/<k8sname:namespace>/changes/withdraw",
        change_views.BulkWithdrawView.as_view(),
        name="namespace-changes-withdraw",
    ),
    path(
        "clusters/<slug:cluster>/namespaces/<k8sname:namespace>/compare-profiles",
        compare_views.CompareProfilesView.as_view(),
        name="namespace-compare-profiles",
    ),
    path(
        "clusters/<slug:cluster>/namespaces/<k8sname:namespace>/patch",
        rightsize_views.NamespacePatchView.as_view(),
        name="namespace-patch",
    ),
    path(
        "changes/<id:pk>/approve",
        change_views.ApproveChangeView.as_view(),
        name="change-approve",
    ),
    path(
        "changes/<id:pk>/reject",
        change_views.RejectChangeView.as_view(),
        name="change-reject",
    ),
    path("rightsize", rightsize_views.RightsizeView.as_view(), name="rightsize"),
    path("check", rightsize_views.CheckView.as_view(), name="check"),
    path("rollups", rollup_views.RollupView.as_view(), name="rollups"),
    path(
        "savings-trend", rollup_views.SavingsTrendView.as_view(), name="savings-trend"
    ),
    path(
        "recommendation-query",
        views.RecommendationQueryView.as_view(),
        name="recommendation-query",
    ),
    path(
        "recommendations/export",
        views.RecommendationExportView.as_view(),
        name="recommendation-export",
    ),
    path(
        "static-coefficients",
        rightsize_views.StaticCoefficientView.as_view(),
        name="static-coefficients",
    ),
    # Last: everything else under /api/v1/ is a JSON 404, never Django's HTML page.
    re_path(r"^.*$", not_found, name=CATCH_ALL_NAME),
]
