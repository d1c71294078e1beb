"""``evirank serve``: the search service and its web page over a Lucene index.

Example:
    $ evirank serve --index indexes/scifact --scorer bi --depth 20 --port 8080
    $ curl 'http://127.0.0.1:8080/v1/search?q=vitamin+d+cancer&top=5'
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
        help="serve search with evidence over HTTP (JSON API and a web page)",
        description=(
            "Serve a Lucene index: a first stage (BM25 by default), passages re-ranked by a model, "
            "evidence shown. Endpoints: / (web page), /v1/search, /v1/doc/{docno}, /health, /docs (OpenAPI). "
            "The pipeline flags mean what they mean in evirank rerank and search; a request names top, "
            "depth and k (the first-stage depth, default: its depth) as these flags do."
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
        ],
        required={"source"},
        helps={
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


def searcher_from_args(args: argparse.Namespace, max_depth: int) -> Any:
    """The :class:`~evirank.serve.Searcher` of the parsed flags (nothing heavy loaded yet)."""
    from evirank.pipeline.flags import spec_from_args
    from evirank.serve.build import searcher_from_spec

    spec = spec_from_args(args, depth=min(args.depth, max_depth))
    return searcher_from_spec(spec, scores=args.scores, show_passages=args.show_passages, batch=args.batch)


def run(args: argparse.Namespace) -> int:
    """Build the searcher (the model loads once, here), then serve until interrupted."""
    from evirank.errors import UsageError
    from evirank.extras import require
    from evirank.serve.app import create_app
    from evirank.serve.limits import bind_socket, limited_http_protocol

    uvicorn = require("uvicorn", "serve")
    try:
        config = config_from_args(args)
        if args.show_passages < 1:
            raise ValueError(f"--show-passages must be at least 1, found {args.show_passages}")
        searcher = searcher_from_args(args, config.max_depth)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    try:
        # bind before the model loads: a port in use is a clear error at once, and
        # "serving on ..." is only ever logged for an address that is really held
        sock = bind_socket(args.host, args.port)
    except OSError as exc:
        from evirank.cli import fail

        return fail("serve", exc.strerror or str(exc))
    set_model_threads(args.model_threads, searcher.info)
    try:
        if not args.no_warmup:
            seconds = searcher.warm_up()
            logger.info("warm-up (index open, model loaded) took %.1f s", seconds)
        app = create_app(searcher, config)
        port = sock.getsockname()[1]
        logger.info("serving %s on http://%s:%d/ (API docs at /docs)", args.index, args.host, port)
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
