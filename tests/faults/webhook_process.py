"""A real `manage.py webhook serve` process for the fault suite: its own background
reload thread and connections, on pytest-django's test database and the suite's Redis;
and a TLS client for it."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection

from tests.faults.services import free_port

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class WebhookProcess:
    """The server's port, its process and the CA its certificate is signed by."""

    port: int
    process: subprocess.Popen[bytes]
    ca_cert: Path

    def connect(self, *, timeout_s: float = 5.0, **context: Any) -> Any:
        """A new HTTPS connection to it (``context``: SSLContext attributes or
        ``cert_chain=(cert, key)`` for a client certificate)."""
        ssl_context = ssl.create_default_context(cafile=str(self.ca_cert))
        chain = context.pop("cert_chain", None)
        if chain:
            ssl_context.load_cert_chain(*map(str, chain))
        for name, value in context.items():
            setattr(ssl_context, name, value)
        return http.client.HTTPSConnection(
            "localhost", self.port, context=ssl_context, timeout=timeout_s
        )

    def get(self, path: str) -> tuple[int, dict[str, Any]]:
        """(status, JSON body) of one GET on a fresh connection; (0, {}) on no
        answer."""
        conn = self.connect()
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            return response.status, json.loads(response.read() or b"{}")
        except OSError:
            return 0, {}
        finally:
            conn.close()

    def post(self, body: bytes, **context: Any) -> tuple[int, dict[str, Any]]:
        """(status, JSON body) of one review posted on a fresh connection."""
        conn = self.connect(**context)
        try:
            conn.request(
                "POST",
                "/mutate?timeout=5s",
                body=body,
                headers={"Content-Type": "application/json"},
            )
            response = conn.getresponse()
            return response.status, json.loads(response.read())
        finally:
            conn.close()

    def rss_bytes(self) -> int:
        """The server process's resident memory now."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        line = next(x for x in status.splitlines() if x.startswith("VmRSS:"))
        return int(line.split()[1]) * 1024


@contextlib.contextmanager
def webhook_process(
    *,
    cluster: str,
    cert: Path,
    key: Path,
    ca_cert: Path,
    env: dict[str, str],
    args: tuple[str, ...] = (),
) -> Iterator[WebhookProcess]:
    """`manage.py webhook serve --cluster <cluster>` on a free port until ready
    (``/readyz`` 200), stopped with SIGTERM after the block."""
    db = connection.settings_dict
    port = free_port()
    full_env = {
        **os.environ,
        # The server must use pytest-django's test database, not the configured one.
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/"
        f"{db['NAME']}",
        "REDIS_URL": settings.REDIS_URL,
        "SECRET_KEY": "fault-suite-only-key",
        "LOG_LEVEL": "WARNING",
        **env,
    }
    process = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "webhook",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--cert",
            str(cert),
            "--key",
            str(key),
            "--cluster",
            cluster,
            *args,
        ],
        cwd=ROOT,
        env=full_env,
    )
    server = WebhookProcess(port=port, process=process, ca_cert=ca_cert)
    try:
        deadline = time.monotonic() + 60
        while server.get("/readyz")[0] != 200:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("`webhook serve` did not become ready")
            time.sleep(0.2)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
