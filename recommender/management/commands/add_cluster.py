"""`manage.py add_cluster`: register a Kubernetes cluster once vpaweb can read it."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from recommender.errors import VpawebError
from recommender.services.actuation.control import set_actuation_allowed
from recommender.services.operations.clusters import add_kubernetes_cluster


class Command(BaseCommand):
    help = (
        "Add a Kubernetes cluster, read through a kubeconfig context (KUBECONFIG, "
        "else ~/.kube/config) or the pod's service account. Nothing is stored unless "
        "the API server answers: its version and one pod are read first."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True, help="a slug, e.g. prod-eu-1")
        how = parser.add_mutually_exclusive_group(required=True)
        how.add_argument("--context", help="the kubeconfig context to use")
        how.add_argument(
            "--in-cluster",
            action="store_true",
            help="use the service account of the pod vpaweb runs in",
        )
        parser.add_argument(
            "--namespace-selector",
            default="",
            help="read only the namespaces with these labels, e.g. "
            "vpaweb.io/enabled=true (a label selector; default: the whole cluster)",
        )
        parser.add_argument(
            "--allow-actuation",
            action="store_true",
            help="let vpaweb write to the cluster (webhook registration, resizes, "
            "evictions, events, VPA status) where a policy says so; default: "
            "read only, until an admin allows it",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            cluster, version = add_kubernetes_cluster(
                name=options["name"],
                context=options["context"] or "",
                in_cluster=options["in_cluster"],
                namespace_selector=options["namespace_selector"],
            )
        except VpawebError as exc:
            raise CommandError(exc.message) from None
        if options["allow_actuation"]:
            set_actuation_allowed(
                cluster=cluster, allowed=True, actor=None, now=timezone.now()
            )
        how = f"context {cluster.context!r}" if cluster.context else "in-cluster config"
        if cluster.namespace_selector:
            how += f", namespaces labelled {cluster.namespace_selector!r} only"
        self.stdout.write(
            f"Added cluster {cluster.name!r} (Kubernetes {version}, {how}). "
            "Its workloads start in Off mode: recommendations only. "
            + (
                "Actuation is allowed: vpaweb writes where a policy says so."
                if options["allow_actuation"]
                else "Actuation is not allowed: vpaweb writes nothing to it."
            )
        )
