"""Retake the README's screenshots from a fresh `make run`.

.venv/bin/python tools/screenshots.py            # writes docs/img/*.png
.venv/bin/python tools/screenshots.py --out /tmp/shots --port 8765"""
# Starts `make run` with its own empty state directory (VPAWEB_VAR_DIR in a temporary
# directory: a new SQLite database, the demo admin, the simulated cluster with its 8
# days of history), logs in as the demo admin in headless Chromium (/usr/bin/chromium,
# as the browser tests use) and saves what a new user sees: the overview, the workload
# with the largest monthly savings, and that workload's charts. The server is stopped
# afterwards and the temporary directory removed.

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
VIEWPORT = {"width": 1360, "height": 900}
START_TIMEOUT_S = 600.0


def _wait_until_serving(base_url: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"make run exited with status {server.returncode}")
        try:
            with urllib.request.urlopen(f"{base_url}/healthz", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(1.0)
    raise SystemExit(f"make run did not answer {base_url}/healthz in time")


def _take(base_url: str, password: str, out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    taken = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        page = browser.new_context(viewport=VIEWPORT, base_url=base_url).new_page()
        page.set_default_timeout(30_000)
        page.goto("/login/")
        page.fill("#id_username", "admin")
        page.fill("#id_password", password)
        page.click("button[type=submit]")
        page.wait_for_url(f"{base_url}/")
        page.wait_for_load_state("networkidle")
        taken.append(out / "overview.png")
        page.screenshot(path=str(taken[-1]))

        # The workload a new user opens first: the biggest monthly savings.
        page.goto("/workloads/?sort=savings")
        page.wait_for_load_state("networkidle")
        page.locator("#workload-table tbody a").first.click()
        page.wait_for_load_state("networkidle")
        page.locator("#charts .js-plotly-plot").first.wait_for()
        taken.append(out / "workload.png")
        page.screenshot(path=str(taken[-1]))
        taken.append(out / "workload-charts.png")
        page.locator("#charts").screenshot(path=str(taken[-1]))
        browser.close()
    return taken


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args(argv)
    base_url = f"http://127.0.0.1:{args.port}"
    with tempfile.TemporaryDirectory(prefix="vpaweb-screenshots-") as var_dir:
        env = {**os.environ, "VPAWEB_VAR_DIR": var_dir}
        server = subprocess.Popen(
            ["make", "run", f"PORT={args.port}"],
            cwd=ROOT,
            env=env,
            start_new_session=True,
        )
        try:
            _wait_until_serving(base_url, server)
            password = (Path(var_dir) / "demo-admin-password.txt").read_text().strip()
            for path in _take(base_url, password, args.out):
                print(path)
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
