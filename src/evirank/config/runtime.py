"""Where and how models run: one frozen :class:`Runtime` that every family's scorer takes.

A family's constructor is ``Family(model, runtime, its own options)``: the device, the engine, the
precision, the batch budget, the input cap, the engine's threads, the score store, how often it is
written and whether the model runs on Ray are the runtime's, read from the settings table
(:data:`~evirank.config.settings.SETTINGS`) and checked there, so no family declares or forwards them.

Example:
    >>> runtime = Runtime(device="cpu", batch_tokens=4096)
    >>> runtime.backend, runtime.commit_every, runtime.with_changes(dtype="bf16").dtype
    ('torch', 4, 'bf16')
    >>> Runtime(batch_tokens=0)
    Traceback (most recent call last):
    ...
    evirank.config.table.SettingError: --batch-tokens: expected a positive integer up to 2147483647, found 0
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Protocol

from evirank.config.settings import SETTINGS


class BlockRunner(Protocol):
    """What runs a scorer's blocks of work elsewhere (Ray: :class:`evirank.scale.RayOptions`).

    ``run_blocks(scorer, columns, items, stats, desc=...)`` yields ``(items, outputs)`` of each
    finished block, computed by ``scorer.compute_block`` on the workers.
    """

    def run_blocks(
        self, scorer: Any, columns: Any, items: Any, stats: Any, *, desc: str
    ) -> Iterator[Any]: ...

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Runtime:
    """The runtime of a scorer (see the module).

    Attributes:
        device: ``auto`` (cuda, then mps, then cpu), ``cpu``, ``cuda``, ``cuda:1``, ``mps``.
        backend: the engine (``torch``, ``onnx``, ``onnx-int8``, ``openvino``, ``openvino-int8``).
        dtype: ``auto`` (each backend's default: bf16 on GPUs, fp32 on CPUs), ``fp32``, ``bf16``, ``fp16``.
        batch_tokens: token budget per batch (None: by device, and on CUDA by model width).
        max_length: input token cap (None: the family's and the model's).
        model_threads: CPU threads of the engine (None: the engine's own choice).
        batch_layout: ``auto``, ``padded`` or ``unpadded`` (the real tokens only; torch, BERT-like
            encoders; see :mod:`evirank.score.unpadded`).
        commit_every: new scores go to the store every this many batches.
        store: a score store or its location (None: none).
        ray: runs the model's blocks on Ray (:class:`~evirank.scale.RayOptions`; None: in this process).
    """

    device: str = SETTINGS.default("device")
    backend: str = SETTINGS.default("backend")
    dtype: str = SETTINGS.default("dtype")
    batch_tokens: int | None = SETTINGS.default("batch_tokens")
    max_length: int | None = SETTINGS.default("max_length")
    model_threads: int | None = SETTINGS.default("model_threads")
    batch_layout: str = SETTINGS.default("batch_layout")
    commit_every: int = SETTINGS.default("commit_every")
    store: Any = None
    ray: BlockRunner | None = None

    def __post_init__(self) -> None:
        for name in RUNTIME_SETTINGS:
            value = getattr(self, name)
            checked = SETTINGS.check(name, value)
            if checked is None and SETTINGS.default(name) is not None:
                checked = SETTINGS.default(name)
            object.__setattr__(self, name, checked)
        if (
            self.store is not None
            and not isinstance(self.store, str | os.PathLike)
            and not hasattr(self.store, "lookup")
        ):
            raise TypeError(f"store must be a score store or its location, found {type(self.store).__name__}")

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any], **objects: Any) -> Runtime:
        """The runtime of flag-like ``options`` (absent or None: the table's default), plus
        ``objects`` (``store``, ``ray``).

        Example:
            >>> Runtime.from_mapping({"device": "cpu", "k": 10}).device
            'cpu'
        """
        return cls(**{name: SETTINGS.value(options, name) for name in RUNTIME_SETTINGS}, **objects)

    def with_changes(self, **changes: Any) -> Runtime:
        """A copy with some fields replaced (checked again)."""
        return replace(self, **changes)

    def describe(self) -> dict[str, Any]:
        """The settings as a plain dict for records (the store and the runner by what they are)."""
        described: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        described["store"] = None if self.store is None else str(getattr(self.store, "path", self.store))
        described["ray"] = None if self.ray is None else self.ray.to_dict()
        return described


#: The runtime's fields that are settings of the table, in order (the others are objects: the
#: store, the runner): a field added to :class:`Runtime` with its setting in the table is a flag of
#: every command that takes the scoring flags, and a keyword of the Python API.
RUNTIME_SETTINGS = tuple(f.name for f in fields(Runtime) if f.name not in ("store", "ray"))
