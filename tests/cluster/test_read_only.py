"""Off means off (docs/updater.md), checked in the source: every cluster write goes
through the one ``ClusterWriter`` interface (``recommender/cluster/writer.py``). No
module calls a Kubernetes client write method; only the Kubernetes writer sends a
request through the raw ``call_api``; no adapter (reader) has a write method; and only
the updater's apply step, its VPA status step and the webhook's registration call a
writer's write methods, and only ``services/connections.cluster_writer_for`` makes a
writer (the one factory). The behavioural half (every
request a refresh sends is a GET; an all-Off cluster gets no write over many updater
cycles) is in test_kubernetes_refresh.py and tests/services/test_updater_fake_api.py."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import kubernetes.client

import recommender

SOURCE = Path(recommender.__file__).parent
# The only modules allowed to write to a cluster: the interface and its implementations.
WRITERS = {
    "cluster/writer.py",
    "cluster/kube_writer.py",
    "cluster/simulated_writer.py",
}
WRITE_PREFIXES = ("create_", "patch_", "replace_", "delete_", "evict", "connect_")


def kubernetes_write_methods() -> set[str]:
    """Every write method of every API class the official client ships."""
    names = set()
    for _, api in inspect.getmembers(kubernetes.client, inspect.isclass):
        if not api.__name__.endswith("Api"):
            continue
        names.update(name for name in dir(api) if name.startswith(WRITE_PREFIXES))
    return names


def write_calls(tree: ast.AST, write_methods: set[str]) -> list[str]:
    """Calls of (and strings naming) a client write method, as ``line: name``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in write_methods:
            found.append(f"{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Constant) and node.value in write_methods:
            # getattr(api, "patch_namespaced_pod") is a call too.
            found.append(f"{node.lineno}: {node.value!r}")
    return found


def test_the_checker_knows_the_client_write_methods_and_finds_them():
    methods = kubernetes_write_methods()
    assert {
        "patch_namespaced_pod",
        "create_namespaced_pod_eviction",
        "delete_namespaced_pod",
        "replace_namespaced_deployment",
        "patch_namespaced_custom_object",
    } <= methods
    assert "list_namespaced_pod" not in methods
    sample = ast.parse(
        "api.patch_namespaced_pod('p', 'ns', body)\n"
        "getattr(api, 'create_namespaced_pod_eviction')\n"
        "User.objects.create_user('x')\n"
    )
    assert write_calls(sample, methods) == [
        "1: .patch_namespaced_pod",
        "2: 'create_namespaced_pod_eviction'",
    ]


def test_no_module_of_vpaweb_calls_a_kubernetes_write_method():
    methods = kubernetes_write_methods()
    offenders = {}
    for path in sorted(SOURCE.rglob("*.py")):
        if str(path.relative_to(SOURCE)) in WRITERS:
            continue
        found = write_calls(ast.parse(path.read_text(), str(path)), methods)
        if found:
            offenders[str(path.relative_to(SOURCE))] = found
    assert offenders == {}


# The writer's write methods, and the only modules allowed to call them.
WRITER_METHODS = {
    "resize_pod",
    "evict_pod",
    "record_event",
    "write_vpa_status",
    "apply_webhook_configuration",
    "delete_webhook_configuration",
    "patch_hpa",
}
WRITER_CALLERS = {
    "services/actuation/cycle.py",  # the updater applies changes
    "services/actuation/vpa_status.py",  # VPA objects naming vpaweb get its status
    "services/actuation/boost.py",  # the updater shrinks a startup-boosted pod
    "services/actuation/revert.py",  # the updater evicts a reverted replacement
    "services/admission/registration.py",  # the webhook registers itself
}


def test_the_writer_interface_lists_exactly_these_write_methods():
    tree = ast.parse((SOURCE / "cluster" / "writer.py").read_text())
    protocol = next(
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and node.name == "ClusterWriter"
    )
    methods = {item.name for item in protocol.body if isinstance(item, ast.FunctionDef)}
    # review_access asks (SelfSubjectAccessReview) and changes nothing.
    assert methods - {"review_access", "close"} == WRITER_METHODS


def test_only_the_updater_and_the_webhook_registration_call_a_writer_method():
    offenders = {}
    for path in sorted(SOURCE.rglob("*.py")):
        relative = str(path.relative_to(SOURCE))
        if relative.startswith("cluster/") or relative in WRITER_CALLERS:
            continue
        found = [
            f"{node.lineno}: .{node.attr}"
            for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.Attribute) and node.attr in WRITER_METHODS
        ]
        if found:
            offenders[relative] = found
    assert offenders == {}


def test_only_the_kubernetes_writer_sends_raw_requests():
    offenders = []
    for path in sorted(SOURCE.rglob("*.py")):
        if path.name == "kube_writer.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("call_api", "request")
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == "api_client"
            ):
                offenders.append(f"{path.relative_to(SOURCE)}:{node.lineno}")
    assert offenders == []


def test_no_cluster_adapter_has_a_write_method():
    offenders = []
    for path in sorted((SOURCE / "cluster").glob("*.py")):
        if f"cluster/{path.name}" in WRITERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                offenders += [
                    f"{path.name}: {node.name}.{item.name}"
                    for item in node.body
                    if isinstance(item, ast.FunctionDef)
                    and item.name.lstrip("_").startswith(WRITE_PREFIXES)
                ]
    assert offenders == []


def test_reading_a_cluster_has_one_client_set_up():
    # kube_client.open_reader is the one place a reader of a cluster is built.
    offenders = []
    for path in sorted(SOURCE.rglob("*.py")):
        if path.name in ("kube_client.py", "kube_writer.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                if name in ("load_api_client", "KubeReader"):
                    offenders.append(f"{path.relative_to(SOURCE)}:{node.lineno}")
    assert offenders == []


WRITER_CLASSES = {"KubernetesWriter", "SimulatedWriter"}
WRITER_TYPES = {"ClusterWriter", *WRITER_CLASSES}


def writer_factories(source: Path) -> list[str]:
    """Where a writer is built, or a function outside cluster/ says it returns one:
    ``path:function`` for each."""
    found = []
    for path in sorted(source.rglob("*.py")):
        relative = path.relative_to(source)
        if relative.parts[0] == "cluster":
            continue  # the interface and its implementations
        tree = ast.parse(path.read_text(), str(path))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            returns = ast.unparse(function.returns) if function.returns else ""
            builds = any(
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", ""))
                in WRITER_CLASSES
                for node in ast.walk(function)
            )
            if builds or returns.strip("'\"") in WRITER_TYPES:
                found.append(f"{relative}:{function.name}")
    return sorted(set(found))


def test_there_is_exactly_one_writer_factory():
    assert writer_factories(SOURCE) == ["services/connections.py:cluster_writer_for"]


def test_the_factory_check_finds_a_second_factory(tmp_path):
    (tmp_path / "cluster").mkdir()
    (tmp_path / "cluster" / "kube_writer.py").write_text(
        "def open_writer() -> KubernetesWriter:\n    return KubernetesWriter()\n"
    )
    (tmp_path / "services").mkdir()
    (tmp_path / "services" / "a.py").write_text(
        "def writer_for(c) -> ClusterWriter:\n    return make(c)\n"
        "def other(c):\n    return SimulatedWriter(store=c)\n"
    )
    assert writer_factories(tmp_path) == [
        "services/a.py:other",
        "services/a.py:writer_for",
    ]
