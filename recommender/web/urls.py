"""Dashboard URLs (mounted at the site root)."""

from django.contrib.auth import views as auth_views
from django.urls import path

from recommender.web import (
    account_views,
    changes,
    compare_views,
    rollup_views,
    rule_views,
    views,
    whatif_views,
)

urlpatterns = [
    path("", views.overview, name="overview"),
    path(
        "login/",
        auth_views.LoginView.as_view(
            template_name="recommender/login.html", redirect_authenticated_user=True
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("workloads/", views.workloads, name="workloads"),
    path("workloads/<int:pk>/", views.workload, name="workload"),
    path("workloads/<int:pk>/charts", views.workload_charts, name="workload_charts"),
    path("workloads/<int:pk>/policy", views.workload_policy, name="workload_policy"),
    path("workloads/<int:pk>/adopt", views.workload_adopt, name="workload_adopt"),
    path(
        "workloads/<int:pk>/what-if",
        whatif_views.workload_what_if,
        name="workload_what_if",
    ),
    path("rollups/", rollup_views.rollups, name="rollups"),
    path("policy-rules/", rule_views.policy_rules, name="policy_rules"),
    path("policy-rules/new", rule_views.policy_rule_edit, name="policy_rule_new"),
    path(
        "policy-rules/<int:pk>/", rule_views.policy_rule_edit, name="policy_rule_edit"
    ),
    path(
        "policy-rules/<int:pk>/delete",
        rule_views.policy_rule_delete,
        name="policy_rule_delete",
    ),
    path("changes/", changes.changes, name="changes"),
    path("changes/approve", changes.changes_bulk_approve, name="changes_bulk_approve"),
    path(
        "changes/reject",
        changes.changes_bulk_decide,
        {"decision": "reject"},
        name="changes_bulk_reject",
    ),
    path(
        "changes/withdraw",
        changes.changes_bulk_decide,
        {"decision": "withdraw"},
        name="changes_bulk_withdraw",
    ),
    path("updater/kill-switch", changes.kill_switch, name="kill_switch"),
    path("clusters/<int:pk>/pause", changes.cluster_pause, name="cluster_pause"),
    path(
        "clusters/<int:pk>/actuation",
        changes.cluster_actuation,
        name="cluster_actuation",
    ),
    path(
        "clusters/<int:pk>/compare",
        compare_views.cluster_compare,
        name="cluster_compare",
    ),
    path("changes/<int:pk>/approve", views.change_approve, name="change_approve"),
    path("changes/<int:pk>/reject", views.change_reject, name="change_reject"),
    path("audit/", account_views.audit, name="audit"),
    path("users/", account_views.users, name="users"),
    path("runs/", account_views.runs, name="runs"),
    path("tokens/", account_views.api_tokens, name="api_tokens"),
    path(
        "tokens/<int:pk>/revoke",
        account_views.api_token_revoke,
        name="api_token_revoke",
    ),
]
