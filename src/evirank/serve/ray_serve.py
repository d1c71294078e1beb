"""``/rerank`` on Ray Serve: the same app in front, the models in replicas, a dead replica's requests retried.

``evirank serve --ray ADDRESS|local --replicas N`` deploys two Ray Serve deployments:

* **the models** (``evirank-models``): ``N`` replicas, each holding every served model as
  ``evirank serve`` builds it in one process (a :class:`~evirank.serve.rerank.RerankService`: the
  requests a replica receives together are ranked in shared model batches). Each replica takes
  ``--model-threads`` CPUs (default 1), or a GPU with ``--device cuda``.
* **the front** (``evirank-front``): the same FastAPI app as ``evirank serve`` (the request shapes,
  limits, API key, ``/metrics``, ``/health``), with a :class:`RayRerank` in place of the in-process
  service. It sends each request to a model replica through a deployment handle (Ray Serve picks
  the replica) and, when the replica dies before answering, sends it again to another one, so a
  killed replica costs its clients time, not an error.

Every replica loads the models itself, so evirank and the model folders must be present on every
node of a remote cluster.

Example:
    $ evirank serve --model minilm=models/minilm-cross --ray local --replicas 2 --port 8000
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from evirank.extras import require
from evirank.serve.rerank import RerankFront, RerankJob, RerankLimits, RerankOutcome, RerankService

logger = logging.getLogger(__name__)

#: Times a request is sent to a model replica before its failure is the client's.
ATTEMPTS = 3


def _retryable() -> tuple[type[BaseException], ...]:
    """The errors that mean a replica (not the request) failed: it died or cannot be reached."""
    exceptions = require("ray.exceptions", "ray")
    return (exceptions.RayActorError, exceptions.ActorUnavailableError)


class ModelReplica:
    """A Ray Serve replica holding the served models (built by ``build`` on the replica).

    Args:
        build: makes the :class:`RerankService` (called once, on the replica).
        warm_up: load the models before the replica takes requests.
    """

    def __init__(self, build: Callable[[], RerankService], warm_up: bool = True) -> None:
        self.service = build()
        if warm_up:
            seconds = self.service.warm_up()
            logger.info("replica ready: models loaded in %.1f s", seconds)

    async def rerank(self, name: str, job: RerankJob) -> RerankOutcome:
        """Rank one job (its limits were checked by the front)."""
        _, future = self.service.submit(name, job)
        return await asyncio.wrap_future(future)

    def describe(self) -> dict[str, dict[str, Any]]:
        return self.service.describe()


class RayRerank(RerankFront):
    """The front's rerank service: admission and limits here, the model work on a replica.

    Args:
        handle: the model deployment's handle.
        names: the served models' names.
        limits: what a request may hold and how long it may wait.
        described: what each model is (for ``/health``).
        attempts: sends of one request before a replica failure reaches the client.
    """

    def __init__(
        self,
        handle: Any,
        names: Sequence[str],
        limits: RerankLimits,
        described: dict[str, dict[str, Any]] | None = None,
        attempts: int = ATTEMPTS,
    ) -> None:
        super().__init__(names, limits)
        self.handle = handle
        self.described = described or {}
        self.attempts = attempts
        #: requests sent again after their replica failed (for tests and logs)
        self.retried = 0

    def describe(self) -> dict[str, dict[str, Any]]:
        return {
            name: {**self.described.get(name, {}), "engine": "ray serve", "retried": self.retried}
            for name in self.names
        }

    def _start(self, name: str, job: RerankJob) -> asyncio.Future[RerankOutcome]:
        task = asyncio.ensure_future(self._call(name, job))
        task.add_done_callback(self._release)
        return task

    async def _call(self, name: str, job: RerankJob) -> RerankOutcome:
        retryable = _retryable()
        for attempt in range(1, self.attempts + 1):
            response = self.handle.rerank.remote(name, job)
            try:
                outcome: RerankOutcome = await response
                return outcome
            except asyncio.CancelledError:
                response.cancel()
                raise
            except retryable as exc:
                if attempt == self.attempts:
                    raise
                self.retried += 1
                logger.warning(
                    "a model replica failed (%s); sending the request to another (attempt %d of %d)",
                    type(exc).__name__,
                    attempt + 1,
                    self.attempts,
                )
        raise AssertionError("unreachable")  # pragma: no cover


class Front:
    """The ingress deployment: the FastAPI app, built on its replica around a :class:`RayRerank`."""

    def __init__(
        self,
        models: Any,
        names: Sequence[str],
        limits: RerankLimits,
        described: dict[str, dict[str, Any]],
        api_key: str | None,
        cors_origins: Sequence[str],
    ) -> None:
        self.service = RayRerank(models, names, limits, described)
        self.api_key = api_key
        self.cors_origins = tuple(cors_origins)

    def __serve_build_asgi_app__(self) -> Any:
        from evirank.serve.app import create_app

        return create_app(rerank=self.service, api_key=self.api_key, cors_origins=self.cors_origins)


def serve_on_ray(
    build: Callable[[], RerankService],
    names: Sequence[str],
    limits: RerankLimits,
    *,
    address: str,
    replicas: int,
    host: str,
    port: int,
    cpus_per_replica: float = 1.0,
    gpus_per_replica: float = 0.0,
    api_key: str | None = None,
    cors_origins: Sequence[str] = (),
    warm_up: bool = True,
    blocking: bool = True,
) -> None:
    """Deploy the models (``replicas`` copies) and the front on Ray Serve; serve until interrupted.

    Args:
        build: makes the in-process service on each model replica.
        names: the served models' names.
        limits: the front's limits (each replica queues what it receives).
        address: ``local`` (a Ray instance on this machine), ``auto`` or ``HOST:PORT``.
        replicas: model replicas.
        host: the interface Ray Serve's HTTP proxy listens on.
        port: its port.
        cpus_per_replica: CPUs each model replica reserves.
        gpus_per_replica: GPUs each model replica reserves (1 with ``--device cuda``).
        api_key: the key every request but ``/health`` and ``/ready`` must send.
        cors_origins: origins whose pages may call the service.
        warm_up: load the models before a replica takes requests.
        blocking: serve until interrupted (False: return once deployed, for tests).
    """
    from evirank.scale.engine import connect
    from evirank.scale.options import RayOptions

    serve = require("ray.serve", "ray")
    # a local instance listens on the loopback address only, and ends with this process
    connect(RayOptions(address=address, workers=replicas, cpus_per_worker=cpus_per_replica))
    serve.start(http_options={"host": host, "port": port})
    model_deployment = serve.deployment(
        ModelReplica,
        name="evirank-models",
        num_replicas=replicas,
        ray_actor_options={"num_cpus": cpus_per_replica, "num_gpus": gpus_per_replica},
        max_ongoing_requests=max(1, limits.max_pending),
        health_check_period_s=2,
        graceful_shutdown_timeout_s=5,
    ).bind(build, warm_up)
    front = serve.deployment(
        serve.ingress()(Front),
        name="evirank-front",
        num_replicas=1,
        ray_actor_options={"num_cpus": 0},
        max_ongoing_requests=max(1, limits.max_pending) * 2,
    ).bind(model_deployment, list(names), limits, {}, api_key, list(cors_origins))
    logger.info(
        "deploying %d model replica(s) of %s on Ray Serve at http://%s:%d/",
        replicas,
        ", ".join(names),
        host,
        port,
    )
    serve.run(front, name="evirank", route_prefix="/", blocking=blocking)
