"""gunicorn's threaded worker with a deadline on reading each request (gunicorn_conf).

A sync worker reads a request's head in its only thread: ten clients sending one header
line every five seconds (slowloris) held every worker of a pod until the arbiter killed
them, and the replacements were held again. The threaded worker waits for a connection
to become readable in its poller (an idle or keep-alive connection costs no thread),
and here each request must arrive, head and body, within ``GUNICORN_READ_TIMEOUT``
seconds of its first byte: a slower client is dropped, so a thread is held that long at
most. A buffering proxy in front (an Ingress controller, nginx) does the same at the
edge; this keeps the pods safe when they are reached directly (docker-compose)."""
# An answer given before the body was read (a 413 from the declared Content-Length, a
# 415, a 401) is followed by reading and discarding the rest of the body, at most
# ``DRAIN_MAX_BYTES`` and within the same deadline, before the connection closes:
# closing with unread data makes the kernel reset the connection, and a client still
# sending would see the reset instead of the answer.

from __future__ import annotations

import os
import socket
import time
from typing import Any

from gunicorn.http.errors import NoMoreData, ParseException
from gunicorn.workers.gthread import ThreadWorker

# The most of an unread body discarded after an early answer; past it the connection
# closes anyway (and a client still sending may see a reset).
DRAIN_MAX_BYTES = 16 * 2**20


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

    def handle_request(self, req: Any, conn: Any) -> bool:
        """Serve the request; on a connection about to close, discard what is left of
        its body first (bounded), so an early answer is not lost to a reset."""
        keepalive: bool = super().handle_request(req, conn)
        if not keepalive:
            drain(req.body)
        return keepalive


def drain(body: Any) -> int:
    """Read and discard an unread request body, at most ``DRAIN_MAX_BYTES`` (the
    socket's read deadline bounds the time); the bytes discarded."""
    discarded = 0
    try:
        while discarded < DRAIN_MAX_BYTES:
            data = body.read(min(65536, DRAIN_MAX_BYTES - discarded))
            if not data:
                break
            discarded += len(data)
    except (OSError, ParseException):
        pass  # the client went away, the deadline passed, or the body is malformed
    return discarded
