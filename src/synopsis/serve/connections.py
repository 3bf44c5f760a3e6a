"""Connections that send nothing useful: what uvicorn's HTTP protocol does not bound itself.

uvicorn times out an idle keep-alive connection (``timeout_keep_alive``) but not one that is still sending
its request line and headers, and it accepts connections until the process runs out of file descriptors.
:class:`GuardedH11Protocol` (``synopsis serve`` runs uvicorn with it) adds both bounds:

* a connection whose request headers are not complete ``header_timeout_s`` after it opened (or after the
  first bytes of its next request on a kept-alive connection) is closed, as nginx's
  ``client_header_timeout``;
* beyond ``max_connections`` open connections, a new connection closes the oldest one that has no request
  in progress (idle, or still sending headers); only when every one is busy is the new one refused. A flood
  of half-open connections thus cannot keep ``/health`` or real clients out.

The limits travel in ``$SYNOPSIS_SERVE_CONNECTIONS`` (JSON), since uvicorn makes the protocol objects
itself, in every worker process.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import resource
from functools import cache
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

#: Environment variable holding ``{"header_timeout_s": ..., "max_connections": ...}``.
LIMITS_ENV = "SYNOPSIS_SERVE_CONNECTIONS"
#: The import string uvicorn's ``http=`` option takes.
PROTOCOL = "synopsis.serve.connections:GuardedH11Protocol"
#: File descriptors kept for everything but connections (models, logs, the event loop, the listener).
_SPARE_DESCRIPTORS = 64
logger = logging.getLogger("synopsis.serve")


def fit_to_descriptors(max_connections: int) -> tuple[int, int]:
    """``(max_connections, backlog)`` that this process's file descriptors can hold.

    The event loop accepts up to ``backlog`` connections at once before the protocol sees any of them, so
    a flood can hold ``max_connections + backlog`` descriptors: the soft limit is raised to the hard one,
    the backlog is at most ``max_connections`` (and uvicorn's 2048), and a ``max_connections`` the limit
    cannot hold is lowered, with a warning."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        wanted = (
            hard if hard != resource.RLIM_INFINITY else max(soft, 2 * max_connections + _SPARE_DESCRIPTORS)
        )
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass
    fits = max(1, (soft - _SPARE_DESCRIPTORS) // 2)
    if max_connections > fits:
        logger.warning(
            "--max-connections %d needs about %d file descriptors, but this process may open %d (ulimit -n): "
            "using %d",
            max_connections,
            2 * max_connections + _SPARE_DESCRIPTORS,
            soft,
            fits,
        )
        max_connections = fits
    return max_connections, min(2048, max_connections)


@cache
def _limits() -> tuple[float, int]:
    from synopsis.serve.settings import ServeSettings

    given = json.loads(os.environ.get(LIMITS_ENV) or "{}")
    defaults = ServeSettings()
    return (
        float(given.get("header_timeout_s", defaults.header_timeout_s)),
        int(given.get("max_connections", defaults.max_connections)),
    )


def connection_limits_env(header_timeout_s: float, max_connections: int) -> str:
    """The value of :data:`LIMITS_ENV` for these limits."""
    return json.dumps({"header_timeout_s": header_timeout_s, "max_connections": max_connections})


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header timeout and a bound on open connections (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout_s, self.max_connections = _limits()
        self._header_timer: asyncio.TimerHandle | None = None
        self._opened = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._opened = self.loop.time()
        if len(self.connections) > self.max_connections and not self._close_oldest_waiting():
            self.transport.close()  # every other connection is serving a request: this one waits its turn
            return
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._waiting_for_headers():
            if self._header_timer is None:  # the first bytes of a request on a kept-alive connection
                self._arm_header_timer()
        else:
            self._disarm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._disarm_header_timer()  # from here uvicorn's keep-alive timeout holds until the next bytes

    def _waiting_for_headers(self) -> bool:
        """No request in progress: its headers have not all arrived (or nothing has)."""
        return self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)

    def _arm_header_timer(self) -> None:
        self._disarm_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_timed_out)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_timed_out(self) -> None:
        self._header_timer = None
        if self._waiting_for_headers() and not self.transport.is_closing():
            self.transport.close()

    def _close_oldest_waiting(self) -> bool:
        """Close the oldest other connection without a request in progress; False when there is none."""
        waiting = [
            other
            for other in self.connections
            if other is not self
            and isinstance(other, GuardedH11Protocol)
            and other._waiting_for_headers()
            and not other.transport.is_closing()
        ]
        if not waiting:
            return False
        min(waiting, key=lambda other: other._opened).transport.close()
        return True
