"""Ray Data jobs that run a scorer's model over many items: the driver side and the actors.

The driver cuts the items to compute (distinct pairs missing from the store, or distinct texts
to embed) into blocks of the scorer's ``chunk_items`` in the scorer's own order, so each block is
exactly one of the chunks the single-process scorer would run: inside an actor the block is
tokenised, sorted by length and cut into the same token-budget batches
(:func:`evirank.score.batching.token_budget_batches`), so scores are the same bits as without
Ray. Results stream back to the driver block by block and are written to the score store as
they come, so a killed driver loses at most the blocks in flight. Actors are restarted by Ray
when they die and their task runs again on the restarted actor (``max_restarts`` and
``max_task_retries`` unlimited); a block's results are keyed by content, so a block that runs
twice is stored once.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from evirank.extras import require

if TYPE_CHECKING:
    from evirank.scale.options import RayOptions

logger = logging.getLogger(__name__)

ITEM = "item"
BLOCK = "block"
_STATS = ("batches", "tokens", "model_s", "tokenize_s", "tokenize_busy_s")


def connect(options: RayOptions) -> Any:
    """Start or join Ray as ``options`` says (a session already started is kept); returns ``ray``.

    ``"local"`` declares one logical CPU more than the machine has (and at least one more than
    the workers take), so Ray Data's own tasks never wait behind the model actors.
    """
    ray = require("ray", "ray")
    require("ray.data", "ray")
    if ray.is_initialized():
        return ray
    started = time.perf_counter()
    worker_logs = logger.isEnabledFor(logging.DEBUG)  # the workers' own logs only with -vv
    if options.address == "local":
        wanted = (options.workers or 1) * options.cpus
        cpus = max(os.cpu_count() or 1, math.ceil(wanted)) + 1
        from evirank.scale.reaper import watch_ray_processes

        watch_ray_processes()  # Ray's processes end with this one, however it ends
        with keeping_signal_handlers():
            init_on_loopback(
                ray,
                num_cpus=cpus,
                include_dashboard=False,
                logging_level=logging.WARNING,
                log_to_driver=worker_logs,
            )
    else:
        with keeping_signal_handlers():
            if _is_loopback(options.address):  # a cluster on this machine's loopback address (tests)
                init_on_loopback(
                    ray, address=options.address, logging_level=logging.WARNING, log_to_driver=worker_logs
                )
            else:
                ray.init(address=options.address, logging_level=logging.WARNING, log_to_driver=worker_logs)
    logger.info(
        "Ray %s ready in %.1f s: %s", ray.__version__, time.perf_counter() - started, ray.cluster_resources()
    )
    return ray


@contextmanager
def keeping_signal_handlers() -> Iterator[None]:
    """Start Ray inside this block and keep the process's signal handlers as they were.

    ``ray.init`` changes two things a process may depend on:

    - the handlers of fatal signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT): the driver's core
      worker installs one of its own (C++) and Python's ``faulthandler`` is enabled. A JVM in the
      same process (Lucene's, for BM25 and stored documents) uses SIGSEGV in normal operation and
      must keep its own handler: behind Ray's, a JVM started before Ray hung in that handler the
      next time it raised one. So Ray's failure handler is switched off for the driver, and
      ``faulthandler`` is disabled again if Ray enabled it (it then puts back the handlers it
      found). Ray's worker processes are unaffected.
    - the SIGTERM handler, which it replaces twice: in Python with its own ``sys.exit`` (a SIGTERM
      then ends the command without a word), and in C++ with a handler that prints a stack trace
      and kills the process. A handler the caller installed (the CLI's, which unwinds, stops child
      processes and tells what a rerun does) is kept; a caller without one keeps Ray's.

    Example:
        >>> import ray  # doctest: +SKIP
        >>> with keeping_signal_handlers():  # doctest: +SKIP
        ...     ray.init()
    """
    import faulthandler

    from ray._private import ray_constants, utils

    failure_handler = getattr(ray_constants, "RAY_DISABLE_FAILURE_SIGNAL_HANDLER", None)
    faults_reported = faulthandler.is_enabled()
    main_thread = threading.current_thread() is threading.main_thread()
    sigterm = signal.getsignal(signal.SIGTERM) if main_thread else None
    keep_sigterm = sigterm not in (None, signal.SIG_DFL, signal.SIG_IGN)
    installer = getattr(utils, "set_sigterm_handler", None)
    if keep_sigterm and installer is not None:
        utils.set_sigterm_handler = lambda handler: None
    if failure_handler is not None:
        ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = True  # read when the driver's core worker starts
    try:
        yield
    finally:
        if failure_handler is not None:
            ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = failure_handler
        if not faults_reported and faulthandler.is_enabled():
            faulthandler.disable()  # the handlers it replaced (a JVM's, or the defaults) are back
        if keep_sigterm:
            if installer is not None:
                utils.set_sigterm_handler = installer
            signal.signal(signal.SIGTERM, sigterm)  # also puts Python's handler back in C, after Ray's


LOOPBACK = "127.0.0.1"


def _is_loopback(address: str) -> bool:
    """Whether a cluster address ``HOST:PORT`` names this machine's loopback interface.

    Example:
        >>> _is_loopback("127.0.0.1:6379"), _is_loopback("10.0.0.5:6379"), _is_loopback("auto")
        (True, False, False)
    """
    import ipaddress

    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def init_on_loopback(ray: Any, **options: Any) -> None:
    """``ray.init`` of a local instance whose processes listen on and talk to the loopback address only.

    Ray replaces a requested ``127.0.0.1`` by the machine's reachable address
    (``ray._private.services.resolve_ip_for_localhost``), and its servers then listen on every
    address of the machine. A local instance needs no other machine, so the loopback address is
    kept as it is for the length of ``ray.init``. Should a Ray version lack that function, Ray's
    own choice of address is used (with a note in the log).
    """
    import importlib

    try:
        services: Any = importlib.import_module("ray._private.services")
    except ImportError:  # pragma: no cover - a Ray without this module
        services = None
    resolve = getattr(services, "resolve_ip_for_localhost", None)
    if services is None or resolve is None:  # pragma: no cover - another Ray version
        logger.info("this Ray version chooses its own address; the local instance may listen beyond loopback")
        ray.init(**options)
        return
    services.resolve_ip_for_localhost = lambda host: host
    try:
        ray.init(_node_ip_address=LOOPBACK, **options)
    finally:
        services.resolve_ip_for_localhost = resolve


def worker_count(ray: Any, options: RayOptions) -> int:
    """The number of model replicas: ``options.workers``, or what the cluster's resources allow."""
    if options.workers is not None:
        return options.workers
    resources = ray.cluster_resources()
    if options.gpus_per_worker > 0:
        return max(1, int(resources.get("GPU", 0) // options.gpus_per_worker))
    return max(1, int((resources.get("CPU", 1) - 1) // options.cpus))


def engine_settings(threads: int) -> dict[str, str]:
    """What a model replica needs to run its engine as this process does: its threads, and the
    streams the CPU engines split a batch into (``$EVIRANK_STREAMS``, when set here).

    Example:
        >>> engine_settings(2)["EVIRANK_NUM_THREADS"]
        '2'
    """
    settings = {"EVIRANK_NUM_THREADS": str(max(1, int(threads)))}
    if os.environ.get("EVIRANK_STREAMS"):
        settings["EVIRANK_STREAMS"] = os.environ["EVIRANK_STREAMS"]
    return settings


class ScoreWorker:
    """One model replica in a Ray actor; called with a pandas batch of whole blocks.

    Each block holds the text columns the scorer names (``block_columns``); the scorer's public
    :meth:`~evirank.score.family.Scorer.compute_block` turns them into one output row per item
    (a score, a vector, ...), sent back as raw bytes with their dtype and shape. The worker does
    not know which family it runs.
    """

    def __init__(
        self, cls: Any, state: dict[str, Any], settings: dict[str, Any], engine: dict[str, str]
    ) -> None:
        os.environ.update(engine)
        scorer = cls.from_state(state)
        scorer.runtime = scorer.runtime.with_changes(model_threads=int(engine["EVIRANK_NUM_THREADS"]))
        scorer.prepare()
        mine = scorer.settings()
        if mine != settings:
            raise RuntimeError(
                f"a Ray worker would score with other settings than the driver's fingerprint: {mine} "
                f"on the worker, {settings} on the driver; give --device and --dtype explicitly"
            )
        scorer.load()
        self.scorer = scorer

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out: dict[str, list[Any]] = {name: [] for name in (BLOCK, ITEM, "values", "dtype", "shape", *_STATS)}
        for i in range(len(batch[BLOCK])):
            columns = {name: list(batch[name][i]) for name in self.scorer.block_columns}
            stats = self.scorer.new_stats()
            values = np.ascontiguousarray(self.scorer.compute_block(columns, stats))
            out[BLOCK].append(batch[BLOCK][i])
            out[ITEM].append(batch[ITEM][i])
            out["values"].append(values.tobytes())
            out["dtype"].append(values.dtype.str)
            out["shape"].append(json.dumps(list(values.shape)))
            for name in _STATS:
                out[name].append(float(getattr(stats, name)))
        return {
            name: np.asarray(values, dtype=object if name in (ITEM, "values", "dtype", "shape") else None)
            for name, values in out.items()
        }


def run_blocks(
    scorer: Any,
    columns: dict[str, Callable[[np.ndarray], list[str]]],
    positions: np.ndarray,
    stats: Any,
    desc: str,
    options: RayOptions,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Run ``scorer``'s model on Ray over the items at ``positions``, yielding each block's results.

    Blocks are cut by position (``position // block_items``), so after an interruption a block
    that was stored whole is skipped and the others run exactly as they would have at first.

    Args:
        scorer: a scorer of any family (prepared: its settings known).
        columns: input column name -> (item numbers, indices into ``positions``) -> their texts.
        positions: increasing positions of the items in the scorer's own order (all distinct pairs).
        stats: the scorer's :class:`ScoringStats`, updated with the workers' counters.
        desc: progress bar label.
        options: where and how wide it runs.

    Yields:
        ``(items, values)`` per finished block, in completion order: ``items`` index ``positions``
        and ``values`` holds the scorer's :meth:`compute_block` output for them, one row each.
    """
    from evirank.progress import progress_bar

    threads = scorer.engine_threads()
    options = options.for_threads(threads)
    ray = connect(options)
    block_items = max(1, int(scorer.chunk_items)) * options.blocks_per_task
    n_items = len(positions)
    numbers = np.asarray(positions, dtype=np.int64) // block_items
    cuts = np.flatnonzero(np.diff(numbers)) + 1
    blocks = []
    for items in np.split(np.arange(n_items, dtype=np.int64), cuts) if n_items else []:
        block: dict[str, Any] = {BLOCK: int(numbers[items[0]]), ITEM: items.tobytes()}
        for name, texts in columns.items():
            block[name] = texts(items)
        blocks.append(block)
    workers = min(worker_count(ray, options), len(blocks))
    logger.info(
        "Ray: %d items in %d blocks of up to %d on %d workers (%g CPUs, %g GPUs each; the model on "
        "%d threads, as in one process)",
        n_items,
        len(blocks),
        block_items,
        workers,
        options.cpus,
        options.gpus_per_worker,
        threads,
    )
    if not blocks:
        return
    data = require("ray.data", "ray")
    context = data.DataContext.get_current()
    context.enable_progress_bars = False
    # One row per block and one Ray block per row: a task scores one whole block, so a block
    # is batched exactly as the single-process scorer batches its chunk.
    dataset = data.from_items(blocks, override_num_blocks=len(blocks))
    del blocks
    # Ray Data gives map actors max_restarts=-1 and max_task_retries=-1 unless told otherwise: a
    # lost actor is restarted and its tasks run again there.
    results = dataset.map_batches(
        ScoreWorker,
        fn_constructor_args=(
            type(scorer),
            scorer.worker_state(),
            scorer.settings(),
            engine_settings(threads),
        ),
        batch_size=1,
        batch_format="numpy",
        compute=data.ActorPoolStrategy(size=workers),
        num_cpus=options.cpus,
        num_gpus=options.gpus_per_worker or None,
    )
    bar = progress_bar(desc=desc, total=n_items, unit="item")
    started = time.perf_counter()
    seen: set[int] = set()
    try:
        for row in results.iter_rows():
            if int(row[BLOCK]) in seen:  # a second copy of a retried block: already counted
                continue
            seen.add(int(row[BLOCK]))
            items = np.frombuffer(row[ITEM], dtype=np.int64)
            shape = tuple(json.loads(row["shape"]))
            values = np.frombuffer(row["values"], dtype=np.dtype(row["dtype"])).reshape(shape)
            for name in _STATS:
                current = getattr(stats, name)
                setattr(stats, name, current + type(current)(row[name]))
            stats.computed += len(items)
            bar.update(len(items))
            yield items, values
    finally:
        bar.close()
    logger.info("Ray job: %d items in %.1f s", n_items, time.perf_counter() - started)
