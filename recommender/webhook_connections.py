"""What one client may hold of the webhook's HTTPS server: connection slots, body
bytes in memory, and time (docs/webhook.md, "Slow and hostile clients").

``ConnectionLimits`` are the bounds, ``ByteBudget`` a number of bytes shared by every
connection, ``DeadlineReader`` a connection's input bounded by a total deadline per
request, ``handshake`` a TLS handshake bounded by one, ``drain`` the discarding of a
body answered early. The server (``recommender/webhook.py``) puts them together."""
# - At most ``max_connections`` are open at once (more are closed at accept, before the
#   TLS handshake); past three quarters of them, idle keep-alive connections are closed
#   within a second.
# - Request bodies are read only into a reservation of their declared length from one
#   budget shared by every connection (``buffered``; a quarter of it only for bodies up
#   to ``SMALL_BODY_BYTES``, so large ones never starve pods' reviews), waited for until
#   the read deadline, and parsed and decided only under a second one (``parsing``, one
#   maximum body), since a parsed body can take about 28 times its size.
# - A request, head and body, must arrive within ``read_deadline_s`` of its first byte,
#   a new connection's first request within that of its TLS handshake, and the
#   handshake itself within that of the accept; a slower client is dropped.

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import io
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

# A keep-alive connection with no request for this long is closed (kube-apiserver's
# client keeps its idle connections 90 s, and opens a new one when it finds it closed).
IDLE_S = 60.0
# How often an idle connection looks whether the server needs its slot.
IDLE_SLICE_S = 1.0
# Idle connections are closed once this share of the slots is taken.
PRESSURE_SHARE = 0.75
# An answer must be taken by the client within this long.
WRITE_TIMEOUT_S = 5.0
# After an early answer (413, 503) the rest of the declared body is read and
# discarded, up to this much within the read deadline, so a client still sending
# gets the answer rather than a reset.
DRAIN_MAX_BYTES = 32 * 1024 * 1024
DRAIN_CHUNK = 64 * 1024
# A quarter of the buffered budget is kept for bodies up to this size (a pod's review
# is a few kilobytes): clients holding large bodies cannot take all of it.
SMALL_BODY_BYTES = 256 * 1024
SMALL_BODY_SHARE = 0.25


# glibc's mallopt parameter and the size from which it serves allocations from mmap.
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 128 * 1024


def return_large_blocks_to_the_system() -> bool:
    """Make glibc serve every allocation of 128 KiB or more from mmap, so a freed
    request body goes back to the system. Its default threshold rises to the largest
    block freed: 5 MiB bodies then came from the heaps of the threads' arenas, which
    kept them (100 MiB more resident under 80 large bodies, against 26 MiB with the
    fixed threshold). False where the C library is not glibc."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
    except (OSError, AttributeError):
        return False


@dataclass(frozen=True)
class ConnectionLimits:
    """The bounds of one server (settings ``VPAWEB_WEBHOOK_*``, docs/webhook.md)."""

    max_connections: int = 256
    buffered_bytes: int = 32 * 1024 * 1024
    parsing_bytes: int = 5 * 1024 * 1024
    read_deadline_s: float = 5.0


class ByteBudget:
    """Bytes that may be held at once, shared by every connection of a server."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_use = 0
        self.peak = 0
        self._free = threading.Condition()

    def reserve(self, n: int, *, timeout_s: float = 0.0, keep_free: int = 0) -> bool:
        """Take ``n`` bytes, leaving ``keep_free`` of the limit untaken, waiting up
        to ``timeout_s`` for them; False when they are not free by then."""
        if n <= 0:
            return True
        limit = self.limit - keep_free
        if n > limit:
            return False
        ends_at = time.monotonic() + timeout_s
        with self._free:
            while self.in_use + n > limit:
                left = ends_at - time.monotonic()
                if left <= 0:
                    return False
                self._free.wait(left)
            self.in_use += n
            self.peak = max(self.peak, self.in_use)
            return True

    def release(self, n: int) -> None:
        """Give back ``n`` bytes taken by ``reserve``."""
        if n <= 0:
            return
        with self._free:
            self.in_use -= n
            self._free.notify_all()

    @contextlib.contextmanager
    def held(self, n: int) -> Iterator[None]:
        """Hold ``n`` bytes (already reserved) for the block, then give them back."""
        try:
            yield
        finally:
            self.release(n)


class RequestTimeout(TimeoutError):
    """A request did not arrive whole within the read deadline."""


class DeadlineReader(io.RawIOBase):
    """The raw input of one connection, bounded by a total deadline per request.

    ``deadline`` (monotonic) is set while a request is expected or arriving: a read
    past it raises ``RequestTimeout``. Between requests (``idle()``) a read waits up
    to ``IDLE_S`` for the next one, in slices, and ends the connection (EOF) as soon
    as ``under_pressure()``; the first byte of the next request starts its deadline.
    """

    def __init__(
        self,
        sock: socket.socket,
        *,
        read_deadline_s: float,
        under_pressure: Callable[[], bool],
    ) -> None:
        super().__init__()
        self.sock = sock
        self.read_deadline_s = read_deadline_s
        self.under_pressure = under_pressure
        self.deadline: float | None = time.monotonic() + read_deadline_s
        self.timed_out = False
        self._idle_until = 0.0

    def readable(self) -> bool:
        """Always: a socket's input."""
        return True

    def idle(self) -> None:
        """A request was answered: wait for the next one as an idle connection."""
        self.deadline = None
        self._idle_until = time.monotonic() + IDLE_S

    def left_s(self) -> float:
        """Seconds left for the request arriving (the idle wait when none is)."""
        if self.deadline is None:
            return self.read_deadline_s
        return self.deadline - time.monotonic()

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        """Read what has arrived, waiting at most until the deadline."""
        while True:
            now = time.monotonic()
            if self.deadline is not None:
                wait_s = self.deadline - now
                if wait_s <= 0:
                    self.timed_out = True
                    raise RequestTimeout(
                        f"the request did not arrive within {self.read_deadline_s:g} s"
                    )
            else:
                wait_s = min(self._idle_until - now, IDLE_SLICE_S)
                if wait_s <= 0 or self.under_pressure():
                    return 0  # an idle connection ends quietly
            self.sock.settimeout(wait_s)
            try:
                read = self.sock.recv_into(buffer)
            except TimeoutError:
                continue  # the loop decides: deadline passed, or keep waiting
            if read and self.deadline is None:
                # The first byte of a request: its deadline starts now.
                self.deadline = time.monotonic() + self.read_deadline_s
            return read


def handshake(sock: ssl.SSLSocket, *, deadline: float) -> bool:
    """Complete the server side of a TLS handshake by ``deadline`` (monotonic, the
    whole handshake: a client sending it a byte at a time is not waited for);
    False when it failed or took too long."""
    sock.setblocking(False)
    poller = select.poll()
    try:
        while True:
            try:
                sock.do_handshake()
                return True
            except ssl.SSLWantReadError:
                events = select.POLLIN
            except ssl.SSLWantWriteError:
                events = select.POLLOUT
            except (OSError, ssl.SSLError):
                return False
            left_ms = (deadline - time.monotonic()) * 1000
            if left_ms <= 0:
                return False
            poller.register(sock, events)
            ready = poller.poll(left_ms)
            poller.unregister(sock)
            if not ready:
                return False
    finally:
        with contextlib.suppress(OSError):
            sock.setblocking(True)


def drain(rfile: io.BufferedIOBase, reader: DeadlineReader, length: int) -> None:
    """Read and discard up to ``length`` bytes (at most ``DRAIN_MAX_BYTES``) of a body
    that was answered early, within the request's deadline."""
    scratch = bytearray(min(DRAIN_CHUNK, max(length, 0)))
    left = min(length, DRAIN_MAX_BYTES)
    with contextlib.suppress(OSError):
        while left > 0 and reader.left_s() > 0:
            read = rfile.readinto(memoryview(scratch)[: min(left, len(scratch))])
            if not read:
                return
            left -= read
