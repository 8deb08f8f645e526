"""gunicorn's threaded worker with a deadline on reading each request (gunicorn_conf).

A sync worker reads a request's head in its only thread: ten clients sending one header
line every five seconds (slowloris) held every worker of a pod until the arbiter killed
them, and the replacements were held again. The threaded worker waits for a connection
to become readable in its poller (an idle or keep-alive connection costs no thread),
and here each request must arrive, head and body, within ``GUNICORN_READ_TIMEOUT``
seconds of its first byte: a slower client is dropped, so a thread is held that long at
most. A buffering proxy in front (an Ingress controller, nginx) does the same at the
edge; this keeps the pods safe when they are reached directly (docker-compose)."""
# A worker that stops (replaced after GUNICORN_MAX_REQUESTS, or SIGTERM) takes no new
# connection but serves the ones it accepted before it exits: gunicorn's own loop
# closed its poller at once, dropping every accepted connection whose request had not
# been read yet (the client saw a reset, or waited for an answer that never came while
# the worker finished its other requests). Those still silent after
# GUNICORN_READ_TIMEOUT are closed, as any slow client is. Then the process ends at
# once (``os._exit``, after closing its database connections and flushing its logs):
# Python's own finalisation of the whole app took 1 to 2.4 s of a loaded machine, during
# which the worker's replacement was not started yet, and when both workers of a pod
# were replaced together nothing accepted connections.
#
# An answer given before the body was read (a 413 from the declared Content-Length, a
# 415, a 401) is followed by reading and discarding the rest of the body, at most
# ``DRAIN_MAX_BYTES`` and within the same deadline, before the connection closes:
# closing with unread data makes the kernel reset the connection, and a client still
# sending would see the reset instead of the answer.

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import socket
import sys
import time
from concurrent import futures
from functools import partial
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

    def run(self) -> None:
        """gunicorn's gthread loop (23.0), then, once the worker stops (replaced after
        GUNICORN_MAX_REQUESTS, or SIGTERM), ``serve_accepted`` before it exits."""
        for listener in self.sockets:
            listener.setblocking(False)
            server = listener.getsockname()
            self.poller.register(
                listener, selectors.EVENT_READ, partial(self.accept, server)
            )
        while self.alive:
            self.notify()  # the arbiter's sign of life
            if self.nr_conns < self.worker_connections:
                for key, _ in self.poller.select(1.0):
                    key.data(key.fileobj)
                result = futures.wait(
                    self.futures, timeout=0, return_when=futures.FIRST_COMPLETED
                )
            else:  # every connection it may hold is held: wait for one to end
                result = futures.wait(
                    self.futures, timeout=1.0, return_when=futures.FIRST_COMPLETED
                )
            for future in result.done:
                self.futures.remove(future)
            if not self.is_parent_alive():
                break
            self.murder_keepalived()
        self.serve_accepted()
        self.tpool.shutdown(False)
        self.poller.close()
        for listener in self.sockets:
            listener.close()
        futures.wait(self.futures, timeout=self.cfg.graceful_timeout)
        self.exit_now()

    def exit_now(self) -> None:
        """End the process without Python's finalisation: what it would close is
        closed here (database connections, logs); the arbiter starts the
        replacement as soon as it reaps this one."""
        from django.db import connections

        self.log.info("Worker exiting (pid: %s)", self.pid)
        # A connection already broken has nothing left to close.
        with contextlib.suppress(Exception):
            connections.close_all()
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    def serve_accepted(self) -> None:
        """Take no new connection; serve each accepted one as its request arrives,
        within GUNICORN_READ_TIMEOUT (the other workers take the new ones)."""
        with self._lock:
            for listener in self.sockets:
                with contextlib.suppress(KeyError, ValueError):
                    self.poller.unregister(listener)
        ends = time.monotonic() + self.read_timeout_s
        while self.nr_conns > 0 and time.monotonic() < ends:
            if not self.is_parent_alive():
                return
            self.notify()
            for key, _ in self.poller.select(0.1):
                key.data(key.fileobj)
            if self.futures:
                done = futures.wait(
                    self.futures, timeout=0.1, return_when=futures.FIRST_COMPLETED
                ).done
                for future in done:
                    self.futures.remove(future)

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
