"""An API answer given before the body is read (a 413 from the declared Content-Length,
a 415 for a refused Content-Type) reaches a client still sending its body, under the
production gunicorn configuration: the server reads and discards the rest before it
closes (vpaweb/gunicorn_worker.py), where closing with unread data reset the
connection and the client saw no answer."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.bench_slowloris import production_server

ROOT = Path(__file__).resolve().parents[1]
BODY_BYTES = 2 * 2**20  # past VPAWEB_API_MAX_BODY_BYTES, set to 1 MiB below
CHUNK = 64 * 1024


@pytest.fixture(scope="module")
def server_with_token(tmp_path_factory):
    """The production server on loopback, its own SQLite database and a read token."""
    var = tmp_path_factory.mktemp("var")
    env = {
        **os.environ,
        "SECRET_KEY": "test-only-key",
        "VPAWEB_VAR_DIR": str(var),
        "DATABASE_URL": f"sqlite:///{var / 'db.sqlite3'}",
        "VPAWEB_API_MAX_BODY_BYTES": str(2**20),
    }
    env.pop("REDIS_URL", None)
    for command in (["migrate", "--no-input", "-v", "0"],):
        subprocess.run(
            [sys.executable, "manage.py", *command],
            cwd=ROOT,
            env=env,
            check=True,
            timeout=300,
        )
    key = subprocess.run(
        [sys.executable, "manage.py", "apitoken", "create", "--name", "early"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    ).stdout.strip()
    server_env = {
        name: env[name]
        for name in ("DATABASE_URL", "VPAWEB_VAR_DIR", "VPAWEB_API_MAX_BODY_BYTES")
    }
    with production_server(WEB_CONCURRENCY="2", **server_env) as port:
        yield port, key


def _send_slowly(port: int, key: str, content_type: str) -> tuple[int, dict]:
    """POST a 2 MiB body in 64 KiB pieces a few milliseconds apart, as a client on a
    slow link would, then read the answer; (status, JSON body)."""
    head = (
        "POST /api/v1/recommendation-query HTTP/1.1\r\n"
        "Host: 127.0.0.1\r\n"
        f"Authorization: Bearer {key}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {BODY_BYTES}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(head)
        sent = 0
        while sent < BODY_BYTES:
            conn.sendall(b" " * CHUNK)
            sent += CHUNK
            time.sleep(0.005)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    head_text, _, body = answer.partition(b"\r\n\r\n")
    status = int(head_text.split(b" ", 2)[1])
    return status, json.loads(body)


def test_a_declared_length_past_the_limit_is_answered_413(server_with_token):
    port, key = server_with_token
    status, body = _send_slowly(port, key, "application/json")
    assert status == 413
    assert body["error"]["code"] == "too_large"
    assert "VPAWEB_API_MAX_BODY_BYTES" in body["error"]["message"]


def test_a_refused_content_type_is_answered_415(server_with_token):
    port, key = server_with_token
    status, body = _send_slowly(port, key, "text/plain")
    assert status == 415
    assert body["error"]["code"] == "unsupported_media_type"
