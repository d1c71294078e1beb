"""``evirank embed --ray``: a collection's passage vectors built by Ray Data actors, block by block.

The vector build is cut into blocks of documents (:mod:`evirank.vectors.writer`); each block is one
Ray task: an actor segments its documents, embeds the passages and writes the block's one shard
(temporary name, then rename) into the build's partial folder, which every worker must reach (a
local folder on one machine, a shared file system on a cluster). The driver streams the corpus in
waves of blocks (it holds one wave's documents at a time), skips blocks whose shard exists (a
resumed build), and compacts the shards into the vector folder at the end, as the single-process
build does. A lost worker's block runs again on the restarted actor and rewrites the same shard.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from typing import Any

import numpy as np

from evirank.extras import require
from evirank.scale.engine import connect, engine_settings, worker_count
from evirank.scale.options import RayOptions

logger = logging.getLogger(__name__)

#: Blocks per wave per worker: a wave is one Ray Data job (its actors load the model once).
WAVE_PER_WORKER = 16


class EmbedWorker:
    """One bi-encoder replica in a Ray actor: builds the shards of the blocks it is given."""

    def __init__(self, builder: Any, engine: dict[str, str]) -> None:
        os.environ.update(engine)
        scorer = builder.scorer
        scorer.store = None  # the shards are the output; the workers keep no score store
        scorer.ray = None
        scorer.runtime = scorer.runtime.with_changes(model_threads=int(engine["EVIRANK_NUM_THREADS"]))
        self.builder = builder

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        from evirank.frames import Document

        blocks, passages = [], []
        for i in range(len(batch["block"])):
            docs = [
                Document(str(d), str(t), str(x))
                for d, t, x in zip(batch["docno"][i], batch["title"][i], batch["text"][i], strict=True)
            ]
            passages.append(self.builder.build_block(int(batch["block"][i]), docs))
            blocks.append(int(batch["block"][i]))
        return {"block": np.asarray(blocks, dtype=np.int64), "passages": np.asarray(passages, dtype=np.int64)}


def embed_on_ray(
    builder: Any, documents: Iterable[Any], options: RayOptions, *, total: int | None = None
) -> Any:
    """Build ``builder``'s vector folder on Ray (resuming an unfinished build); return it opened.

    Args:
        builder: a :class:`evirank.vectors.VectorBuilder` (its output folder reachable by every worker).
        documents: the corpus in order (the same order on a resumed build).
        options: where and how wide (:class:`RayOptions`).
        total: the number of documents, if known (progress only).

    Example:
        >>> vectors = embed_on_ray(VectorBuilder("vectors", BiEncoder(), "sentences"), docs,
        ...                        RayOptions("local", workers=2))  # doctest: +SKIP
    """
    from evirank.progress import progress_bar
    from evirank.vectors.writer import blocks

    threads = builder.scorer.engine_threads()  # the replicas run the model as this process would
    options = options.for_threads(threads)
    ray = connect(options)
    data = require("ray.data", "ray")
    data.DataContext.get_current().enable_progress_bars = False
    done = builder.open()
    workers = worker_count(ray, options)
    wave: list[dict[str, Any]] = []
    count = passages = 0
    started = time.perf_counter()
    bar = progress_bar(desc="embedding (Ray)", total=total, unit="doc")

    def run(items: list[dict[str, Any]]) -> int:
        dataset = data.from_items(items, override_num_blocks=len(items))
        results = dataset.map_batches(
            EmbedWorker,
            fn_constructor_args=(builder, engine_settings(threads)),
            batch_size=1,
            batch_format="numpy",
            compute=data.ActorPoolStrategy(size=min(workers, len(items))),
            num_cpus=options.cpus,
            num_gpus=options.gpus_per_worker or None,
        )
        seen: dict[int, int] = {}
        for row in results.iter_rows():
            seen[int(row["block"])] = int(row["passages"])  # a retried block counts once
        return sum(seen.values())

    try:
        for block, docs in blocks(documents, builder.block_size):
            count += 1
            bar.update(len(docs))
            if block in done:
                continue
            wave.append(
                {
                    "block": block,
                    "docno": [d.docno for d in docs],
                    "title": [d.title or "" for d in docs],
                    "text": [d.text or "" for d in docs],
                }
            )
            if len(wave) >= WAVE_PER_WORKER * workers:
                passages += run(wave)
                wave = []
        if wave:
            passages += run(wave)
    finally:
        bar.close()
    for extra in done - set(range(count)):  # the corpus shrank since the unfinished build
        builder.writer.remove(extra)
    logger.info(
        "Ray: %d passages embedded in %d new block(s) of %d in %.1f s on %d workers",
        passages,
        count - len(done & set(range(count))),
        count,
        time.perf_counter() - started,
        workers,
    )
    return builder.finish(count)
