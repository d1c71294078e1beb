"""Where and how wide a Ray scoring job runs."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from evirank.config import SETTINGS


@dataclass(frozen=True)
class RayOptions:
    """How a scorer runs its model on Ray.

    Args:
        address: ``"local"`` starts a Ray instance inside this process's machine; ``"auto"``
            joins the cluster this machine belongs to (``ray start``); anything else is a Ray
            address (``HOST:PORT``). A Ray session already started in
            this process (``ray.init``) is used as it is.
        workers: model replicas (actors); ``None``: one per GPU with ``gpus_per_worker``, else
            one per ``cpus_per_worker`` cores of the cluster, keeping one core free for Ray's
            own tasks.
        cpus_per_worker: cores Ray reserves for each replica; ``None``: as many as the model's
            threads (1 with GPUs). A replica runs the model with the threads it would have in one
            process (``--model-threads``, else the engine's default on the driver), so the scores
            are the same bits with and without Ray, whatever is reserved.
        gpus_per_worker: GPUs each replica takes (``1``: one replica per GPU; ``0``: CPU).
        blocks_per_task: scorer chunks (:attr:`TransformerScorer.chunk_items` items each) per
            Ray task; a task is what a lost worker re-runs.

    Example:
        >>> RayOptions(workers=2).for_threads(4).to_dict()["cpus_per_worker"]
        4.0
    """

    address: str = "local"
    workers: int | None = None
    cpus_per_worker: float | None = None
    gpus_per_worker: float = 0.0
    blocks_per_task: int = 1

    def __post_init__(self) -> None:
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"workers must be at least 1, found {self.workers}")
        if self.cpus_per_worker is not None and not self.cpus_per_worker > 0:
            raise ValueError(f"cpus_per_worker must be positive, found {self.cpus_per_worker}")
        if self.gpus_per_worker < 0:
            raise ValueError(f"gpus_per_worker must be 0 or more, found {self.gpus_per_worker}")
        if self.blocks_per_task < 1:
            raise ValueError(f"blocks_per_task must be at least 1, found {self.blocks_per_task}")
        if self.cpus_per_worker is not None:
            object.__setattr__(self, "cpus_per_worker", float(self.cpus_per_worker))
        object.__setattr__(self, "gpus_per_worker", float(self.gpus_per_worker))

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> RayOptions | None:
        """The options of the ``--ray`` settings in ``options`` (a parsed command line, a conditions
        entry); None without ``ray``.

        Raises:
            SettingError: a bad value, naming its flag.

        Example:
            >>> RayOptions.from_mapping({"ray": "local", "ray_workers": 2}).workers
            2
            >>> RayOptions.from_mapping({}) is None
            True
        """
        address = SETTINGS.value(options, "ray")
        if address is None:
            return None
        return cls(
            address,
            SETTINGS.value(options, "ray_workers"),
            SETTINGS.value(options, "ray_cpus"),
            SETTINGS.value(options, "ray_gpus"),
        )

    def for_threads(self, threads: int) -> RayOptions:
        """These options with the cores per replica decided: as given, else ``threads`` (the model's
        threads) on CPUs and 1 with GPUs.

        Example:
            >>> RayOptions(gpus_per_worker=1).for_threads(8).cpus_per_worker
            1.0
            >>> RayOptions(cpus_per_worker=2).for_threads(8).cpus_per_worker
            2.0
        """
        if self.cpus_per_worker is not None:
            return self
        return replace(self, cpus_per_worker=1.0 if self.gpus_per_worker > 0 else float(max(1, threads)))

    @property
    def cpus(self) -> float:
        """The cores per replica (1 until :meth:`for_threads` decided them)."""
        return 1.0 if self.cpus_per_worker is None else self.cpus_per_worker

    def run_blocks(self, scorer: Any, columns: Any, items: Any, stats: Any, *, desc: str) -> Iterator[Any]:
        """Run ``scorer.compute_block`` over ``items`` on Ray actors, block by block
        (:func:`evirank.scale.engine.run_blocks`); yields ``(items, outputs)`` per finished block."""
        from evirank.scale.engine import run_blocks

        yield from run_blocks(scorer, columns, items, stats, desc=desc, options=self)

    def to_dict(self) -> dict[str, Any]:
        """The options as a plain dict (for run records)."""
        return asdict(self)
