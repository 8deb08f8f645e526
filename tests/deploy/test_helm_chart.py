"""deploy/helm/vpaweb: the chart checked with the real helm (tests/helm_binary.py)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helm_binary import VERSION, helm, run_helm

ROOT = Path(__file__).resolve().parents[2]


def test_make_test_installs_the_pinned_helm_before_running_the_suite():
    makefile = (ROOT / "Makefile").read_text()
    for target in ("test", "test-sqlite", "test-pg"):
        assert re.search(rf"^{target}: .*\$\(HELM\)", makefile, re.M), target
    script = (ROOT / "tools" / "install-helm.sh").read_text()
    assert re.search(r'^TARBALL_SHA256="[0-9a-f]{64}"$', script, re.M)
    assert f'HELM_VERSION="{VERSION}"' in script
    assert helm()
    assert run_helm("version", "--template", "{{.Version}}").stdout == VERSION
