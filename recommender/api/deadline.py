"""A deadline for API requests below the server's worker timeout.

gunicorn kills a worker whose request runs past its ``timeout``, and the client then
gets a dropped connection or the proxy's HTML page. With ``VPAWEB_REQUEST_DEADLINE_S``
set (vpaweb/gunicorn_conf.py sets it a few seconds below the timeout), an /api/ request
still running at the deadline is interrupted by SIGALRM: its transaction is rolled back
and the client gets the API's JSON error (503, code ``timeout``) before the worker
would be killed."""
# In the main thread (a sync worker) SIGALRM interrupts the request. In a request thread
# (gunicorn's threaded worker, vpaweb/gunicorn_worker.py) a timer raises the same
# exception in that thread (``PyThreadState_SetAsyncExc``), at its next Python bytecode,
# as the signal handler would; a lock makes sure it is never raised once the request has
# left this middleware. Neither interrupts a long call inside C.

from __future__ import annotations

import ctypes
import signal
import threading
from collections.abc import Callable
from types import FrameType

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from recommender.api.errors import API_PREFIX, RequestDeadlineExceeded, error_body

# Retry this soon when the deadline falls inside an import.
IMPORT_GRACE_S = 0.05


def _importing(frame: FrameType | None) -> bool:
    """Whether the interrupted code is inside Python's import machinery, where an
    exception would leave a half-initialised module in ``sys.modules``."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _interrupt(signum: int, frame: FrameType | None) -> None:
    if _importing(frame):
        signal.setitimer(signal.ITIMER_REAL, IMPORT_GRACE_S)
        return
    raise RequestDeadlineExceeded(settings.REQUEST_DEADLINE_S)


class RequestDeadlineMiddleware:
    """Interrupt an /api/ request still running after ``REQUEST_DEADLINE_S`` seconds."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        seconds = settings.REQUEST_DEADLINE_S
        if seconds <= 0 or not request.path.startswith(API_PREFIX):
            return self.get_response(request)
        if threading.current_thread() is not threading.main_thread():
            return self._in_thread(request, seconds)
        previous = signal.signal(signal.SIGALRM, _interrupt)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            return self.get_response(request)
        except RequestDeadlineExceeded as exc:
            # Raised outside a DRF view (DRF's handler answers inside one).
            return JsonResponse(error_body("timeout", exc.message), status=503)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    def _in_thread(self, request: HttpRequest, seconds: float) -> HttpResponse:
        """The deadline of a request served by a thread: a timer raises it there."""
        target = threading.get_ident()
        lock = threading.Lock()
        running = [True]

        def interrupt() -> None:
            with lock:
                if running[0]:
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(
                        ctypes.c_ulong(target), ctypes.py_object(_ThreadDeadline)
                    )

        timer = threading.Timer(seconds, interrupt)
        timer.daemon = True
        timer.start()
        try:
            try:
                return self.get_response(request)
            finally:
                with lock:
                    running[0] = False
                timer.cancel()
        except RequestDeadlineExceeded as exc:
            return JsonResponse(error_body("timeout", exc.message), status=503)


class _ThreadDeadline(RequestDeadlineExceeded):
    """Raised by class in a request thread (no arguments can travel with it)."""

    def __init__(self) -> None:
        super().__init__(settings.REQUEST_DEADLINE_S)
