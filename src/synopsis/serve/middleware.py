"""The service's ASGI middleware: the Host check (400), the bearer token (401), the body-size limit (413), no
body where a route takes none (400), one access-log line and the metrics of every request, before the
application sees a byte of the body."""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import time
from collections.abc import Iterable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from synopsis.serve.errors import error_response
from synopsis.serve.metrics import ServiceMetrics

access_logger = logging.getLogger("synopsis.serve.access")

#: Paths that need the bearer token when one is configured; /health stays open for probes, the page and the
#: API reference are static (the page asks for the token itself).
PROTECTED_PREFIXES = ("/v1/", "/metrics")
#: An oversized or refused body is read and discarded up to this many bytes (and seconds) before the error
#: is sent, so that clients which write their whole body before reading (urllib, requests, httpx) receive
#: the answer instead of a connection reset. Larger bodies are refused without reading; the client may then
#: see a reset. Clients that send ``Expect: 100-continue`` (curl) are answered at once.
DRAIN_BYTES = 256 * 1024 * 1024
DRAIN_SECONDS = 30.0
#: The most characters of one client string (path, method, model name, address) a log line or an error
#: message repeats; the rest is counted, never written.
ECHO_CHARS = 200
#: Methods whose requests carry a body on the routes that take one.
BODY_METHODS = ("POST", "PUT", "PATCH")


def log_safe(value: str) -> str:
    """``value`` with everything that could forge or break a log line escaped: control characters (a
    decoded ``%0a`` or ``%00``), quotes, backslashes and lone surrogates become Python escapes."""
    if value.isprintable() and '"' not in value and "\\" not in value:  # nearly every value: one C pass
        return value
    return "".join(char if char.isprintable() and char not in _QUOTING else _escaped(char) for char in value)


_QUOTING = '"\\'


def _escaped(char: str) -> str:
    return '\\"' if char == '"' else char.encode("unicode_escape").decode("ascii")


def clipped(value: str, limit: int = ECHO_CHARS) -> str:
    """``value`` escaped (:func:`log_safe`), at most its first ``limit`` characters, with how many more
    there were: what a log line or an error message may repeat of a client's string."""
    if len(value) <= limit:
        return log_safe(value)
    return f"{log_safe(value[:limit])}...(+{len(value) - limit} chars)"


def host_name(header: bytes) -> str:
    """The name in a ``Host`` header, without its port, lower-cased and without a final dot."""
    host = header.decode("latin-1").strip().lower()
    if host.startswith("["):  # an IPv6 literal: [::1]:8000
        return host[1 : host.find("]")] if "]" in host else host
    name, colon, port = host.rpartition(":")
    return (name if colon and port.isdigit() else host).rstrip(".")


def host_allowed(header: bytes | None, allowed: frozenset[str]) -> bool:
    """Whether a request's ``Host`` is one of ``allowed`` or an IP address. An address cannot be rebound by
    DNS: a web page of another origin reaches the server by a name it controls (DNS rebinding), and such a
    name is refused."""
    if header is None:
        return False
    name = host_name(header)
    if name in allowed:
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _protected(path: str) -> bool:
    return path == "/v1" or any(path == p.rstrip("/") or path.startswith(p) for p in PROTECTED_PREFIXES)


def _authorized(headers: dict[bytes, bytes], token: bytes) -> bool:
    scheme, _, given = headers.get(b"authorization", b"").partition(b" ")
    # compare_digest: the time taken does not depend on where the first wrong byte is
    return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), token)


class RequestMiddleware:
    """Host (400), auth (401), body-size limit (413) before the app sees a byte of an oversized body, one log
    line and the metrics of every request.

    ``allowed_hosts`` (None: any ``Host``) are the names a request may address the server by, besides IP
    addresses (:func:`host_allowed`); ``synopsis serve`` sets them when it runs without a token. A request
    with a body (``Content-Length`` above 0, or chunked) on a route that takes none (any but
    ``body_paths`` with a :data:`BODY_METHODS` method) is refused at once and its connection closed: such a
    body was read and thrown away, which let a client hold a connection by trickling it.

    Bodies are read here, up to the limit, and replayed to the app: a declared ``Content-Length`` over the
    limit is refused without keeping a byte, and a chunked body as soon as it passes the limit; either is
    read and discarded (up to ``DRAIN_BYTES``) first, see there. A body that has not arrived
    ``body_timeout_s`` after the request did is a 408 (the connection is then closed). A body that is not
    UTF-8 (RFC 8259 JSON must be) is a 422 here rather than the framework's undocumented 400.
    """

    def __init__(
        self,
        app: ASGIApp,
        max_body_bytes: int,
        auth_token: str | None = None,
        metrics: ServiceMetrics | None = None,
        body_timeout_s: float | None = None,
        body_paths: Iterable[str] | None = None,
        allowed_hosts: Iterable[str] | None = None,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s
        self.body_paths = None if body_paths is None else frozenset(body_paths)
        self.allowed_hosts = None if allowed_hosts is None else frozenset(h.lower() for h in allowed_hosts)
        self.token = None if auth_token is None else auth_token.strip().encode()
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        arrived = time.perf_counter()
        state = scope.setdefault("state", {})
        state["arrived"] = arrived
        status, sent, received = 500, 0, 0
        finished = gone = False

        async def send_logged(message: Message) -> None:
            nonlocal status, sent, finished
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
                finished = not message.get("more_body", False)
            await send(message)

        async def receive_watched() -> Message:
            nonlocal gone
            message = await receive()
            gone = gone or message["type"] == "http.disconnect"
            return message

        head = scope["method"] == "HEAD"
        if head:  # HEAD is GET without the body (RFC 9110, 9.3.2): every GET route answers it
            scope = {**scope, "method": "GET"}
            send_logged = _without_body(send_logged)
        try:
            headers = dict(scope["headers"])
            refusal = self._refusal(scope, headers)
            if refusal is not None:  # answered at once, the body (if any) unread, and the connection closed
                await error_response(*refusal, headers={"Connection": "close"})(scope, receive, send_logged)
                return
            declared = headers.get(b"content-length")
            received = int(declared) if declared is not None else 0
            if not await self._admitted(scope, headers, receive, send_logged):
                return
            if scope["method"] in BODY_METHODS:
                body = await self._body(scope, receive, send_logged)
                if body is None:
                    status = state.get("refused", status)  # the connection's own 408 (connections.py)
                    return
                received = len(body)
                receive = _replay(body, receive)
            await self.app(scope, receive_watched, send_logged)
        finally:
            if gone and not finished:  # the client hung up before the answer's end: nginx's 499, not a 200
                status = 499
            self._log(scope, head, status, arrived, received, sent)

    def _refusal(self, scope: Scope, headers: dict[bytes, bytes]) -> tuple[int, str, str, str | None] | None:
        """``(status, code, message, field)`` of a request refused on its headers alone, or None."""
        if sum(name == b"authorization" for name, _ in scope["headers"]) > 1:
            # which one would count is up to each proxy on the way: refuse rather than pick one
            return 400, "bad_request", "more than one Authorization header", "Authorization"
        if self.allowed_hosts is not None and not host_allowed(headers.get(b"host"), self.allowed_hosts):
            return 400, "bad_request", "this server does not answer to that Host (--allowed-hosts)", "Host"
        declared = headers.get(b"content-length")
        if declared is not None and not declared.isdigit():
            return 400, "bad_request", "invalid Content-Length header", "Content-Length"
        return None

    def _takes_body(self, scope: Scope) -> bool:
        anywhere = self.body_paths is None
        return scope["method"] in BODY_METHODS and (anywhere or scope["path"] in self.body_paths)

    async def _admitted(
        self, scope: Scope, headers: dict[bytes, bytes], receive: Receive, send: Send
    ) -> bool:
        """The token (401), a body where the route takes none (400) and the declared size (413); a refused
        body is drained first (``DRAIN_BYTES``) where the route takes one, else refused unread at once."""
        declared = headers.get(b"content-length")
        size = int(declared) if declared is not None else None
        expect_continue = headers.get(b"expect", b"").lower() == b"100-continue"
        takes_body = self._takes_body(scope)
        if self.token is not None and _protected(scope["path"]) and not _authorized(headers, self.token):
            if not expect_continue and takes_body:
                await _drain(receive, size)
            await error_response(
                401,
                "unauthorized",
                "missing or wrong token: send the header 'Authorization: Bearer <token>'",
                headers={"WWW-Authenticate": "Bearer", "Connection": "close"},
            )(scope, receive, send)
            return False
        if not takes_body and (bool(size) or b"transfer-encoding" in headers):
            refused = error_response(
                400, "bad_request", "this route takes no request body", headers={"Connection": "close"}
            )
            await refused(scope, receive, send)
            return False
        if size is not None and size > self.max_body_bytes:
            if not expect_continue:
                await _drain(receive, size)
            await self._too_large(scope, receive, send)
            return False
        return True

    async def _body(self, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        """The whole body, or None once a 408, 413 or 422 is answered or the client has gone (then the
        request's status is in ``scope["state"]["refused"]``)."""
        body = bytearray()
        more = True
        limit = self.body_timeout_s
        deadline = None if limit is None else scope["state"]["arrived"] + limit
        while more:
            try:
                message = await _received_by(receive, deadline)
            except TimeoutError:  # a client trickling its body holds a connection: not for ever
                await error_response(
                    408,
                    "timeout",
                    f"the request body did not arrive within {self.body_timeout_s:g} s",
                    headers={"Connection": "close"},
                )(scope, receive, send)
                return None
            if message["type"] == "http.disconnect":
                scope["state"].setdefault("refused", 499)  # the client went away before sending its body
                return None
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_body_bytes:
                if more:
                    await _drain(receive, None)
                await self._too_large(scope, receive, send)
                return None
        if body and not _decodes(bytes(body)):
            await error_response(
                422, "validation_error", "the request body is not UTF-8 text (a JSON body must be UTF-8)"
            )(scope, receive, send)
            return None
        return bytes(body)

    def _log(self, scope: Scope, head: bool, status: int, arrived: float, received: int, sent: int) -> None:
        elapsed = time.perf_counter() - arrived
        state = scope["state"]
        extra = state.get("log", "")
        # what the client sent is escaped and clipped: it cannot add a line, nor make one of megabytes
        access_logger.info(
            '%s "%s %s" %d %.1fms in=%dB out=%dB%s',
            _client(scope),
            "HEAD" if head else clipped(scope["method"], 20),
            clipped(scope["path"]),
            status,
            1000 * elapsed,
            received,
            sent,
            f" {clipped(extra)}" if extra else "",
        )
        if self.metrics is not None:
            self.metrics.observe_request(scope["path"], state.get("model"), status, elapsed)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit_mb = self.max_body_bytes / 1024 / 1024
        response = error_response(
            413,
            "body_too_large",
            f"request body larger than the {limit_mb:g} MB limit ({self.max_body_bytes} bytes)",
            headers={"Connection": "close"},
        )
        await response(scope, receive, send)


async def _drain(receive: Receive, declared: int | None) -> int:
    """Read and discard the rest of a refused body, within ``DRAIN_BYTES`` and ``DRAIN_SECONDS``."""
    if declared is not None and declared > DRAIN_BYTES:
        return 0
    read = 0

    async def loop() -> None:
        nonlocal read
        while read <= DRAIN_BYTES:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            read += len(message.get("body", b""))
            if not message.get("more_body", False):
                return

    try:
        await asyncio.wait_for(loop(), DRAIN_SECONDS)
    except TimeoutError:
        pass
    return read


async def _received_by(receive: Receive, deadline: float | None) -> Message:
    if deadline is None:
        return await receive()
    return await asyncio.wait_for(receive(), max(deadline - time.perf_counter(), 0.001))


def _decodes(body: bytes) -> bool:
    """Whether ``json.loads`` could decode ``body`` as text (it detects UTF-8/16/32 as the RFC allows)."""
    try:
        body.decode(json.detect_encoding(body))
    except UnicodeDecodeError:
        return False
    return True


def _without_body(send: Send) -> Send:
    async def send_head(message: Message) -> None:
        if message["type"] == "http.response.body":
            message = {**message, "body": b""}
        await send(message)

    return send_head


def _replay(body: bytes, receive: Receive) -> Receive:
    done = False

    async def replay() -> Message:
        nonlocal done
        if not done:
            done = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # after the body, only a disconnect can come

    return replay


def _client(scope: Scope) -> str:
    """The peer, or what a trusted proxy's ``X-Forwarded-For`` says it is (``--forwarded-allow-ips``):
    escaped and clipped like every client string."""
    client = scope.get("client")
    return f"{clipped(str(client[0]), 64)}:{client[1]}" if client else "-"
