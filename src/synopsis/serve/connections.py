"""Connections that send nothing useful: what uvicorn's HTTP protocol does not bound itself.

uvicorn times out an idle keep-alive connection (``timeout_keep_alive``) but not one that is still sending
its request, and it accepts connections until the process runs out of file descriptors.
:class:`GuardedH11Protocol` (``synopsis serve`` runs uvicorn with it) bounds every request as it is read,
whatever its method and whether or not the application reads its body:

* its request line and headers must be complete ``header_timeout_s`` after its first byte (the connection
  is then closed), as nginx's ``client_header_timeout``;
* the whole request, headers and body, must be complete ``request_timeout_s`` after its first byte, and its
  body must keep an average of ``min_body_rate`` bytes/s once ``header_timeout_s`` has passed since its
  headers (Apache's ``mod_reqtimeout`` ``MinRate``): else a 408 and the connection is closed;
* beyond ``max_connections`` open connections, a new connection makes room: the oldest connection without a
  request in progress (idle, or still sending headers) that has had a second to send it is closed, else
  the one whose body lags furthest behind the minimum rate (a 503), else a newer one without a request; a
  connection whose request has fully arrived is never closed for room, so only when every one is being
  answered is the new one refused;
* request headers with a bare LF line end or an obsolete line folding (RFC 9112, 2.2 and 5.2: a server may
  reject both) are a 400: h11 accepts them, and a proxy in front may read them otherwise.

The limits travel in ``$SYNOPSIS_SERVE_CONNECTIONS`` (JSON), since uvicorn makes the protocol objects
itself, in every worker process; :meth:`GuardedH11Protocol.with_limits` gives a class with its own.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import resource
from dataclasses import asdict, dataclass
from functools import cache
from http import HTTPStatus
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

#: Environment variable holding :class:`ConnectionLimits` as JSON.
LIMITS_ENV = "SYNOPSIS_SERVE_CONNECTIONS"
#: The import string uvicorn's ``http=`` option takes.
PROTOCOL = "synopsis.serve.connections:GuardedH11Protocol"
#: File descriptors kept for everything but connections (models, logs, the event loop, the listener).
_SPARE_DESCRIPTORS = 64
#: Header bytes checked for bare LFs and folding (h11 refuses headers beyond 16 KB itself).
_HEAD_BYTES = 64 * 1024
_BARE_LF = re.compile(rb"(?<!\r)\n")
_FOLDED = re.compile(rb"\r\n[ \t]")
logger = logging.getLogger("synopsis.serve")


@dataclass(frozen=True)
class ConnectionLimits:
    """What one connection may take to send its request (module docstring); ``synopsis serve``'s
    ``--header-timeout``, ``--timeout``, ``--min-body-rate`` and ``--max-connections``."""

    header_timeout_s: float = 10.0
    request_timeout_s: float = 60.0
    min_body_rate: float = 500.0
    max_connections: int = 1000

    def to_env(self) -> str:
        """The value of :data:`LIMITS_ENV` for these limits."""
        return json.dumps(asdict(self))


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
def _limits_from_env() -> ConnectionLimits:
    return ConnectionLimits(**json.loads(os.environ.get(LIMITS_ENV) or "{}"))


#: What a connection is doing: no request in progress (idle, or its headers still arriving), its body
#: arriving, or its request arrived and being answered.
_WAITING, _RECEIVING, _ANSWERING = "waiting", "receiving", "answering"
#: How long the order of the slow bodies, slowest first, is reused before it is sorted again.
_RESORT_S = 0.25
#: A connection this new, without its request yet, is closed for room only when no body lags: under a
#: reconnecting slow-body flood, a probe accepted in the same turn of the loop as the flood's new
#: connections was closed before its request was read (``/health`` answered 83 of 175, issue 58).
_GRACE_S = 1.0


class _Room:
    """The connections of one server that may be closed to make room, kept as they change so that a new
    connection finds its victim without walking every connection (under a flood, each of hundreds of
    connections a second did): those without a request in progress in the order they became so (oldest
    first), and those whose body is arriving, sorted by how far they lag (re-sorted at most every
    ``_RESORT_S`` seconds)."""

    def __init__(self) -> None:
        self.waiting: dict[GuardedH11Protocol, float] = {}  # -> when it began to wait
        self.receiving: dict[GuardedH11Protocol, None] = {}
        self._slowest_last: list[GuardedH11Protocol] = []
        self._sorted_at = float("-inf")

    def track(self, protocol: GuardedH11Protocol, phase: str | None, now: float | None = None) -> None:
        """Where ``protocol`` now is (None: gone); ``now``: the loop's time (default: read from it)."""
        if phase == _WAITING:
            if protocol not in self.waiting:  # keeps its place while it stays waiting
                self.waiting[protocol] = protocol.loop.time() if now is None else now
        else:
            self.waiting.pop(protocol, None)
        if phase == _RECEIVING:
            self.receiving[protocol] = None
        else:
            self.receiving.pop(protocol, None)

    def victim(self, newcomer: GuardedH11Protocol, now: float) -> GuardedH11Protocol | None:
        """The oldest waiting connection that has had :data:`_GRACE_S` to send its request, else the body
        furthest behind the minimum rate, else the oldest newer waiting one; None: none of them."""
        young = None
        for other, since in self.waiting.items():
            if other is newcomer or other.transport.is_closing():
                continue
            if now - since < _GRACE_S:
                young = other  # the oldest of the new ones (and all after it are newer)
                break
            return other
        if not self._slowest_last or now - self._sorted_at > _RESORT_S:
            self._slowest_last = sorted(self.receiving, key=GuardedH11Protocol._lags_at, reverse=True)
            self._sorted_at = now
        while self._slowest_last:
            other = self._slowest_last.pop()
            if other in self.receiving and not other.transport.is_closing():
                return other
        return young


    def make_room(self, newcomer: GuardedH11Protocol, now: float) -> bool:
        """Close the oldest other connection without a request in progress, else the one whose body lags
        furthest behind the minimum rate (answered 503); False when every other one is being answered."""
        victim = self.victim(newcomer, now)
        if victim is None:
            return False
        if victim._phase() == _WAITING:
            victim.transport.close()
        else:
            victim._refuse(503, "the server is full; retry shortly")
        return True


class _HeadCheck:
    """Whether a request's header bytes, read in pieces, end every line with CRLF and fold none (h11 accepts
    both; see the module docstring)."""

    def __init__(self) -> None:
        self.tail = b""  # the last header bytes seen, for line ends split between reads
        self.size = 0

    def clean(self, data: bytes) -> bool:
        """Whether the header bytes in ``data`` (with the last ones seen before) are clean."""
        if self.size > _HEAD_BYTES:
            return True  # h11 refuses headers this long itself
        window = self.tail + data
        end = window.find(b"\r\n\r\n")
        head = window if end < 0 else window[: end + 2]
        self.tail, self.size = window[-3:], self.size + len(data)
        return _BARE_LF.search(head) is None and _FOLDED.search(head) is None


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with deadlines on reading a request and a bound on open connections (module
    docstring)."""

    limits: ClassVar[ConnectionLimits | None] = None  # None: from $SYNOPSIS_SERVE_CONNECTIONS

    @classmethod
    def with_limits(cls, limits: ConnectionLimits) -> type[GuardedH11Protocol]:
        """This protocol with ``limits`` rather than the environment's (a server in this process)."""
        return type(cls.__name__, (cls,), {"limits": limits})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bounds = self.limits or _limits_from_env()
        self._timer: asyncio.TimerHandle | None = None
        self._opened = 0.0
        self._started: float | None = None  # the first byte of the request being read
        self._headers_done: float | None = None
        self._body_bytes = 0
        self._head = _HeadCheck()
        room = getattr(self.server_state, "synopsis_room", None)
        if room is None:  # one per server: its connections share it
            room = self.server_state.synopsis_room = _Room()  # type: ignore[attr-defined]
        self._room: _Room = room

    # ------------------------------------------------------------------ uvicorn's callbacks
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._opened = self.loop.time()
        full = len(self.connections) > self.bounds.max_connections
        if full and not self._room.make_room(self, self._opened):
            self.transport.close()  # every other connection is being answered: this one waits its turn
            return
        self._start_request()
        self._room.track(self, _WAITING, self._opened)

    def data_received(self, data: bytes) -> None:
        phase = self._phase()
        if phase == _WAITING:
            if self._started is None:  # the first bytes of a request on a kept-alive connection
                self._start_request()
            if not self._head.clean(data):
                self._refuse(400, "malformed request headers (a bare LF line end or a folded line)")
                return
        elif phase == _RECEIVING:
            self._body_bytes += len(data)
        super().data_received(data)
        now = self._phase()
        if phase == _WAITING and now != _WAITING:
            self._headers_done = self.loop.time()
        if now == _ANSWERING:
            self._request_read()
        if now != phase:
            self._room.track(self, now)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._room.track(self, None)
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._phase() != _RECEIVING:  # else its body must still arrive in time (then it is closed)
            self._request_read()
        self._room.track(self, self._phase())

    # ------------------------------------------------------------------ the request being read
    def _phase(self) -> str:
        if self.conn.their_state is h11.SEND_BODY:
            return _RECEIVING
        if self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete):
            return _WAITING
        return _ANSWERING

    def _start_request(self) -> None:
        self._started, self._headers_done, self._body_bytes = self.loop.time(), None, 0
        self._head = _HeadCheck()
        self._arm(min(self.bounds.header_timeout_s, self.bounds.request_timeout_s))

    def _request_read(self) -> None:
        """The request has arrived whole (or the connection is idle again): nothing more to time."""
        self._disarm()
        self._started = self._headers_done = None

    def _lags_at(self) -> float:
        """When the body falls below the minimum rate, given what has arrived so far."""
        headers_done = self._headers_done if self._headers_done is not None else self.loop.time()
        return headers_done + self.bounds.header_timeout_s + self._body_bytes / self.bounds.min_body_rate

    def _check(self) -> None:
        """The timer: close a request that is late; otherwise look again at its next deadline."""
        self._timer = None
        if self._started is None or self.transport.is_closing():
            return
        now, phase = self.loop.time(), self._phase()
        deadline = self._started + self.bounds.request_timeout_s
        if phase == _WAITING:
            if now >= min(self._started + self.bounds.header_timeout_s, deadline):
                self.transport.close()  # nothing of a response can be sent before a request
                return
            self._arm(min(self._started + self.bounds.header_timeout_s, deadline) - now)
        elif phase == _RECEIVING:
            if now >= deadline:
                self._refuse(408, f"the request did not arrive within {self.bounds.request_timeout_s:g} s")
            elif now >= self._lags_at():
                rate = f"{self.bounds.min_body_rate:g} bytes/s"
                self._refuse(408, f"the request body arrived slower than {rate}")
            else:
                self._arm(min(deadline, self._lags_at()) - now)

    def _arm(self, delay: float) -> None:
        self._disarm()
        self._timer = self.loop.call_later(max(delay, 0.0), self._check)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _refuse(self, status: int, message: str) -> None:
        """Answer ``status`` with the service's JSON error (unless a response has started) and close."""
        if self.cycle is not None:
            self.cycle.scope["state"]["refused"] = status  # the access log's status for this request
        if self.cycle is None or not self.cycle.response_started:
            body = json.dumps({"error": {"code": _CODES[status], "message": message, "field": None}}).encode()
            head = (
                f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\ncontent-type: application/json\r\n"
                f"content-length: {len(body)}\r\nconnection: close\r\n"
            )
            retry = "retry-after: 1\r\n" if status == 503 else ""
            self.transport.write((head + retry + "\r\n").encode() + body)
        self.transport.close()


_CODES = {400: "bad_request", 408: "timeout", 503: "busy"}
