"""A real server for the service's tests: uvicorn in a thread on a free loopback port."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def running_server(app: Any, **config: Any) -> Iterator[str]:
    """``app`` served by uvicorn in a thread on a free loopback port (``config``: more of uvicorn's
    settings); yields its base URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, **config))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def wait_for(predicate: Any, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def lead3_app(**settings: Any) -> Any:
    """The service with one model, lead-3 (no weights), under ``ServeSettings(**settings)``."""
    from synopsis.serve import ModelRegistry, ServeSettings, create_app, describe
    from synopsis.summarizers import load_summarizer

    registry = ModelRegistry()
    registry.add(describe("lead-3", load_summarizer("lead-3")))
    return create_app(registry, ServeSettings(**settings))
