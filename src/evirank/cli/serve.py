"""``evirank serve``: the search service and its web page over a Lucene index.

Example:
    $ evirank serve --index indexes/scifact --scorer bi --depth 20 --port 8080
    $ curl 'http://127.0.0.1:8080/v1/search?q=vitamin+d+cancer&k=5'
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
    from evirank.pipeline import flags

    defaults = ServeConfig()
    parser = subparsers.add_parser(
        "serve",
        help="serve search with evidence over HTTP (JSON API and a web page)",
        description=(
            "Serve a Lucene index: a first stage (BM25 by default), passages re-ranked by a model, "
            "evidence shown. Endpoints: / (web page), /v1/search, /v1/doc/{docno}, /health, /docs (OpenAPI). "
            "The pipeline flags mean what they mean in evirank rerank and search."
        ),
        formatter_class=CommandHelpFormatter,
    )
    flags.add_text_source(parser, corpus=False)
    flags.add_first_stage(parser, run=False, k=False)
    flags.add_scoring(parser, deprecated_serve=True)
    flags.add_cascade(parser)
    flags.add_passages(
        parser,
        segment=None,
        depth=defaults.default_depth,
        depth_help="; what a request gets when it names none (it may ask for up to --max-depth)",
    )
    flags.add_display(
        parser,
        top=defaults.default_k,
        show_passages=3,
        top_help=" per request when it names no number (it may ask for more)",
        deprecated_serve=True,
    )
    service = parser.add_argument_group("service")
    service.add_argument(
        "--max-depth",
        type=flags.positive_int,
        default=defaults.max_depth,
        help="largest depth a request may ask",
    )
    service.add_argument("--host", default="127.0.0.1", help="interface to listen on")
    from evirank.cli.numbers import port_number

    service.add_argument("--port", type=port_number, default=8080, help="port (0: any free port)")
    service.add_argument(
        "--timeout",
        type=float,
        default=defaults.timeout_s,
        metavar="S",
        help="seconds before a search gets 503",
    )
    service.add_argument(
        "--workers", type=flags.positive_int, default=defaults.workers, help="searches running at once"
    )
    service.add_argument(
        "--max-pending",
        type=flags.positive_int,
        default=defaults.max_pending,
        help="searches admitted at once; more get 503",
    )
    service.add_argument(
        "--model-threads",
        type=int,
        default=None,
        metavar="N",
        help="CPU threads of one model call (default: 1 when only queries are embedded, from stored "
        "vectors: a few tokens gain nothing from more, and spinning threads slow every other request; "
        "else torch's)",
    )
    service.add_argument(
        "--batch",
        type=int,
        default=32,
        metavar="N",
        help="with stored vectors (bi-encoder): the most queries of concurrent requests embedded in one "
        "model call (each answer is bitwise the one it gets alone)",
    )
    service.add_argument(
        "--no-warmup", action="store_true", help="do not run a first search before listening"
    )
    service.add_argument(
        "--title", choices=("prepend", "segment", "skip"), default=None, help=argparse.SUPPRESS
    )
    return parser


def config_from_args(args: argparse.Namespace) -> ServeConfig:
    """The service limits from the parsed flags (raises ValueError on inconsistent ones)."""
    top = args.top or ServeConfig().default_k
    return ServeConfig(
        default_k=min(top, args.depth),
        default_depth=args.depth,
        max_depth=args.max_depth,
        max_k=max(ServeConfig().max_k, top),
        timeout_s=args.timeout,
        workers=args.workers,
        max_pending=args.max_pending,
    )


def searcher_from_args(args: argparse.Namespace, max_depth: int) -> Any:
    """The :class:`~evirank.serve.Searcher` of the parsed flags (nothing heavy loaded yet)."""
    from evirank.pipeline.flags import spec_from_args
    from evirank.serve.build import DEFAULT_SEGMENT, searcher_from_spec, serve_segmenter

    spec = spec_from_args(
        args,
        segment=serve_segmenter(args.segment, args.title),
        default_segment=DEFAULT_SEGMENT,
        depth=min(args.depth, max_depth),
    )
    return searcher_from_spec(spec, scores=args.scores, show_passages=args.show_passages, batch=args.batch)


def run(args: argparse.Namespace) -> int:
    """Build the searcher (the model loads once, here), then serve until interrupted."""
    from evirank._extras import require
    from evirank.errors import UsageError
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
