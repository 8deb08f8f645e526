"""gunicorn's threaded worker with a deadline on reading each request (gunicorn_conf).

A sync worker reads a request's head in its only thread: ten clients sending one header
line every five seconds (slowloris) held every worker of a pod until the arbiter killed
them, and the replacements were held again. The threaded worker waits for a connection
to become readable in its poller (an idle or keep-alive connection costs no thread),
and here each request must arrive, head and body, within ``GUNICORN_READ_TIMEOUT``
seconds of its first byte: a slower client is dropped, so a thread is held that long at
most. A buffering proxy in front (an Ingress controller, nginx) does the same at the
edge; this keeps the pods safe when they are reached directly (docker-compose).
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from gunicorn.http.errors import NoMoreData
from gunicorn.workers.gthread import ThreadWorker


class _ReadDeadline:
    """A socket whose ``recv`` fails once the request's deadline has passed."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.deadline = float("inf")

    def recv(self, size: int) -> bytes:
        remaining = self.deadline - time.monotonic()
        # NoMoreData: gunicorn's "the client went away", closed without a traceback.
        if remaining <= 0:
            raise NoMoreData(b"")
        self._sock.settimeout(remaining)
        try:
            return self._sock.recv(size)
        except TimeoutError:
            raise NoMoreData(b"") from None
        finally:
            self._sock.settimeout(None)  # writing the answer has no such deadline

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class ReadDeadlineWorker(ThreadWorker):  # type: ignore[misc]
    """``gthread`` whose requests must arrive within GUNICORN_READ_TIMEOUT seconds."""

    read_timeout_s = float(os.environ.get("GUNICORN_READ_TIMEOUT", "10") or "10")

    def enqueue_req(self, conn: Any) -> None:
        """Start the request's deadline as a thread takes the connection over."""
        if not isinstance(conn.sock, _ReadDeadline):
            conn.sock = _ReadDeadline(conn.sock)
        conn.sock.deadline = time.monotonic() + self.read_timeout_s
        super().enqueue_req(conn)
