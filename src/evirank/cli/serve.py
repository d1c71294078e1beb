"""``evirank serve``: search over a Lucene index with its web page, and ``/rerank`` over documents sent.

Example:
    $ evirank serve --index indexes/scifact --scorer bi --depth 20 --port 8080
    $ curl 'http://127.0.0.1:8080/v1/search?q=vitamin+d+cancer&top=5'
    $ evirank serve --model minilm=models/minilm-cross --port 8080      # rerank only, no index
    $ curl -X POST http://127.0.0.1:8080/v2/rerank -H 'Content-Type: application/json' \
        -d '{"model": "minilm", "query": "cats", "documents": ["Dogs bark.", "Cats purr."]}'
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from evirank.serve.config import ServeConfig

logger = logging.getLogger(__name__)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``serve`` and its flags (the pipeline's, declared once in :mod:`evirank.pipeline.flags`)."""
    from evirank.cli import CommandHelpFormatter
    from evirank.config import SETTINGS
    from evirank.pipeline import flags

    parser = subparsers.add_parser(
        "serve",
        help="serve search with evidence, and /rerank over documents sent, over HTTP",
        description=(
            "Serve a Lucene index: a first stage (BM25 by default), passages re-ranked by a model, "
            "evidence shown. Endpoints: / (web page), /v1/search, /v1/doc/{docno}, /health, /docs (OpenAPI). "
            "The pipeline flags mean what they mean in evirank rerank and search; a request names top, "
            "depth and k (the first-stage depth, default: its depth) as these flags do. "
            "With or without --index, the service also reranks documents it is sent, whole, by their "
            "passages' evidence: POST /v1/rerank (Cohere v1, Jina), /v2/rerank (Cohere v2) and /rerank "
            "(Text Embeddings Inference), with the models of --model NAME=PATH (repeat it to serve several; "
            "a request's model picks one). Also /ready and /metrics (Prometheus)."
        ),
        formatter_class=CommandHelpFormatter,
    )
    flags.add_flags(
        parser,
        [
            "index",
            "first_stage",
            "bm25",
            "rm3",
            *flags.SCORING,
            *flags.CASCADE,
            *flags.PASSAGES,
            *flags.DISPLAY,
            "max_depth",
            "host",
            "port",
            "timeout",
            "workers",
            "max_pending",
            "batch",
            "no_warmup",
            "max_documents",
            "max_document_chars",
            "max_request_tokens",
            "api_key_file",
            "cors_origins",
        ],
        changes={"model": {"action": "append"}},
        helps={
            "model": "a model to serve, as NAME=PATH or PATH (its folder's name names it): a Hugging Face id or "
            "a local folder; repeat it to serve several (a rerank request's model picks one; search and "
            "the page use the first). Without it, the offline all-MiniLM-L6-v2 bi-encoder",
            "depth": SETTINGS["depth"].help
            + "; what a request that names no depth gets (it may ask for up to --max-depth); only "
            "re-ranked documents are returned",
            "top": SETTINGS["top"].help
            + " per request when it names none (it may ask for up to its depth; 0: every document re-ranked)",
            "max_depth": SETTINGS["max_depth"].help + ", and the largest k (documents retrieved) and top",
        },
    )
    return parser


def config_from_args(args: argparse.Namespace) -> ServeConfig:
    """The service's defaults and limits from the parsed flags (raises ValueError on inconsistent ones).

    ``--top`` and ``--depth`` are what a request gets when it names no ``top`` or ``depth`` (``--top 0``:
    every document re-ranked); ``--max-depth`` bounds a request's ``depth``, ``k`` and ``top``.
    """
    return ServeConfig(
        default_top=args.top or args.max_depth,
        default_depth=args.depth,
        max_depth=args.max_depth,
        timeout_s=args.timeout,
        workers=args.workers,
        max_pending=args.max_pending,
    )


def served_models(given: list[str] | None) -> dict[str, str | None]:
    """The models of ``--model`` flags by name: ``NAME=PATH``, or ``PATH`` named by its last part.

    Without a flag, the offline default model, named ``default``.

    Raises:
        ValueError: two models with one name, or an empty name or path.

    Example:
        >>> served_models(["ce=models/minilm-cross", "models/other/"])
        {'ce': 'models/minilm-cross', 'other': 'models/other/'}
        >>> served_models(None)
        {'default': None}
    """
    if not given:
        return {"default": None}
    models: dict[str, str | None] = {}
    for entry in given:
        name, sep, path = entry.partition("=")
        if not sep or "/" in name or "\\" in name or not name.strip():
            name, path = entry.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1], entry
        name, path = name.strip(), path.strip()
        if not path:
            raise ValueError(f"--model {entry!r}: expected NAME=PATH or PATH, found no path")
        if name in models:
            raise ValueError(f"--model: two models are named {name!r}; name them with NAME=PATH")
        models[name] = path
    return models


def searcher_from_args(args: argparse.Namespace, max_depth: int, model: str | None = None) -> Any:
    """The :class:`~evirank.serve.Searcher` of the parsed flags (nothing heavy loaded yet)."""
    from evirank.pipeline.flags import spec_from_args
    from evirank.serve.build import searcher_from_spec

    spec = spec_from_args(args, depth=min(args.depth, max_depth), model=model)
    return searcher_from_spec(spec, scores=args.scores, show_passages=args.show_passages, batch=args.batch)


def rerank_from_args(args: argparse.Namespace, models: dict[str, str | None]) -> Any:
    """The :class:`~evirank.serve.rerank.RerankService` of the parsed flags: one
    :class:`~evirank.Ranker` per served model, built as ``evirank rank`` builds it (models load on
    first use or at warm-up)."""
    from evirank.cli.rank import IN_MEMORY
    from evirank.ranker import Ranker
    from evirank.serve.rerank import RerankLimits, RerankService

    settings = {name: getattr(args, name) for name in IN_MEMORY if name not in ("model", "scores")}
    rankers = {
        name: Ranker(path, store=args.scores, show_passages=args.show_passages, **settings)
        for name, path in models.items()
    }
    limits = RerankLimits(
        max_documents=args.max_documents,
        max_document_chars=args.max_document_chars,
        max_request_tokens=args.max_request_tokens,
        timeout_s=args.timeout,
        max_pending=args.max_pending,
    )
    return RerankService(rankers, limits)


def run(args: argparse.Namespace) -> int:
    """Build the searcher and the rerank models (they load once, here), then serve until interrupted."""
    from evirank.errors import UsageError
    from evirank.extras import require
    from evirank.serve.access import read_api_key
    from evirank.serve.app import create_app
    from evirank.serve.limits import bind_socket, limited_http_protocol

    uvicorn = require("uvicorn", "serve")
    try:
        config = config_from_args(args)
        if args.show_passages < 1:
            raise ValueError(f"--show-passages must be at least 1, found {args.show_passages}")
        models = served_models(args.model)
        searcher = None
        if args.index is not None:
            searcher = searcher_from_args(args, config.max_depth, model=next(iter(models.values())))
        rerank = rerank_from_args(args, models)
        api_key = read_api_key(args.api_key_file) if args.api_key_file else None
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    try:
        # bind before the model loads: a port in use is a clear error at once, and
        # "serving on ..." is only ever logged for an address that is really held
        sock = bind_socket(args.host, args.port)
    except OSError as exc:
        from evirank.cli import fail

        return fail("serve", exc.strerror or str(exc))
    set_model_threads(args.model_threads, searcher.info if searcher is not None else {})
    try:
        if not args.no_warmup:
            seconds = searcher.warm_up() if searcher is not None else 0.0
            seconds += rerank.warm_up()
            logger.info("warm-up (index open, models loaded) took %.1f s", seconds)
        app = create_app(searcher, config, rerank=rerank, api_key=api_key, cors_origins=args.cors_origins or ())
        port = sock.getsockname()[1]
        what = args.index if searcher is not None else "rerank (" + ", ".join(models) + ")"
        logger.info("serving %s on http://%s:%d/ (API docs at /docs)", what, args.host, port)
        quiet_per_request_progress()
        level = "info" if logging.getLogger("evirank").getEffectiveLevel() <= logging.DEBUG else "warning"
        server_config = uvicorn.Config(
            app,
            host=args.host,
            port=port,
            log_level=level,
            timeout_graceful_shutdown=5,
            http=limited_http_protocol(),
        )
        uvicorn.Server(server_config).run(sockets=[sock])
    finally:
        sock.close()
    return 0


def set_model_threads(threads: int | None, info: dict[str, Any]) -> int | None:
    """Set torch's intra-op threads for the service; return the number set (None: left as it is).

    With stored vectors a request's model call embeds one query of a few tokens: one thread is as
    fast as two, and on a busy CPU the second thread's spin-waits cost far more than they save.
    """
    queries_only = "stored passage vectors" in str(info.get("evidence", ""))
    if threads is None and not queries_only:
        return None
    chosen = threads if threads is not None else 1
    if chosen < 1:
        raise SystemExit(f"evirank serve: error: --model-threads must be at least 1, found {chosen}")
    import torch

    torch.set_num_threads(chosen)
    logger.info("model calls use %d CPU thread(s)", chosen)
    return chosen


def quiet_per_request_progress() -> None:
    """Hide the pipeline's progress bars (one per request would flood the log) but keep serve's own logs.

    Progress bars show while the ``evirank`` logger is at INFO; while serving, that logger is raised to
    WARNING (unless debugging) and ``evirank.serve``/``evirank.cli`` keep the level the user chose.
    """
    root = logging.getLogger("evirank")
    level = root.getEffectiveLevel()
    if level <= logging.DEBUG:
        return
    for name in ("evirank.serve", "evirank.cli"):
        logging.getLogger(name).setLevel(level)
    root.setLevel(max(level, logging.WARNING))
