"""Gather the work of concurrent requests into one call: a small, bounded micro-batcher.

Several threads call :meth:`MicroBatcher.submit` with a few items each; one worker thread takes what
has arrived (waiting at most ``max_wait_s`` after the oldest item, or until ``max_batch`` items are
there), runs ``run(items)`` once, and hands each caller its own results. The oldest item always
starts the next batch, so no caller is passed over; a batch that raises raises in every caller whose
items it held; :meth:`MicroBatcher.close` finishes the batch in progress, fails what is still
queued, and stops the thread.

A batch can also be bounded by the items' size (``size`` and ``max_size``: the passages or tokens
each item brings), so a few large items fill a batch as many small ones do.

The service uses it for query embeddings (the queries of requests that arrive together go through
the model in one call, :class:`evirank.serve.fast.BatchedQueries`) and for ``/rerank`` (the
documents of concurrent requests are segmented and scored together, their passages sharing the
model's token-budget batches, :class:`evirank.serve.rerank.RerankService`).

Example:
    >>> batcher = MicroBatcher(lambda items: [x * x for x in items], max_batch=8)
    >>> batcher.submit([2, 3])
    [4, 9]
    >>> batcher.close()
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from evirank.errors import EvirankError

logger = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


class BatcherClosed(EvirankError, RuntimeError):
    """The batcher was closed before (or while) the work was queued."""


@dataclass
class _Item(Generic[T, R]):
    value: T
    arrived: float = field(default_factory=time.monotonic)
    future: Future[R] = field(default_factory=Future)


class MicroBatcher(Generic[T, R]):
    """Run ``run`` over the items of concurrent callers in batches of at most ``max_batch``.

    Args:
        run: items -> one result per item, in order; called on the batcher's own thread only, so it
            needs no lock of its own against other batches.
        max_batch: the most items one call gets (a caller's items may be split across calls).
        max_wait_s: how long a batch waits for company after its oldest item arrived; 0 runs what
            is there at once (items still batch up while a call is running).
        name: the worker thread's name.
        size: an item's size (None: 1 each); with ``max_size``, a batch takes items while their sizes
            add up to at most ``max_size`` (its oldest item always runs, however large).
        max_size: the largest total size of a batch (None: only ``max_batch`` counts).

    Example:
        >>> batcher = MicroBatcher(lambda items: [len(x) for x in items], size=len, max_size=10)
        >>> batcher.submit(["abc", "defgh"])
        [3, 5]
        >>> batcher.close()
    """

    def __init__(
        self,
        run: Callable[[list[T]], Sequence[R]],
        *,
        max_batch: int = 32,
        max_wait_s: float = 0.002,
        name: str = "evirank-batcher",
        size: Callable[[T], int] | None = None,
        max_size: int | None = None,
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, found {max_batch!r}")
        if max_size is not None and max_size < 1:
            raise ValueError(f"max_size must be at least 1, found {max_size!r}")
        if max_wait_s < 0:
            raise ValueError(f"max_wait_s must not be negative, found {max_wait_s!r}")
        self.run = run
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self.size = size
        self.max_size = max_size
        self._queue: deque[_Item[T, R]] = deque()
        self._ready = threading.Condition()
        self._closed = False
        #: sizes of the batches run so far (the last 1,000), for tests and logs
        self.batch_sizes: deque[int] = deque(maxlen=1000)
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def submit(self, items: Sequence[T], timeout: float | None = None) -> list[R]:
        """Queue ``items``, wait for their batch(es), return their results in order.

        Raises:
            BatcherClosed: the batcher is closed (or closed before the items ran).
            TimeoutError: ``timeout`` seconds passed first (items not yet started are dropped).
            Exception: whatever ``run`` raised for a batch holding one of the items.
        """
        queued = self._enqueue(items)
        deadline = None if timeout is None else time.monotonic() + timeout
        results = []
        try:
            for item in queued:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                results.append(item.future.result(timeout=left))
        except FutureTimeout:
            for item in queued:
                item.future.cancel()  # a batch not yet started skips it
            raise TimeoutError(f"the batch did not finish within {timeout:g} s") from None
        except CancelledError:
            raise BatcherClosed("the batcher was closed before this work ran") from None
        return results

    def enqueue(self, items: Sequence[T]) -> list[Future[R]]:
        """Queue ``items`` and return their futures at once (for callers that await them, e.g. in
        an event loop: ``asyncio.wrap_future``). Cancelling a future before its batch starts drops
        the item; one whose batch is running finishes.

        Raises:
            BatcherClosed: the batcher is closed.
        """
        return [item.future for item in self._enqueue(items)]

    def _enqueue(self, items: Sequence[T]) -> list[_Item[T, R]]:
        queued = [_Item[T, R](value) for value in items]
        with self._ready:
            if self._closed:
                raise BatcherClosed("the batcher is closed")
            self._queue.extend(queued)
            self._ready.notify()
        return queued

    def close(self, timeout: float | None = 10.0) -> None:
        """Finish the batch in progress, fail the queued items with :class:`BatcherClosed`, stop."""
        with self._ready:
            self._closed = True
            dropped = list(self._queue)
            self._queue.clear()
            self._ready.notify_all()
        for item in dropped:
            if item.future.set_running_or_notify_cancel():
                item.future.set_exception(BatcherClosed("the batcher was closed before this work ran"))
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def queued(self) -> int:
        """Items waiting for a batch (not yet running)."""
        return len(self._queue)

    # ------------------------------------------------------------------------------------------
    def _item_size(self, item: _Item[T, R]) -> int:
        return 1 if self.size is None else max(0, int(self.size(item.value)))

    def _full(self) -> bool:
        """Whether the queue already holds a whole batch (by count or by size)."""
        if len(self._queue) >= self.max_batch:
            return True
        if self.max_size is None:
            return False
        return sum(self._item_size(item) for item in self._queue) >= self.max_size

    def _take(self) -> list[_Item[T, R]]:
        """Pop the next batch: oldest first, at most ``max_batch`` items and ``max_size`` in size."""
        batch = [self._queue.popleft()]
        total = self._item_size(batch[0])
        while self._queue and len(batch) < self.max_batch:
            grown = total + self._item_size(self._queue[0])
            if self.max_size is not None and grown > self.max_size:
                break
            batch.append(self._queue.popleft())
            total = grown
        return batch

    def _next_batch(self) -> list[_Item[T, R]] | None:
        """Wait for work; return the next batch, oldest first (None once closed)."""
        with self._ready:
            while not self._queue and not self._closed:
                self._ready.wait()
            if self._closed:
                return None
            end = self._queue[0].arrived + self.max_wait_s
            while not self._full() and not self._closed:
                left = end - time.monotonic()
                if left <= 0:
                    break
                self._ready.wait(left)
            if self._closed:
                return None
            return self._take()

    def _work(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            live = [item for item in batch if item.future.set_running_or_notify_cancel()]
            if not live:
                continue
            self.batch_sizes.append(len(live))
            try:
                results = list(self.run([item.value for item in live]))
                if len(results) != len(live):
                    raise RuntimeError(f"{len(results)} results for a batch of {len(live)} items")
            except BaseException as exc:  # every caller of this batch gets the error
                logger.debug("a batch of %d items failed: %s", len(live), exc)
                for item in live:
                    item.future.set_exception(exc)
                if not isinstance(exc, Exception):
                    raise
                continue
            for item, result in zip(live, results, strict=True):
                item.future.set_result(result)
