"""Locust user for ``benchmarks/serve_locust.py``: POST /v1/summarize of the example abstract, back to back.

Each user sends one request at a time (closed loop, no think time) and stops after
``$SYNOPSIS_LOCUST_REQUESTS`` requests, so a run is bounded in requests as well as in time (``--run-time``).
"""

from __future__ import annotations

import os
from pathlib import Path

from locust import FastHttpUser, constant, task
from locust.exception import StopUser

DOCUMENT = (Path(__file__).resolve().parents[1] / "examples" / "paper_abstract.txt").read_text()
MODEL = os.environ.get("SYNOPSIS_LOCUST_MODEL", "default")
REQUESTS = int(os.environ.get("SYNOPSIS_LOCUST_REQUESTS", "200"))
TOKEN = os.environ.get("SYNOPSIS_API_TOKEN")


class Summarizer(FastHttpUser):
    wait_time = constant(0)
    network_timeout = 120.0
    connection_timeout = 10.0

    def on_start(self) -> None:
        self.sent = 0
        self.headers = {"Authorization": f"Bearer {TOKEN}"} if TOKEN else {}

    @task
    def summarize(self) -> None:
        if self.sent >= REQUESTS:
            raise StopUser()
        self.sent += 1
        self.client.post(
            "/v1/summarize",
            json={"document": DOCUMENT, "model": MODEL},
            headers=self.headers,
            name="summarize",
        )
