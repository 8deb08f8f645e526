"""API of policy rules: list, read, create, change and delete, each edit previewable
with ``?dry_run=true`` (how many workloads change, which, and what each gets) and
refused (409 ``confirmation_required``) without ``?confirm=true`` when it turns
actuation on for more than one workload (services/policy/rule_edits.py)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from recommender.api.auth import CanReadOrWrite, actor_of
from recommender.api.fields import ClosedSerializer
from recommender.api.formats import JSONParser
from recommender.engine.capping import MODE_IN_PLACE_OR_RECREATE
from recommender.errors import InvalidInput, NotFound
from recommender.models import PolicyRule
from recommender.services.policy import rule_edits
from recommender.services.policy.rules import ANNOTATED_KINDS
from recommender.services.policy.validation import CHANGEABLE_FIELDS


class RuleSerializer(serializers.Serializer):
    """A policy rule: its scope, its policy fields, and how many workloads take a
    field from it."""

    id = serializers.IntegerField(allow_null=True)
    name = serializers.CharField()
    priority = serializers.IntegerField(
        help_text="among rules of one level (label, namespace, cluster) the higher "
        "wins; then the older rule"
    )
    is_enabled = serializers.BooleanField()
    cluster = serializers.CharField(
        allow_null=True, help_text="a cluster's name; null: every cluster"
    )
    namespaces = serializers.ListField(child=serializers.CharField())
    namespace_selector = serializers.CharField(
        allow_blank=True, help_text="namespace labels, Kubernetes syntax"
    )
    workload_selector = serializers.CharField(
        allow_blank=True, help_text="workload labels, Kubernetes syntax"
    )
    kinds = serializers.ListField(child=serializers.CharField())
    policy = serializers.DictField(
        help_text="the policy fields the rule gives, as a workload's policy takes them"
    )
    level = serializers.ChoiceField(
        choices=["label", "namespace", "cluster"],
        help_text="label: a workload selector; namespace: namespaces or a namespace "
        "selector; cluster: neither. The more specific wins, field by field",
    )


class RuleListItemSerializer(RuleSerializer):
    """A rule with how many policies take a field from it now."""

    workloads = serializers.IntegerField()


class RuleInputSerializer(ClosedSerializer):
    """A rule as it is created (``name`` and ``policy`` required) or changed (any
    key; those left out keep their value). The service validates the values."""

    refuses_unknown_fields = True
    name = serializers.CharField(required=False, max_length=100)
    priority = serializers.IntegerField(required=False)
    is_enabled = serializers.BooleanField(required=False)
    cluster = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    namespaces = serializers.ListField(
        child=serializers.CharField(max_length=63), required=False, max_length=200
    )
    namespace_selector = serializers.CharField(
        required=False, allow_blank=True, max_length=1000
    )
    workload_selector = serializers.CharField(
        required=False, allow_blank=True, max_length=1000
    )
    kinds = serializers.ListField(
        child=serializers.ChoiceField(choices=list(ANNOTATED_KINDS)),
        required=False,
    )
    policy = serializers.DictField(
        required=False,
        help_text="policy fields: " + ", ".join(CHANGEABLE_FIELDS),
    )


class EditQuerySerializer(serializers.Serializer):
    """Query parameters of every rule edit."""

    dry_run = serializers.BooleanField(
        required=False,
        default=False,
        help_text="true: store nothing, answer what the edit would change",
    )
    confirm = serializers.BooleanField(
        required=False,
        default=False,
        help_text="needed when the edit turns actuation on for more than one workload",
    )


class PreviewChangeSerializer(serializers.Serializer):
    before = serializers.JSONField()
    after = serializers.JSONField()
    given_by = serializers.CharField(help_text="where the new value comes from")


class PreviewWorkloadSerializer(serializers.Serializer):
    workload_id = serializers.IntegerField()
    workload = serializers.CharField(help_text="namespace/kind/name")
    changes = serializers.DictField(child=PreviewChangeSerializer())


class PreviewSerializer(serializers.Serializer):
    applied = serializers.BooleanField(help_text="false for a dry run")
    count = serializers.IntegerField(help_text="workloads whose policy changes")
    actuation_turned_on = serializers.IntegerField(
        help_text="workloads going from mode Off to an acting mode"
    )
    confirmation_required = serializers.BooleanField(
        help_text="applying needs confirm=true (actuation on for more than one)"
    )
    workloads = PreviewWorkloadSerializer(
        many=True, help_text=f"the first {rule_edits.PREVIEW_LIMIT}"
    )


class RuleEditSerializer(serializers.Serializer):
    rule = RuleSerializer(allow_null=True)
    preview = PreviewSerializer()


def _query(request: Request) -> tuple[bool, bool]:
    query = EditQuerySerializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    return bool(query.validated_data["dry_run"]), bool(query.validated_data["confirm"])


def _body(request: Request) -> dict[str, Any]:
    serializer = RuleInputSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    # The raw values: the service validates them with the policy's own rules.
    return {key: request.data[key] for key in serializer.validated_data}


def _answer(preview: rule_edits.RulePreview) -> dict[str, Any]:
    rule = preview.rule
    return {
        "rule": rule_edits.rule_snapshot(rule) if rule is not None else None,
        "preview": preview.as_json(),
    }


EXAMPLE = OpenApiExample(
    "payments in InPlaceOrRecreate, automatic approval",
    value={
        "name": "payments-auto",
        "namespace_selector": "team=payments",
        "kinds": ["Deployment"],
        "policy": {
            "mode": MODE_IN_PLACE_OR_RECREATE,
            "approval": "automatic",
            "profile": "peak-memory",
        },
    },
    request_only=True,
)


class RuleListView(APIView):
    """Every policy rule; create one (write access; audited)."""

    permission_classes = [CanReadOrWrite]
    parser_classes = [JSONParser]
    extra_error_statuses = {
        "409": "The rule turns actuation on for more than one workload: confirm it."
    }

    @extend_schema(
        summary="List policy rules",
        responses=RuleListItemSerializer(many=True),
        tags=["policies"],
    )
    def get(self, request: Request) -> Response:
        counts = rule_edits.workloads_per_rule()
        return Response(
            [
                {**rule_edits.rule_snapshot(rule), "workloads": counts.get(rule.pk, 0)}
                for rule in PolicyRule.objects.select_related("cluster")
            ]
        )

    @extend_schema(
        summary="Create a policy rule, or preview it with dry_run=true",
        parameters=[EditQuerySerializer],
        request=RuleInputSerializer,
        responses={200: RuleEditSerializer, 201: RuleEditSerializer},
        examples=[EXAMPLE],
        tags=["policies"],
    )
    def post(self, request: Request) -> Response:
        dry_run, confirm = _query(request)
        actor, label = actor_of(request)
        preview = rule_edits.save_rule(
            rule_id=None,
            data=_body(request),
            actor=actor,
            actor_label=label,
            now=timezone.now(),
            dry_run=dry_run,
            confirm=confirm,
        )
        code = status.HTTP_200_OK if dry_run else status.HTTP_201_CREATED
        return Response(_answer(preview), status=code)


class RuleDetailView(APIView):
    """One policy rule: read, change or delete it (write access; audited)."""

    permission_classes = [CanReadOrWrite]
    parser_classes = [JSONParser]
    extra_error_statuses = {
        "409": "The edit turns actuation on for more than one workload: confirm it."
    }

    @extend_schema(
        summary="Get a policy rule", responses=RuleListItemSerializer, tags=["policies"]
    )
    def get(self, request: Request, pk: int) -> Response:
        rule = PolicyRule.objects.select_related("cluster").filter(pk=pk).first()
        if rule is None:
            raise NotFound(f"policy rule {pk} does not exist")
        return Response(
            {
                **rule_edits.rule_snapshot(rule),
                "workloads": rule_edits.workloads_per_rule().get(rule.pk, 0),
            }
        )

    @extend_schema(
        summary="Change a policy rule, or preview it with dry_run=true",
        parameters=[EditQuerySerializer],
        request=RuleInputSerializer,
        responses=RuleEditSerializer,
        tags=["policies"],
    )
    def patch(self, request: Request, pk: int) -> Response:
        dry_run, confirm = _query(request)
        actor, label = actor_of(request)
        data = _body(request)
        if not data:
            raise InvalidInput("send at least one field of the rule", field="rule")
        preview = rule_edits.save_rule(
            rule_id=pk,
            data=data,
            actor=actor,
            actor_label=label,
            now=timezone.now(),
            dry_run=dry_run,
            confirm=confirm,
        )
        return Response(_answer(preview))

    @extend_schema(
        summary="Delete a policy rule, or preview it with dry_run=true",
        parameters=[EditQuerySerializer],
        request=None,
        responses={200: RuleEditSerializer},
        tags=["policies"],
    )
    def delete(self, request: Request, pk: int) -> Response:
        dry_run, confirm = _query(request)
        actor, label = actor_of(request)
        preview = rule_edits.delete_rule(
            rule_id=pk,
            actor=actor,
            actor_label=label,
            now=timezone.now(),
            dry_run=dry_run,
            confirm=confirm,
        )
        return Response(_answer(preview))
