"""Every shell command the README shows works as written after `make run`.

The README's ```sh blocks are parsed and must match COMMANDS below exactly (a new or
changed command fails here until it is listed with how it is checked). Then, from a
fresh copy of the repository (tracked and new files; the built .venv linked in so pip
does not run again), with none of SECRET_KEY, SECRET_KEY_FILE, DATABASE_URL or
REDIS_URL set: `make run` starts (on a free port; the demo keeps its 120 workloads but
generates 1 day of history instead of 8, to save time, and the history gate is 12 h
instead of 24), and each README block runs in
bash as written, with only `127.0.0.1:8000` replaced by that port. The add_cluster
example reads a fake API server through `~/.kube/config` (HOME is a temporary
directory) whose context is `prod-eu-1`.

The secret-key rule is tested here too: manage.py finds `var/secret_key` by itself;
`vpaweb.wsgi` (production) still refuses to start without a configured key.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.k8s_fake.server import FakeApiServer, load_fixtures, write_kubeconfig

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DEMO_URL = "127.0.0.1:8000"
START_TIMEOUT_S = 600.0
COMMAND_TIMEOUT_S = 180.0

# Each README command, and how this test checks it.
RUN = "run as written"
COMMANDS: list[tuple[str, str]] = [
    (
        "git clone <this repository> vpaweb && cd vpaweb",
        "stands for the fresh copy this test makes",
    ),
    ("make run", "started by this test before the other commands"),
    ("make test", "not run: it is this test suite"),
    (
        'curl -H "Authorization: Bearer $VPAWEB_METRICS_TOKEN" '
        '"http://127.0.0.1:8000/metrics/recommendations?top=1000"',
        "needs the server's VPAWEB_METRICS_TOKEN, which make run sets none of (404): "
        "tests/metrics/test_recommendation_metrics.py reads the endpoint with a token",
    ),
    (
        ".venv/bin/python manage.py recommend --samples docs/examples/usage.csv "
        "--oom-events docs/examples/ooms.csv",
        RUN,
    ),
    (
        ".venv/bin/python manage.py replay --samples docs/examples/usage.csv "
        "--oom-events docs/examples/ooms.csv --profile vpa --profile recurring-peaks "
        "--hindsight",
        RUN,
    ),
    (
        ".venv/bin/python manage.py scan --context prod-eu-1 --prometheus "
        "http://prometheus:9090 --output table",
        "needs the cluster's Prometheus: tests/integration/test_scan_command.py runs "
        "scan against the fake API server and a real Prometheus in every format",
    ),
    (
        "KUBECONFIG=~/.kube/config .venv/bin/python manage.py add_cluster --name "
        "prod-eu-1 --context prod-eu-1",
        RUN,
    ),
    (
        "export VPAWEB_TOKEN=$(.venv/bin/python manage.py apitoken create --name "
        "ci-deploy --scope read)",
        RUN,
    ),
    (
        'curl --fail-with-body -sS -H "Authorization: Bearer $VPAWEB_TOKEN" -H '
        '"Content-Type: application/yaml" -H "Accept: application/yaml" '
        "--data-binary @docs/examples/deployment.yaml "
        '"http://127.0.0.1:8000/api/v1/rightsize?cluster=simulated&never_raise=true" '
        "> rightsized.yaml",
        RUN,
    ),
    (
        "gunicorn -c vpaweb/gunicorn_conf.py vpaweb.wsgi:application",
        "production, not after make run: it needs the environment below (a configured "
        "key, by design: test_production_refuses_to_start_without_a_configured_key)",
    ),
    *(
        (
            line,
            "the production environment (a listing, not a command): "
            "tests/test_production.py runs check --deploy with exactly these lines",
        )
        for line in (
            "DEBUG=false",
            "SECRET_KEY_FILE=/run/secrets/vpaweb-secret-key",
            "ALLOWED_HOSTS=vpaweb.example.com",
            "CSRF_TRUSTED_ORIGINS=https://vpaweb.example.com",
            "SECURE_SSL_REDIRECT=true",
            "SECURE_HSTS_SECONDS=31536000",
            "SECURE_HSTS_INCLUDE_SUBDOMAINS=true",
            "SECURE_HSTS_PRELOAD=true",
            "SESSION_COOKIE_SECURE=true",
            "CSRF_COOKIE_SECURE=true",
            "SECURE_PROXY_SSL_HEADER=HTTP_X_FORWARDED_PROTO,https",
            "VPAWEB_TRUSTED_PROXY_COUNT=1",
            "DATABASE_URL=postgres://vpaweb@db:5432/vpaweb",
            "REDIS_URL=redis://redis:6379/0",
        )
    ),
    *(
        (
            line,
            "the compose stack: make test-deploy starts it with its own Docker engine",
        )
        for line in (
            "docker compose up -d",
            "docker compose exec web cat /var/lib/vpaweb/demo-admin-password.txt",
        )
    ),
    ("open http://127.0.0.1:8000/", "opens a browser on the served dashboard"),
    (
        "docker compose --profile metrics up -d",
        "the compose stack with Prometheus (tests/deploy/test_compose.py reads it)",
    ),
    (
        "docker compose --profile webhook up -d",
        "the compose stack with the webhook: make test-deploy starts it and POSTs a "
        "recorded AdmissionReview over TLS (tools/deploy/check_webhook.py)",
    ),
    (
        "helm install vpaweb deploy/helm/vpaweb -n vpaweb --create-namespace "
        "-f deploy/helm/vpaweb/examples/trial.yaml",
        "needs a cluster: tests/deploy/test_helm_chart.py lints the chart and renders "
        "each values file with the real helm, equal to its kustomize overlay",
    ),
    *(
        (
            line,
            "needs a cluster, which this machine has not: every overlay is rendered "
            "and schema-validated by tests/deploy/test_manifests.py",
        )
        for line in (
            "kubectl apply -k deploy/overlays/trial",
            "kubectl -n vpaweb port-forward svc/vpaweb-web 8000:80",
            "kubectl apply -k deploy/overlays/production",
        )
    ),
]


def readme_blocks(text: str) -> list[list[str]]:
    """The commands of each ```sh block: continuation lines joined, comments and
    blank lines dropped, whitespace runs collapsed."""
    blocks = []
    for body in re.findall(r"^\s*```sh\n(.*?)^\s*```", text, re.S | re.M):
        commands: list[str] = []
        pending = ""
        for raw in body.splitlines():
            line = raw.strip()
            if not pending and (not line or line.startswith("#")):
                continue
            line = re.sub(r"\s+#\s.*$", "", line)  # a trailing comment
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            commands.append(re.sub(r"\s+", " ", pending + line).strip())
            pending = ""
        blocks.append(commands)
    return blocks


def test_the_list_of_commands_is_the_readmes():
    parsed = [c for block in readme_blocks(README.read_text()) for c in block]

    assert parsed == [command for command, _ in COMMANDS]


def test_the_parser_joins_continuations_and_drops_comments():
    text = (
        "intro\n```sh\n# a comment\nmake run   # serves\n\ncurl -a \\\n"
        "     -b \\\n  | cat\n```\n  ```sh\n  echo two\n  ```\n"
    )

    assert readme_blocks(text) == [["make run", "curl -a -b | cat"], ["echo two"]]


# --- the secret key rule --------------------------------------------------------------


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "SECRET_KEY",
            "SECRET_KEY_FILE",
            "DATABASE_URL",
            "REDIS_URL",
            "DJANGO_SETTINGS_MODULE",
            "VPAWEB_VAR_DIR",
            "DEBUG",
            "LOG_LEVEL",
        )
    }
    env.update(extra)
    return env


def run(argv: list[str], env: dict[str, str], cwd: Path):
    return subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
    )


def run_python(args: list[str], env: dict[str, str], cwd: Path):
    return run([sys.executable, *args], env, cwd)


def test_manage_py_finds_the_key_make_run_made(tmp_path):
    (tmp_path / "secret_key").write_text("a-local-key-from-make-run\n")
    env = clean_env(VPAWEB_VAR_DIR=str(tmp_path))

    found = run_python(
        [
            str(REPO / "manage.py"),
            "shell",
            "-c",
            "from django.conf import settings; print(settings.SECRET_KEY)",
        ],
        env,
        tmp_path,
    )

    assert found.returncode == 0, found.stderr
    assert found.stdout.strip().splitlines()[-1] == "a-local-key-from-make-run"


def test_without_the_file_manage_py_says_what_to_do(tmp_path):
    answer = run_python(
        [str(REPO / "manage.py"), "check"],
        clean_env(VPAWEB_VAR_DIR=str(tmp_path)),
        tmp_path,
    )

    assert answer.returncode != 0
    assert "SECRET_KEY (or SECRET_KEY_FILE) must be set" in answer.stderr
    assert "var/secret_key, which `make run` creates" in answer.stderr


def test_a_configured_key_wins_over_the_local_file(tmp_path):
    (tmp_path / "secret_key").write_text("local\n")
    missing = tmp_path / "no-such-key"
    env = clean_env(VPAWEB_VAR_DIR=str(tmp_path), SECRET_KEY_FILE=str(missing))

    answer = run_python([str(REPO / "manage.py"), "check"], env, tmp_path)

    assert answer.returncode != 0
    assert f"SECRET_KEY_FILE='{missing}' cannot be read" in answer.stderr


def test_production_refuses_to_start_without_a_configured_key(tmp_path):
    # Even with the local file there: only manage.py uses it.
    (tmp_path / "secret_key").write_text("local\n")
    env = clean_env(VPAWEB_VAR_DIR=str(tmp_path), PYTHONPATH=str(REPO))

    answer = run_python(["-c", "import vpaweb.wsgi"], env, tmp_path)

    assert answer.returncode != 0
    assert "ImproperlyConfigured" in answer.stderr
    assert "SECRET_KEY (or SECRET_KEY_FILE) must be set" in answer.stderr


# --- the README, run ------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fresh_copy(target: Path) -> None:
    """The repository's files as a clone has them (plus files not committed yet)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        source = REPO / name
        if not source.is_file():
            continue  # deleted in the working tree
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target / name)  # keeps times: make sees .venv as current
    (target / ".venv").symlink_to(REPO / ".venv")


def wait_until_serving(process: subprocess.Popen, port: int, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"make run ended ({process.returncode}):\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(1)
    pytest.fail(f"make run did not serve within {START_TIMEOUT_S}s:\n{log.read_text()}")


@pytest.fixture
def demo(tmp_path) -> Iterator[tuple[Path, dict[str, str], int]]:
    """A fresh copy after `make run`, serving on a free port; stopped afterwards."""
    checkout = tmp_path / "vpaweb"
    checkout.mkdir()
    fresh_copy(checkout)
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    env = clean_env(
        HOME=str(home),
        VPAWEB_SIMULATION_HISTORY_DAYS="1",
        # A day of history is just short of the default gate of 24 h, which
        # rightsize applies as the webhook does: half a day stands in for it.
        VPAWEB_MIN_HISTORY_HOURS="12",
        PYTHONDONTWRITEBYTECODE="1",
    )
    log = tmp_path / "make-run.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            ["make", "run", f"PORT={port}"],
            cwd=checkout,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, stopped as one below
        )
    try:
        wait_until_serving(process, port, log)
        yield checkout, env, port
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


def run_block(commands: list[str], *, cwd: Path, env: dict[str, str], port: int):
    script = "set -euo pipefail\n" + "\n".join(
        command.replace(DEMO_URL, f"127.0.0.1:{port}") for command in commands
    )
    return run(["bash", "-c", script], env, cwd)


def test_every_readme_command_runs_as_written_after_make_run(demo):
    checkout, env, port = demo
    how = dict(COMMANDS)
    blocks = [
        block
        for block in readme_blocks((checkout / "README.md").read_text())
        if all(how[command] == RUN for command in block)
    ]
    assert len(blocks) == 4  # recommend, replay, add_cluster, CI/CD
    kube = Path(env["HOME"]) / ".kube"
    kube.mkdir()
    server = FakeApiServer(load_fixtures()).start()
    try:
        write_kubeconfig(kube / "config", {"prod-eu-1": server}, current="prod-eu-1")
        results = [run_block(b, cwd=checkout, env=env, port=port) for b in blocks]
    finally:
        server.stop()

    recommend, replay, add_cluster, _ = results  # the last wrote rightsized.yaml
    for result in results:
        assert result.returncode == 0, result.stderr
    assert re.search(r"^shop\s+web\s+app\s+\d+m\s", recommend.stdout, re.M)
    assert re.search(r"^recurring-peaks\s+\d", replay.stdout, re.M)
    assert "Added cluster 'prod-eu-1'" in add_cluster.stdout
    # The demo's Deployment came back right-sized.
    (manifest,) = [
        d for d in yaml.safe_load_all((checkout / "rightsized.yaml").read_text()) if d
    ]
    assert (manifest["kind"], manifest["metadata"]["name"]) == (
        "Deployment",
        "quotes-grpc",
    )
    containers = {
        c["name"]: c["resources"]
        for c in manifest["spec"]["template"]["spec"]["containers"]
    }
    assert set(containers) == {"grpc", "istio-proxy"}
    assert containers["grpc"]["requests"]["cpu"] != "1250m"
    assert containers["grpc"]["requests"]["memory"] != "5Gi"
    # While it serves, the terminal shows warnings and errors, not every minute's
    # refresh (the scheduler's first cycle ran as it started).
    served = (checkout.parent / "make-run.log").read_text().split("vpaweb is at")[1]
    assert "warnings and errors only" in served
    assert " INFO " not in served, served[:2000]
