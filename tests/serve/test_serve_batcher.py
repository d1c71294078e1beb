"""The micro-batcher, and the service's query embeddings batched across concurrent requests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evirank.config import Runtime
from evirank.serve.batcher import BatcherClosed, MicroBatcher


def wait_until(condition: Callable[[], bool], limit_s: float = 10.0) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the condition did not hold in time")
        time.sleep(0.001)


class Gated:
    """A batch function whose first call blocks until released: what arrives meanwhile queues up."""

    def __init__(self, fail_on: object = None) -> None:
        self.calls: list[list[Any]] = []
        self.release = threading.Event()
        self.fail_on = fail_on

    def __call__(self, items: list[Any]) -> list[Any]:
        self.calls.append(list(items))
        if len(self.calls) == 1:
            assert self.release.wait(10)
        if self.fail_on in items:
            raise ValueError(f"bad item {self.fail_on!r}")
        return [("done", item) for item in items]


def queued(batcher: MicroBatcher[Any, Any]) -> int:
    return len(batcher._queue)


def test_each_thread_gets_its_own_answers() -> None:
    batcher = MicroBatcher(lambda xs: [x * 10 for x in xs], max_batch=4, max_wait_s=0.005)
    try:
        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(lambda i: batcher.submit([i, i + 1000]), range(200)))
        assert answers == [[i * 10, (i + 1000) * 10] for i in range(200)]
        assert max(batcher.batch_sizes) <= 4 and sum(batcher.batch_sizes) == 400
    finally:
        batcher.close()


def test_requests_that_arrive_while_a_call_runs_share_the_next_call() -> None:
    run = Gated()
    batcher = MicroBatcher(run, max_batch=32, max_wait_s=0.0)
    try:
        with ThreadPoolExecutor(8) as pool:
            first = pool.submit(batcher.submit, ["a"])
            wait_until(lambda: len(run.calls) == 1)  # the first call is running, alone
            rest = [pool.submit(batcher.submit, [f"q{i}"]) for i in range(7)]
            wait_until(lambda: queued(batcher) == 7)
            run.release.set()
            assert first.result(10) == [("done", "a")]
            assert [f.result(10) for f in rest] == [[("done", f"q{i}")] for i in range(7)]
        assert run.calls[0] == ["a"]
        assert sorted(run.calls[1]) == sorted(f"q{i}" for i in range(7))  # one model call for the seven
        assert list(batcher.batch_sizes) == [1, 7]
    finally:
        batcher.close()


def test_the_batch_cap_holds_and_the_oldest_items_go_first() -> None:
    run = Gated()
    batcher = MicroBatcher(run, max_batch=3, max_wait_s=0.0)
    try:
        with ThreadPoolExecutor(4) as pool:
            blocker = pool.submit(batcher.submit, ["first"])
            wait_until(lambda: len(run.calls) == 1)
            big = pool.submit(batcher.submit, list(range(10)))  # one caller, more than a batch
            wait_until(lambda: queued(batcher) == 10)
            late = pool.submit(batcher.submit, ["late"])
            wait_until(lambda: queued(batcher) == 11)
            run.release.set()
            assert blocker.result(10) == [("done", "first")]
            assert big.result(10) == [("done", i) for i in range(10)]
            assert late.result(10) == [("done", "late")]
        assert [len(c) for c in run.calls] == [1, 3, 3, 3, 2]
        assert [x for call in run.calls[1:] for x in call] == [*range(10), "late"]  # arrival order
    finally:
        batcher.close()


def test_a_failing_batch_raises_in_every_caller_it_held_and_the_batcher_goes_on() -> None:
    run = Gated(fail_on="bad")
    batcher = MicroBatcher(run, max_batch=32, max_wait_s=0.0)
    try:
        with ThreadPoolExecutor(6) as pool:
            first = pool.submit(batcher.submit, ["ok"])
            wait_until(lambda: len(run.calls) == 1)
            held = [pool.submit(batcher.submit, [item]) for item in ("x", "bad", "y")]
            wait_until(lambda: queued(batcher) == 3)
            run.release.set()
            assert first.result(10) == [("done", "ok")]
            for future in held:
                with pytest.raises(ValueError, match="bad item 'bad'"):
                    future.result(10)
        assert batcher.submit(["after"]) == [("done", "after")]  # the worker survived
    finally:
        batcher.close()


def test_a_wrong_number_of_results_is_an_error_for_the_callers() -> None:
    batcher = MicroBatcher(lambda xs: xs[:-1], max_batch=4)
    try:
        with pytest.raises(RuntimeError, match="1 results for a batch of 2 items"):
            batcher.submit([1, 2])
    finally:
        batcher.close()


def test_close_fails_queued_work_refuses_new_work_and_stops_the_thread() -> None:
    run = Gated()
    batcher = MicroBatcher(run, max_batch=2, max_wait_s=0.0)
    with ThreadPoolExecutor(3) as pool:
        running = pool.submit(batcher.submit, ["running"])
        wait_until(lambda: len(run.calls) == 1)
        waiting = pool.submit(batcher.submit, ["waiting"])
        wait_until(lambda: queued(batcher) == 1)
        closer = pool.submit(batcher.close)
        wait_until(lambda: batcher.closed)
        with pytest.raises(BatcherClosed):
            waiting.result(10)
        run.release.set()
        closer.result(10)
        assert running.result(10) == [("done", "running")]  # the call in progress finished
    assert not batcher._thread.is_alive()
    with pytest.raises(BatcherClosed, match="closed"):
        batcher.submit(["later"])
    assert len(run.calls) == 1


def test_a_caller_that_times_out_is_dropped_from_later_batches() -> None:
    run = Gated()
    batcher = MicroBatcher(run, max_batch=8, max_wait_s=0.0)
    try:
        with ThreadPoolExecutor(2) as pool:
            blocker = pool.submit(batcher.submit, ["blocker"])
            wait_until(lambda: len(run.calls) == 1)
            with pytest.raises(TimeoutError, match=r"0\.05 s"):
                batcher.submit(["impatient"], timeout=0.05)
            run.release.set()
            assert blocker.result(10) == [("done", "blocker")]
        assert batcher.submit(["next"]) == [("done", "next")]
        assert all("impatient" not in call for call in run.calls)
    finally:
        batcher.close()


@pytest.mark.parametrize("bad", [{"max_batch": 0}, {"max_wait_s": -1.0}])
def test_bad_settings_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        MicroBatcher(lambda xs: xs, **bad)


# -- the service's batched query embeddings ---------------------------------------------------------


@pytest.fixture(scope="module")
def batched(embedded_index: Path, tiny_bi_encoder_path: Path) -> Any:
    pytest.importorskip("fastapi")
    torch = pytest.importorskip("torch")
    from evirank.serve.build import build_searcher

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the service runs a model that embeds only queries
    searcher = build_searcher(embedded_index, model=str(tiny_bi_encoder_path), device="cpu", batch=4)
    searcher.warm_up()
    yield searcher
    searcher.close()
    torch.set_num_threads(threads)


QUERIES = [
    "where did the cat sit",
    "dogs and cats",
    "a vaccine",
    "what ranks documents by evidence",
    "cell virus",
    "mat",
    "is a dog a cat",
    "the query is relevant to the passage",
]


def answers(result: Any) -> list[tuple[Any, ...]]:
    return [
        (c.docno, c.rank, c.score, tuple((e.pid, e.score, e.start) for e in c.evidence))
        for c in result.candidates
    ]


def test_concurrent_queries_get_bitwise_the_answers_they_get_alone(batched: Any) -> None:
    from evirank.serve.fast import BatchedQueries

    assert isinstance(batched.scorer, BatchedQueries)
    alone = {q: answers(batched.search(q, top=4, depth=4)) for q in QUERIES}
    before = len(batched.scorer.batch_sizes)
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda q: answers(batched.search(q, top=4, depth=4)), QUERIES * 4))
    assert together == [alone[q] for q in QUERIES * 4]
    sizes = batched.scorer.batch_sizes[before:]
    assert sum(sizes) == len(QUERIES) * 4 and max(sizes) <= 4


def test_exact_embeddings_equal_embedding_each_text_alone(tiny_bi_encoder_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from evirank.score import BiEncoder

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        scorer = BiEncoder(str(tiny_bi_encoder_path), Runtime(device="cpu"))
        texts = [*QUERIES, "cat", "dog", "the cat"]
        alone = np.stack([scorer.embed([t])[0] for t in texts])
        together: Sequence[Any] = scorer.embed_exact(texts)
        assert np.array_equal(alone, np.asarray(together))  # bit for bit, lengths mixed
    finally:
        torch.set_num_threads(threads)


def test_the_batch_size_must_be_positive(embedded_index: Path, tiny_bi_encoder_path: Path) -> None:
    from evirank.serve.build import build_searcher

    with pytest.raises(ValueError, match="--batch must be at least 1"):
        build_searcher(embedded_index, model=str(tiny_bi_encoder_path), device="cpu", batch=0)


def test_batching_turns_itself_off_where_a_batch_would_change_the_bits(
    embedded_index: Path, tiny_bi_encoder_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from evirank.serve.build import build_searcher

    searcher = build_searcher(embedded_index, model=str(tiny_bi_encoder_path), device="cpu", batch=8)
    stage, exact = searcher.scorer, searcher.scorer.scorer.embed_exact

    def noisy(texts: list[str]) -> Any:  # a machine whose batched kernels round differently
        vectors = exact(texts)
        return vectors + (np.float32(1e-7) if len(texts) > 1 else np.float32(0))

    stage.scorer.embed_exact = noisy
    try:
        searcher.warm_up()
        assert stage.max_batch == 1 and "query batching is off" in caplog.text
        assert searcher.search("where did the cat sit", top=2, depth=4).candidates
        assert set(stage.batch_sizes) == {1}
    finally:
        searcher.close()


def test_the_app_stops_the_batcher_when_it_shuts_down(
    embedded_index: Path, tiny_bi_encoder_path: Path
) -> None:
    from fastapi.testclient import TestClient

    from evirank.serve.app import create_app
    from evirank.serve.build import build_searcher

    searcher = build_searcher(embedded_index, model=str(tiny_bi_encoder_path), device="cpu")
    with TestClient(create_app(searcher)) as client:
        assert client.get("/v1/search", params={"q": "cat mat", "depth": 4}).status_code == 200
        batcher = searcher.scorer._batcher
        assert batcher is not None and batcher._thread.is_alive()
    assert batcher.closed and not batcher._thread.is_alive()
    assert searcher.scorer._batcher is None


def test_a_search_waiting_for_a_slow_batch_gives_up_at_its_deadline(
    embedded_index: Path, tiny_bi_encoder_path: Path
) -> None:
    from evirank.serve.build import build_searcher
    from evirank.serve.searcher import SearchTimeout

    searcher = build_searcher(embedded_index, model=str(tiny_bi_encoder_path), device="cpu")
    searcher.warm_up()
    stage = searcher.scorer
    exact = stage.scorer.embed_exact

    def slow(texts: list[str]) -> Any:
        time.sleep(2.5)
        return exact(texts)

    stage.scorer.embed_exact = slow
    try:
        began = time.monotonic()
        with pytest.raises(SearchTimeout, match="waiting for the model"):
            searcher.search("where did the cat sit", top=2, depth=4, deadline=time.monotonic() + 0.5)
        assert time.monotonic() - began < 2.0  # not held until the batch finished
    finally:
        searcher.close()
