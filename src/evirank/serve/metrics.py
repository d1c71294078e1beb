"""The service's ``/metrics``, in Prometheus' text format (through ``prometheus-client``).

Counted per endpoint (the route's path, not the URL, so the series stay few): requests by status and
their latency; and for ``/rerank``: documents ranked, passages scored, the requests and passages each
model batch took together, and the requests waiting or running.

Example:
    >>> metrics = ServiceMetrics()  # doctest: +SKIP
    >>> metrics.request("/v1/rerank", 200, 0.05)  # doctest: +SKIP
    >>> b"evirank_requests_total" in metrics.render()[0]  # doctest: +SKIP
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evirank.extras import require

#: Latency buckets, in seconds: from a cached short request to a long document set on a CPU.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class ServiceMetrics:
    """The service's counters, histograms and gauges, in a registry of their own.

    A registry per service (not the process-wide default) keeps two apps in one process (tests, a
    replica per process on Ray) from counting into each other.
    """

    def __init__(self) -> None:
        prometheus = require("prometheus_client", "serve")
        self._prometheus = prometheus
        self.registry = prometheus.CollectorRegistry()
        self.requests = prometheus.Counter(
            "evirank_requests", "requests answered, by endpoint and status", ["endpoint", "status"],
            registry=self.registry,
        )
        self.latency = prometheus.Histogram(
            "evirank_request_seconds", "time to answer a request, by endpoint", ["endpoint"],
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )
        self.documents = prometheus.Counter(
            "evirank_documents_ranked", "documents ranked by /rerank requests", registry=self.registry
        )
        self.passages = prometheus.Counter(
            "evirank_passages_scored", "passages read by the model for /rerank requests", registry=self.registry
        )
        self.batch_requests = prometheus.Histogram(
            "evirank_batch_requests", "requests ranked together in one model batch",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128), registry=self.registry,
        )
        self.batch_passages = prometheus.Histogram(
            "evirank_batch_passages", "passages scored in one model batch",
            buckets=(1, 10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000), registry=self.registry,
        )
        self.batch_seconds = prometheus.Histogram(
            "evirank_batch_seconds", "time of one model batch", buckets=LATENCY_BUCKETS, registry=self.registry
        )
        self.queue = prometheus.Gauge(
            "evirank_queue_depth", "rerank requests waiting or running", registry=self.registry
        )

    def request(self, endpoint: str, status: int, seconds: float) -> None:
        """Count one answered request."""
        self.requests.labels(endpoint, str(status)).inc()
        self.latency.labels(endpoint).observe(seconds)

    def batch(self, requests: int, passages: int, seconds: float) -> None:
        """Count one model batch of ``requests`` requests and ``passages`` passages."""
        self.batch_requests.observe(requests)
        self.batch_passages.observe(passages)
        self.batch_seconds.observe(seconds)
        self.passages.inc(passages)

    def track_queue(self, depth: Callable[[], float]) -> None:
        """Read the queue depth from ``depth`` at each scrape."""
        self.queue.set_function(depth)

    def render(self) -> tuple[bytes, str]:
        """The metrics in Prometheus' text format, and its content type."""
        body: Any = self._prometheus.generate_latest(self.registry)
        return bytes(body), str(self._prometheus.CONTENT_TYPE_LATEST)
