"""``GET /metrics``: the service's counters in the Prometheus text format, with ``prometheus-client``.

Each app has its own :class:`~prometheus_client.CollectorRegistry` (several apps in one process, as in the
tests, never share counters). Labels take bounded values only: the endpoint is one of the app's routes or
``other``, the model one of the registry's names or ``-``, so a scan of random URLs or model names cannot
grow the series without bound. With ``--workers N`` each worker answers with its own counters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

ENDPOINTS = ("/", "/health", "/metrics", "/v1/models", "/v1/summarize", "/v1/outline", "/v1/evaluate")
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)


class _LiveState(Collector):
    """Values read when scraped: queue depth, running jobs, and each InstructSum source cache's counters."""

    def __init__(
        self,
        queues: Callable[[], dict[str, int]],
        caches: Callable[[], Iterable[tuple[str, Any]]],
        running: Callable[[], dict[str, int]] | None = None,
    ) -> None:
        self._queues = queues
        self._caches = caches
        self._running = running

    def collect(self) -> Iterator[Any]:
        depth = GaugeMetricFamily(
            "synopsis_queue_depth",
            "Jobs waiting for an inference thread (pool) and summaries waiting for a batch (batch)",
            labels=["queue"],
        )
        for queue, value in self._queues().items():
            depth.add_metric([queue], value)
        yield depth
        if self._running is not None:
            help_text = "Batched calls running now (at most --batch-workers)"
            running = GaugeMetricFamily("synopsis_batches_running", help_text, labels=["model"])
            for model, value in self._running().items():
                running.add_metric([model], value)
            yield running
        hits = CounterMetricFamily(
            "synopsis_instructsum_cache_hits", "InstructSum source cache hits", labels=["model"]
        )
        misses = CounterMetricFamily(
            "synopsis_instructsum_cache_misses", "InstructSum source cache misses", labels=["model"]
        )
        for model, cache in self._caches():
            hits.add_metric([model], cache.hits)
            misses.add_metric([model], cache.misses)
        yield hits
        yield misses


class ServiceMetrics:
    """Requests by endpoint, model and status; latency and batch-size histograms; live queue state."""

    def __init__(
        self,
        models: Iterable[str],
        queues: Callable[[], dict[str, int]],
        caches: Callable[[], Iterable[tuple[str, Any]]],
        running: Callable[[], dict[str, int]] | None = None,
    ) -> None:
        self.models = frozenset(models)
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "synopsis_requests",
            "HTTP requests by endpoint, model (summarize) and status code",
            ["endpoint", "model", "status"],
            registry=self.registry,
        )
        latency_help = "Time from a request's arrival to its last response byte"
        batch_help = "Summaries per summarizer call (1 without batching)"
        latency = "synopsis_request_duration_seconds"
        self.latency = self._histogram(latency, latency_help, "endpoint", LATENCY_BUCKETS)
        self.batch_size = self._histogram("synopsis_batch_size", batch_help, "model", BATCH_BUCKETS)
        self.registry.register(_LiveState(queues, caches, running))

    def _histogram(self, name: str, description: str, label: str, buckets: tuple[float, ...]) -> Histogram:
        """A histogram with one label in this app's own registry."""
        return Histogram(name, description, [label], buckets=buckets, registry=self.registry)

    def observe_request(self, path: str, model: str | None, status: int, seconds: float) -> None:
        endpoint = path if path in ENDPOINTS else "other"
        label = model if model in self.models else "-"
        self.requests.labels(endpoint, label, str(status)).inc()
        self.latency.labels(endpoint).observe(seconds)

    def observe_batch(self, model: str, size: int) -> None:
        self.batch_size.labels(model if model in self.models else "-").observe(size)

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
