"""deploy/: every overlay renders with `kubectl kustomize` and every object validates
against the Kubernetes 1.36 schemas (kubernetes-validate, strict: unknown fields are
errors; also 1.37, the newest it ships), plus the properties the design asks for."""

from __future__ import annotations

import base64
import os
import secrets
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from django.conf import settings

from tests.conftest import service_missing

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
OVERLAYS = sorted(p.name for p in (DEPLOY / "overlays").iterdir() if p.is_dir())
WRITER_ROLE = DEPLOY / "components" / "actuation" / "rbac-writer.yaml"
K8S_VERSIONS = ("1.36.0", "1.37.0")
# Custom resources of cert-manager: no schema in kubernetes-validate (checked below).
CERT_MANAGER = "cert-manager.io/v1"
CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingWebhookConfiguration",
}
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}


@cache
def render(overlay: str) -> tuple[dict, ...]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        service_missing("kubectl (with its built-in kustomize)")
    done = subprocess.run(
        [kubectl, "kustomize", str(DEPLOY / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return tuple(d for d in yaml.safe_load_all(done.stdout) if d)


def of_kind(objects, kind: str) -> list[dict]:
    return [o for o in objects if o["kind"] == kind]


def named(objects, kind: str, name: str) -> dict:
    (found,) = [o for o in of_kind(objects, kind) if o["metadata"]["name"] == name]
    return found


def test_the_overlays_are_the_documented_ones():
    assert OVERLAYS == ["actuation", "actuation-cert-manager", "production", "trial"]


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rendered_object_validates_against_the_kubernetes_schema(
    overlay, version
):
    objects = render(overlay)
    assert objects
    checked = 0
    for obj in objects:
        if obj["apiVersion"] == CERT_MANAGER:
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']}: {exc.message}")
        checked += 1
    assert checked == len([o for o in objects if o["apiVersion"] != CERT_MANAGER])


def test_the_schema_check_catches_a_wrong_field():
    (deployment, *_) = of_kind(render("production"), "Deployment")
    broken = yaml.safe_load(yaml.safe_dump(deployment))
    broken["spec"]["template"]["spec"]["containers"][0]["resources"]["requestz"] = {}

    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, "1.36.0", strict=True)


def test_cert_manager_objects_are_an_issuer_and_a_certificate_for_the_service():
    objects = render("actuation-cert-manager")
    custom = [o for o in objects if o["apiVersion"] == CERT_MANAGER]
    assert sorted(o["kind"] for o in custom) == ["Certificate", "Issuer"]
    certificate = named(objects, "Certificate", "vpaweb-webhook")
    assert certificate["spec"]["secretName"] == "vpaweb-webhook-tls"
    assert "vpaweb-webhook.vpaweb.svc" in certificate["spec"]["dnsNames"]
    assert certificate["spec"]["issuerRef"] == {
        "kind": "Issuer",
        "name": "vpaweb-selfsigned",
    }
    (install,) = named(objects, "Job", "vpaweb-webhook-install")["spec"]["template"][
        "spec"
    ]["containers"]
    assert "--cert-manager=vpaweb/vpaweb-webhook" in install["args"]
    assert not [a for a in install["args"] if a.startswith("--ca-bundle")]
    assert not [o for o in render("actuation") if o["apiVersion"] == CERT_MANAGER]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_pod_is_non_root_read_only_with_requests(overlay):
    for obj in render(overlay):
        if obj["kind"] not in ("Deployment", "StatefulSet", "Job"):
            continue
        pod = obj["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, obj["metadata"]["name"]
        for container in pod.get("initContainers", []) + pod["containers"]:
            where = f"{obj['metadata']['name']}/{container['name']}"
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True, where
            assert context["allowPrivilegeEscalation"] is False, where
            assert context["capabilities"]["drop"] == ["ALL"], where
            assert set(container["resources"]["requests"]) == {"cpu", "memory"}, where


def test_web_probes_health_and_readiness_and_every_deployment_has_a_budget():
    objects = render("production")
    web = named(objects, "Deployment", "vpaweb-web")
    (container,) = web["spec"]["template"]["spec"]["containers"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["args"] == ["web"]
    budgets = {
        tuple(sorted(p["spec"]["selector"]["matchLabels"].items()))
        for p in of_kind(objects, "PodDisruptionBudget")
    }
    for deployment in of_kind(objects, "Deployment"):
        labels = deployment["spec"]["selector"]["matchLabels"]
        if deployment["spec"]["replicas"] > 1:
            assert tuple(sorted(labels.items())) in budgets, deployment["metadata"]
    assert {d["metadata"]["name"] for d in of_kind(objects, "Deployment")} == {
        "vpaweb-web",
        "vpaweb-worker",
        "vpaweb-worker-heavy",
        "vpaweb-beat",
    }
    # The control loops' worker never takes the heavy queue; its own worker does.
    args = {
        d["metadata"]["name"]: d["spec"]["template"]["spec"]["containers"][0]["args"]
        for d in of_kind(objects, "Deployment")
    }
    assert args["vpaweb-worker"][-2:] == ["--queues", "celery"]
    assert args["vpaweb-worker-heavy"][-2:] == ["--queues", settings.HEAVY_QUEUE]


def test_production_sets_every_hardening_switch_from_the_environment():
    config = named(render("production"), "ConfigMap", "vpaweb-config")["data"]
    assert config["SECURE_SSL_REDIRECT"] == "true"
    assert config["SESSION_COOKIE_SECURE"] == "true"
    assert config["CSRF_COOKIE_SECURE"] == "true"
    assert int(config["SECURE_HSTS_SECONDS"]) >= 31536000
    assert config["SECURE_HSTS_INCLUDE_SUBDOMAINS"] == "true"
    assert config["SECURE_PROXY_SSL_HEADER"] == "HTTP_X_FORWARDED_PROTO,https"


def role_rules(objects) -> dict[str, list[dict]]:
    return {r["metadata"]["name"]: r["rules"] for r in of_kind(objects, "ClusterRole")}


def test_off_only_overlays_cannot_write_to_the_cluster():
    for overlay in ("production", "trial"):
        objects = render(overlay)
        assert set(role_rules(objects)) == {"vpaweb-reader"}
        for rule in role_rules(objects)["vpaweb-reader"]:
            assert not set(rule["verbs"]) & WRITE_VERBS
        assert not of_kind(objects, "MutatingWebhookConfiguration")
        assert not of_kind(objects, "Role")


@pytest.mark.parametrize("overlay", ["actuation", "actuation-cert-manager"])
def test_the_actuation_overlays_bind_the_one_writer_role(overlay):
    """The writer role the overlays render is the file every other path applies
    (what it grants is checked in tests/cluster/test_kubernetes_rbac_writer.py)."""
    objects = render(overlay)
    roles = role_rules(objects)
    assert set(roles) == {"vpaweb-reader", "vpaweb-writer"}
    (role,) = [
        d
        for d in yaml.safe_load_all(WRITER_ROLE.read_text())
        if d["kind"] == "ClusterRole"
    ]
    assert roles["vpaweb-writer"] == role["rules"]
    for rule in roles["vpaweb-reader"]:
        assert not set(rule["verbs"]) & WRITE_VERBS
    bindings = {
        b["roleRef"]["name"]: b["subjects"]
        for b in of_kind(objects, "ClusterRoleBinding")
    }
    assert bindings["vpaweb-writer"] == [
        {"kind": "ServiceAccount", "name": "vpaweb", "namespace": "vpaweb"}
    ]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_of_an_overlay_runs_the_release_image(overlay):
    objects = render(overlay)
    images = {}
    for obj in objects:
        if obj["kind"] not in ("Deployment", "StatefulSet", "Job"):
            continue
        pod = obj["spec"]["template"]["spec"]
        for container in pod.get("initContainers", []) + pod["containers"]:
            images[f"{obj['metadata']['name']}/{container['name']}"] = container[
                "image"
            ]
    web = images["vpaweb-web/web"]
    if overlay != "trial":
        assert web == "registry.example.com/vpaweb:1.0.0"
    # The trial's PostgreSQL and Redis run their own images.
    ours = {
        k: v
        for k, v in images.items()
        if not k.startswith(("vpaweb-postgres", "vpaweb-redis"))
    }
    assert ours == dict.fromkeys(ours, web)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_overlay_renders_the_webhook_configuration(overlay):
    """`webhook install` owns the MutatingWebhookConfiguration: an overlay that rendered
    one would fight it (re-applying it after an install by URL is a 422, after the
    Job's install it drops the opt-out, the path and the timeout)."""
    assert not of_kind(render(overlay), "MutatingWebhookConfiguration")
    assert not of_kind(render(overlay), "ValidatingWebhookConfiguration")


@pytest.mark.parametrize("overlay", ["actuation", "actuation-cert-manager"])
def test_the_webhook_service_and_deployment_match(overlay):
    objects = render(overlay)
    (install,) = named(objects, "Job", "vpaweb-webhook-install")["spec"]["template"][
        "spec"
    ]["containers"]
    namespace, _, name = next(
        a.split("=", 1)[1] for a in install["args"] if a.startswith("--service=")
    ).partition("/")
    service = named(objects, "Service", name)
    assert service["metadata"]["namespace"] == namespace
    assert service["spec"]["ports"][0]["port"] == 443  # the port install writes
    deployment = named(objects, "Deployment", "vpaweb-webhook")
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    assert {"name": "tls", "secret": {"secretName": "vpaweb-webhook-tls"}} in volumes


def test_without_cert_manager_the_job_installs_the_hook_with_the_secrets_ca():
    objects = render("actuation")
    job = named(objects, "Job", "vpaweb-webhook-install")
    spec = job["spec"]["template"]["spec"]
    (install,) = spec["containers"]
    assert install["args"][:3] == ["manage", "webhook", "install"]
    assert "--ca-bundle=/etc/vpaweb/webhook-tls/ca.crt" in install["args"]
    mounts = {m["name"]: m["mountPath"] for m in install["volumeMounts"]}
    assert mounts["tls"] == "/etc/vpaweb/webhook-tls"
    config = named(objects, "ConfigMap", "vpaweb-config")["data"]
    assert config["VPAWEB_WEBHOOK_CLUSTER"]  # the Job's --cluster=$(...)


def _webhook_containers(objects):
    for obj in objects:
        if obj["kind"] not in {"Deployment", "Job"}:
            continue
        pod = obj["spec"]["template"]["spec"]
        for container in pod.get("initContainers", []) + pod["containers"]:
            if container.get("args", [])[:2] == ["manage", "webhook"]:
                yield obj["metadata"]["name"], container


@pytest.mark.parametrize("overlay", ["actuation", "actuation-cert-manager"])
def test_the_webhook_manifests_call_the_real_webhook_command(overlay):
    """Every `manage webhook ...` container parses with the command's own parser."""
    from recommender.management.commands.webhook import Command

    objects = render(overlay)
    config = named(objects, "ConfigMap", "vpaweb-config")["data"]
    seen = set()
    for owner, container in _webhook_containers(objects):
        args = [
            arg.replace("$(VPAWEB_WEBHOOK_CLUSTER)", config["VPAWEB_WEBHOOK_CLUSTER"])
            for arg in container["args"][2:]
        ]
        assert "$(" not in " ".join(args), (owner, args)
        parser = Command().create_parser("manage.py", "webhook")
        options = vars(parser.parse_args(args))  # SystemExit on an unknown flag
        seen.add((owner, options["action"]))
        if options["action"] == "serve":
            port = container["ports"][0]["containerPort"]
            assert options["port"] == port
            mount = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
            assert options["cert"] == f"{mount['tls']}/tls.crt"
            assert options["key"] == f"{mount['tls']}/tls.key"
            # A stale cache (the database down) takes the pod out of the Service;
            # liveness fails only once no cache loaded for longer than one may be
            # used, when a restart loses nothing.
            paths = {
                probe: container[probe]["httpGet"]["path"]
                for probe in ("startupProbe", "livenessProbe", "readinessProbe")
            }
            assert paths == {
                "startupProbe": "/readyz",
                "livenessProbe": "/healthz",
                "readinessProbe": "/readyz",
            }
    assert seen == {("vpaweb-webhook", "serve"), ("vpaweb-webhook-install", "install")}


def test_the_webhook_hardening_components_narrow_its_port_and_ask_for_a_client_ca(
    tmp_path,
):
    """An overlay of `actuation` with webhook-from-control-plane (its CIDR set as the
    component says) and webhook-client-ca: 8443 only from that CIDR, nothing else
    opened, and `serve` given the mounted CA (parsed by the command's own parser)."""
    from recommender.management.commands.webhook import Command

    kubectl = shutil.which("kubectl")
    if kubectl is None:
        service_missing("kubectl (with its built-in kustomize)")
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [os.path.relpath(DEPLOY / "overlays/actuation", tmp_path)],
                "components": [
                    os.path.relpath(DEPLOY / "components" / name, tmp_path)
                    for name in ("webhook-from-control-plane", "webhook-client-ca")
                ],
                "patches": [
                    {
                        "target": {"kind": "NetworkPolicy", "name": "vpaweb-webhook"},
                        "patch": "- op: replace\n"
                        "  path: /spec/ingress/0/from/0/ipBlock/cidr\n"
                        "  value: 10.0.0.0/28\n",
                    }
                ],
            }
        )
    )
    done = subprocess.run(
        [kubectl, "kustomize", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    objects = tuple(d for d in yaml.safe_load_all(done.stdout) if d)
    policy = named(objects, "NetworkPolicy", "vpaweb-webhook")
    assert policy["spec"]["ingress"] == [
        {
            "from": [{"ipBlock": {"cidr": "10.0.0.0/28"}}],
            "ports": [{"protocol": "TCP", "port": 8443}],
        }
    ]
    assert (
        policy["spec"]["egress"]
        == named(render("actuation"), "NetworkPolicy", "vpaweb-webhook")["spec"][
            "egress"
        ]
    )
    deployment = named(objects, "Deployment", "vpaweb-webhook")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    parser = Command().create_parser("manage.py", "webhook")
    options = vars(parser.parse_args(container["args"][2:]))
    mount = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert options["client_ca"] == f"{mount['client-ca']}/ca.crt"
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["client-ca"]["configMap"] == {"name": "vpaweb-webhook-client-ca"}


def test_the_trial_runs_its_own_database_and_broker():
    objects = render("trial")
    assert named(objects, "StatefulSet", "vpaweb-postgres")
    assert named(objects, "Deployment", "vpaweb-redis")
    secret = named(objects, "Secret", "vpaweb-secrets")
    url = base64.b64decode(secret["data"]["DATABASE_URL"]).decode()
    assert "@vpaweb-postgres:5432/" in url
    config = named(objects, "ConfigMap", "vpaweb-config")["data"]
    assert config["VPAWEB_SIMULATION"] == "true"
    assert config["SECURE_SSL_REDIRECT"] == "false"  # reached by port-forward, http


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_everything_namespaced_is_in_vpawebs_namespace(overlay):
    for obj in render(overlay):
        if obj["kind"] in CLUSTER_SCOPED:
            continue
        assert obj["metadata"].get("namespace") == "vpaweb", (
            f"{obj['kind']}/{obj['metadata']['name']}"
        )


def test_check_deploy_reports_nothing_with_the_production_configmap(tmp_path):
    """`manage.py check --deploy` with exactly the production ConfigMap (and a Secret's
    worth of values) reports no issue: every hardening switch is set."""
    config = named(render("production"), "ConfigMap", "vpaweb-config")["data"]
    # Only what a pod would have: nothing of this test session's environment.
    env = {
        key: os.environ[key] for key in ("PATH", "HOME", "LANG") if key in os.environ
    }
    env.update(config)
    env.update(
        SECRET_KEY=secrets.token_urlsafe(50),
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        VPAWEB_VAR_DIR=str(tmp_path),
    )
    env.pop("REDIS_URL", None)
    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


def _selects(selector: dict, labels: dict) -> bool:
    """A label selector (matchLabels and In expressions) matched against labels."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        assert expression["operator"] == "In"
        if labels.get(expression["key"]) not in expression["values"]:
            return False
    return True


# What each component may receive (port -> who) and reach (ports), nothing more.
INGRESS = {
    "web": {8000: "anyone"},
    "worker": {9808: "prometheus"},
    "worker-heavy": {9808: "prometheus"},
    "beat": {},
    "webhook": {8443: "anyone"},
    "webhook-install": {},
    "postgres": {5432: "vpaweb"},
    "redis": {6379: "vpaweb"},
}
EGRESS_PORTS = {53, 5432, 6379, 443, 6443, 9090}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_network_policies_deny_by_default_and_allow_only_what_each_pod_uses(overlay):
    objects = render(overlay)
    policies = of_kind(objects, "NetworkPolicy")
    (deny,) = [p for p in policies if p["metadata"]["name"] == "vpaweb-default-deny"]
    assert deny["spec"]["podSelector"] == {
        "matchLabels": {"app.kubernetes.io/name": "vpaweb"}
    }
    assert deny["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert "ingress" not in deny["spec"] and "egress" not in deny["spec"]
    allows = [p for p in policies if p is not deny]
    templates = [
        o["spec"]["template"]["metadata"]["labels"]
        for o in objects
        if o["kind"] in ("Deployment", "StatefulSet", "Job")
    ]
    assert templates
    for labels in templates:
        assert _selects(deny["spec"]["podSelector"], labels)
        (policy,) = [p for p in allows if _selects(p["spec"]["podSelector"], labels)]
        component = labels["app.kubernetes.io/component"]
        received = {}
        for rule in policy["spec"].get("ingress", []):
            (port,) = rule["ports"]
            sources = rule.get("from")
            if sources is None:
                who = "anyone"
            else:
                (source,) = sources
                who = (
                    "prometheus"
                    if source["podSelector"].get("matchLabels")
                    == {"app.kubernetes.io/name": "prometheus"}
                    else "vpaweb"
                )
            received[port["port"]] = who
        assert received == INGRESS[component], (overlay, component)
        reached = {
            port["port"]
            for rule in policy["spec"].get("egress", [])
            for port in rule["ports"]
        }
        assert reached <= EGRESS_PORTS, (overlay, component, reached)
        if component in ("web", "worker", "worker-heavy", "beat"):
            assert {5432, 6379} <= reached
        if component in ("worker", "worker-heavy"):
            assert {443, 6443} <= reached  # the API server
    if overlay == "trial":
        (redis,) = [p for p in allows if p["metadata"]["name"] == "vpaweb-redis"]
        (source,) = redis["spec"]["ingress"][0]["from"]
        components = source["podSelector"]["matchExpressions"][1]["values"]
        assert "webhook" not in components and "postgres" not in components


# What each refresh worker process is given (its peak RSS plus 25 %) at the fleet
# size each overlay plans for, from the sizing table of docs/refresh.md ("Memory of a
# worker"), and the Celery parent process.
WORKER_PROCESS_MIB = {"trial": 540}  # 1,000 containers (the trial's simulation)
WORKER_PROCESS_MIB_DEFAULT = 1720  # 100,000 containers
WORKER_PARENT_MIB = 160


def _mebibytes(quantity: str) -> float:
    units = {"Ki": 2**-10, "Mi": 1, "Gi": 2**10}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return float(quantity.removesuffix(suffix)) * factor
    return float(quantity) / 2**20


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_refresh_workers_memory_holds_each_process_at_its_planned_peak(overlay):
    """The pod's limit holds --concurrency processes at their planned memory plus the
    parent, and no more than 5 % above (the plan is the headroom), and the request is
    the limit: a refresh worker is never OOM-killed by its own plan, nor evicted
    first when its node runs short."""
    worker = named(render(overlay), "Deployment", "vpaweb-worker")
    (container,) = [
        c
        for c in worker["spec"]["template"]["spec"]["containers"]
        if c["name"] == "worker"
    ]
    args = container["args"]
    assert args[args.index("--queues") + 1] == "celery"
    concurrency = int(args[args.index("--concurrency") + 1])
    resources = container["resources"]
    limit = _mebibytes(resources["limits"]["memory"])
    per_process = WORKER_PROCESS_MIB.get(overlay, WORKER_PROCESS_MIB_DEFAULT)
    planned = concurrency * per_process + WORKER_PARENT_MIB
    assert planned <= limit <= planned * 1.05, (limit, planned)
    assert resources["requests"]["memory"] == resources["limits"]["memory"]
