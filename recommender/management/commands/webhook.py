"""`manage.py webhook serve|install|uninstall|certs` (docs/webhook.md)."""
# - ``serve --cert FILE --key FILE [--client-ca FILE] [--host H] [--port P]
#   [--processes N] [--cluster NAME ...]``: HTTPS, in N processes sharing the port
#   (SO_REUSEPORT) if asked (TLS 1.2+, files reloaded when they change), ``POST
#   /mutate[/<cluster>]`` for the clusters named (default ``VPAWEB_WEBHOOK_CLUSTER``,
#   else every registered one; with a client CA, only from clients presenting a
#   certificate it signed), ``GET /healthz`` (liveness) and ``GET /readyz``
#   (readiness), until SIGTERM or Ctrl-C.
# - ``install --cluster NAME (--url URL | --service NS/NAME) [--ca-bundle FILE]
#   [--timeout S]``: create or update the MutatingWebhookConfiguration in that cluster
#   (needs the writer role, deploy/components/actuation/rbac-writer.yaml). ``--print``
#   shows it instead.
# - ``uninstall --cluster NAME``: delete it; pods are then created as submitted.
# - ``certs --out DIR (--service NS/NAME | --dns NAME ... | --ip ADDR ...) [--client
#   NAME]``: a CA and serving certificate for clusters without cert-manager (and a
#   client certificate for the API server, with its own CA).

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from recommender.errors import VpawebError
from recommender.models import Cluster
from recommender.services.admission.certs import create_certificates, service_names
from recommender.services.admission.registration import (
    CONFIGURATION_NAME,
    install_webhook,
    read_ca_bundle,
    uninstall_webhook,
    webhook_configuration,
)
from recommender.services.connections import cluster_writer_for
from recommender.webhook import start_webhook_server, stop_webhook_server


def _kubernetes_cluster(name: str) -> Cluster:
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        raise CommandError(f"cluster {name!r} does not exist (manage.py add_cluster)")
    if cluster.kind != Cluster.Kind.KUBERNETES:
        raise CommandError(
            f"cluster {name!r} is {cluster.kind}: only a Kubernetes cluster has a "
            "webhook to install (the simulated cluster admits its pods in-process)"
        )
    if not cluster.actuation_allowed:
        raise CommandError(
            f"actuation is not allowed for cluster {name!r}: vpaweb writes nothing to "
            "it. An admin allows it on the Changes page (or manage.py add_cluster "
            "--allow-actuation for a new cluster)"
        )
    return cluster


class Command(BaseCommand):
    """Serve, register or unregister the admission webhook, or make its certificates."""

    help = "The admission webhook: serve, install, uninstall, certs."

    def add_arguments(self, parser: CommandParser) -> None:
        """One sub-command each."""
        sub = parser.add_subparsers(dest="action", required=True)
        serve = sub.add_parser("serve", help="serve the webhook over HTTPS")
        serve.add_argument("--host", default="0.0.0.0")
        serve.add_argument("--port", type=int, default=8443)
        serve.add_argument(
            "--processes",
            type=int,
            default=1,
            help="server processes sharing the port (SO_REUSEPORT): one per core",
        )
        serve.add_argument("--cert", required=True, help="PEM certificate (chain)")
        serve.add_argument("--key", required=True, help="PEM private key")
        serve.add_argument(
            "--client-ca",
            default=None,
            help="PEM CA: admit reviews only from clients presenting a certificate "
            "it signed (the API server's); default VPAWEB_WEBHOOK_CLIENT_CA",
        )
        serve.add_argument(
            "--cluster",
            action="append",
            default=[],
            help="a cluster served (repeat for more; the first is /mutate's): default "
            "VPAWEB_WEBHOOK_CLUSTER, else every cluster registered at start",
        )
        install = sub.add_parser("install", help="create/update the configuration")
        install.add_argument("--cluster", required=True)
        where = install.add_mutually_exclusive_group(required=True)
        where.add_argument("--url", help="https://host:port of `webhook serve`")
        where.add_argument("--service", help="NAMESPACE/NAME of its Service")
        install.add_argument("--ca-bundle", help="PEM CA that signed the serving cert")
        install.add_argument(
            "--cert-manager",
            metavar="NAMESPACE/CERTIFICATE",
            help="let cert-manager inject the CA of this Certificate",
        )
        install.add_argument("--timeout", type=int, default=None, help="1-5 seconds")
        install.add_argument("--kubeconfig", default=None)
        install.add_argument(
            "--print", action="store_true", help="print the object, do not write it"
        )
        uninstall = sub.add_parser("uninstall", help="delete the configuration")
        uninstall.add_argument("--cluster", required=True)
        uninstall.add_argument("--kubeconfig", default=None)
        certs = sub.add_parser("certs", help="write a CA and a serving certificate")
        certs.add_argument("--out", required=True, help="directory for the files")
        certs.add_argument("--service", help="NAMESPACE/NAME of the webhook Service")
        certs.add_argument("--dns", action="append", default=[])
        certs.add_argument("--ip", action="append", default=[])
        certs.add_argument(
            "--client",
            metavar="NAME",
            help="also a client certificate for the API server (client.crt, "
            "client.key) and its CA (client-ca.crt, for serve --client-ca)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        """Run the chosen sub-command."""
        try:
            getattr(self, f"_{options['action']}")(options)
        except VpawebError as exc:
            raise CommandError(str(exc)) from None

    def _serve(self, options: dict[str, Any]) -> None:
        clusters = options["cluster"] or [
            name for name in [settings.WEBHOOK_CLUSTER] if name
        ]
        if not clusters:
            # Fixed now: a cluster registered later is served after a restart.
            clusters = list(
                Cluster.objects.order_by("name").values_list("name", flat=True)
            )
        cluster = clusters[0] if len(clusters) == 1 or options["cluster"] else ""
        unknown = set(clusters) - set(
            Cluster.objects.filter(name__in=clusters).values_list("name", flat=True)
        )
        if unknown:
            raise CommandError(
                f"no such cluster: {', '.join(sorted(unknown))} (manage.py add_cluster)"
            )
        processes = options["processes"]
        if processes < 1 or (processes > 1 and not options["port"]):
            raise CommandError("--processes: 1 or more, and more than 1 needs a --port")
        client_ca = options["client_ca"] or settings.WEBHOOK_CLIENT_CA
        if client_ca and not Path(client_ca).is_file():
            raise CommandError(f"--client-ca {client_ca}: no such file")
        children = _fork_servers(processes - 1)
        server, stop, threads = start_webhook_server(
            host=options["host"],
            port=options["port"],
            cert=Path(options["cert"]),
            key=Path(options["key"]),
            default_cluster=cluster,
            deadline_s=settings.WEBHOOK_DEADLINE_S,
            clusters=clusters,
            reuse_port=processes > 1,
            client_ca=Path(client_ca) if client_ca else None,
        )
        self.stdout.write(
            f"admission webhook at https://{options['host']}:"
            f"{server.server_address[1]}/mutate (clusters {', '.join(clusters)})"
        )
        done = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: done.set())
        with contextlib.suppress(KeyboardInterrupt):
            done.wait()
        stop_webhook_server(server, stop, threads)
        if children is None:
            os._exit(0)  # a forked server: the parent's exit path is not ours
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        for pid in children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)

    def _install(self, options: dict[str, Any]) -> None:
        body = webhook_configuration(
            url=options["url"],
            service=options["service"],
            cluster=options["cluster"],
            ca_bundle=read_ca_bundle(options["ca_bundle"]),
            timeout_s=options["timeout"],
            inject_ca_from=options["cert_manager"],
        )
        if options["print"]:
            self.stdout.write(json.dumps(body, indent=2))
            return
        cluster = _kubernetes_cluster(options["cluster"])
        writer = cluster_writer_for(
            cluster, registration=True, kubeconfig=options["kubeconfig"]
        )
        try:
            result = install_webhook(writer=writer, body=body)
        finally:
            writer.close()
        self.stdout.write(
            f"MutatingWebhookConfiguration {CONFIGURATION_NAME} installed in "
            f"{cluster.name} (HTTP {result.status})"
        )

    def _uninstall(self, options: dict[str, Any]) -> None:
        cluster = _kubernetes_cluster(options["cluster"])
        writer = cluster_writer_for(
            cluster, registration=True, kubeconfig=options["kubeconfig"]
        )
        try:
            uninstall_webhook(writer=writer)
        finally:
            writer.close()
        self.stdout.write(
            f"MutatingWebhookConfiguration {CONFIGURATION_NAME} removed from "
            f"{cluster.name}: new pods are created as submitted"
        )

    def _certs(self, options: dict[str, Any]) -> None:
        dns = list(options["dns"])
        if options["service"]:
            namespace, _, name = options["service"].partition("/")
            if not namespace or not name:
                raise CommandError("--service must be NAMESPACE/NAME")
            dns = service_names(namespace, name) + dns
        if not dns and not options["ip"]:
            raise CommandError("give --service, --dns or --ip: the names to certify")
        paths = create_certificates(
            directory=Path(options["out"]),
            dns_names=dns,
            ip_addresses=options["ip"],
            client_name=options["client"],
        )
        self.stdout.write(
            f"wrote {paths.ca_cert} (for install --ca-bundle), {paths.cert} and "
            f"{paths.key} (for serve --cert/--key)"
        )
        if paths.client_ca_cert:
            self.stdout.write(
                f"wrote {paths.client_ca_cert} (for serve --client-ca), "
                f"{paths.client_cert} and {paths.client_key} (for the API server's "
                "admission kubeconfig, docs/webhook.md)"
            )


def _fork_servers(count: int) -> list[int] | None:
    """Fork ``count`` more server processes: their pids in the parent, None in each
    child. Database connections are closed first (a child opens its own); the parent
    stops its children when it stops (SIGTERM)."""
    if count <= 0:
        return []
    connections.close_all()
    children = []
    for _ in range(count):
        pid = os.fork()
        if pid == 0:
            return None
        children.append(pid)
    return children
