"""``evirank serve``: the search service and its web page over a Lucene index.

Example:
    $ evirank serve --index indexes/scifact --scorer bi --depth 20 --port 8080
    $ curl 'http://127.0.0.1:8080/v1/search?q=vitamin+d+cancer&k=5'
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from evirank.aggregate.registry import GRAMMAR as AGGREGATE_GRAMMAR
from evirank.segment.spec import GRAMMAR as SEGMENT_GRAMMAR
from evirank.serve.config import ServeConfig

logger = logging.getLogger(__name__)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``serve`` and its flags."""
    defaults = ServeConfig()
    parser = subparsers.add_parser(
        "serve",
        help="serve search with evidence over HTTP (JSON API and a web page)",
        description=(
            "Serve a Lucene index: BM25 first stage, passages re-ranked by a model, evidence shown. "
            "Endpoints: / (web page), /v1/search, /v1/doc/{docno}, /health, /docs (OpenAPI)."
        ),
    )
    parser.add_argument("--index", required=True, help="Lucene index folder built by `evirank index`")
    parser.add_argument(
        "--model",
        default=None,
        help="Hugging Face model id or local folder (default: the offline all-MiniLM-L6-v2 bi-encoder)",
    )
    from evirank.score.family import AUTO, family_names

    parser.add_argument(
        "--scorer",
        choices=(AUTO, *family_names()),
        default=AUTO,
        metavar="FAMILY",
        help=f"the model family: {AUTO} (default: told from --model's files) or one of "
        f"{', '.join(family_names())}",
    )
    parser.add_argument(
        "--evidence-scorer",
        action="append",
        metavar="SCORER",
        help="several scorers' evidence, repeated (evirank rerank's --evidence): [LABEL=]FAMILY[:MODEL], "
        "instead of --scorer/--model",
    )
    parser.add_argument(
        "--evidence-weights",
        nargs="+",
        metavar="LABEL=W",
        help="weights of the scorers after the first (the first gets 1 minus their sum), e.g. bi=0.3",
    )
    parser.add_argument(
        "--segment",
        default=None,
        help=f"{SEGMENT_GRAMMAR}, as evirank rerank (default: the stored passage vectors' segmenter "
        "when the index has some, else sentences:prepend)",
    )
    parser.add_argument(
        "--title",
        choices=("prepend", "segment", "skip"),
        default=None,
        help="deprecated: the title mode of --segment (write --segment sentences:skip instead)",
    )
    parser.add_argument(
        "--aggregate",
        default="birch:3",
        help=f"{AGGREGATE_GRAMMAR} (default: birch:3, alpha 0.5, weights 1 0.5 0.25, per-query min-max)",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=None,
        help="weight of the first-stage score (default: birch 0.5, others 0)",
    )
    parser.add_argument(
        "--weights",
        nargs="+",
        type=float,
        metavar="W",
        help="Birch: weights of the top passages (default: 1 0.5 0.25)",
    )
    parser.add_argument(
        "--scores", default=None, metavar="STORE", help="persistent score store to reuse and fill"
    )
    parser.add_argument("--depth", type=int, default=defaults.default_depth, help="default re-rank depth")
    parser.add_argument("--k", type=int, default=defaults.default_k, help="default number of results")
    parser.add_argument("--max-depth", type=int, default=defaults.max_depth, help="largest depth accepted")
    parser.add_argument("--evidence", type=int, default=3, help="passages shown per result")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: 127.0.0.1)")
    from evirank.cli.numbers import port_number

    parser.add_argument("--port", type=port_number, default=8080, help="port (default: 8080)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=defaults.timeout_s,
        metavar="S",
        help="seconds before a search gets 503",
    )
    parser.add_argument("--workers", type=int, default=defaults.workers, help="searches running at once")
    parser.add_argument(
        "--max-pending",
        type=int,
        default=defaults.max_pending,
        help="searches admitted at once; more get 503",
    )
    parser.add_argument(
        "--vectors",
        default=None,
        metavar="VDIR",
        help="stored passage vectors (evirank embed); default: the index's own when it has some "
        "(evirank index --embed); none: split and embed passages per query",
    )
    parser.add_argument(
        "--prune",
        type=int,
        default=None,
        metavar="N",
        help="cascade: score only each document's N best passages by --prune-by (a scorer reading every "
        "passage's text, e.g. a cross-encoder)",
    )
    parser.add_argument(
        "--prune-by",
        default="bm25",
        metavar="SCORER",
        help="the cheap scorer of --prune: bm25 over the passages (default) or a scorer FAMILY[:MODEL] such "
        "as bi (by lookup in the stored vectors)",
    )
    parser.add_argument("--device", default=None, help="cuda | mps | cpu (default: the best available)")
    parser.add_argument(
        "--model-threads",
        type=int,
        default=None,
        metavar="N",
        help="CPU threads of one model call (default: 1 when only queries are embedded, from stored "
        "vectors: a few tokens gain nothing from more, and spinning threads slow every other request; "
        "else torch's default)",
    )
    parser.add_argument(
        "--batch",
        type=int,
        default=32,
        metavar="N",
        help="with stored vectors (bi-encoder): the most queries of concurrent requests embedded in one "
        "model call (each answer is bitwise the one it gets alone; default: %(default)s)",
    )
    parser.add_argument("--no-warmup", action="store_true", help="do not run a first search before listening")
    return parser


def config_from_args(args: argparse.Namespace) -> ServeConfig:
    """The service limits from the parsed flags (raises ValueError on inconsistent ones)."""
    return ServeConfig(
        default_k=min(args.k, args.depth),
        default_depth=args.depth,
        max_depth=args.max_depth,
        max_k=max(ServeConfig().max_k, args.k),
        timeout_s=args.timeout,
        workers=args.workers,
        max_pending=args.max_pending,
    )


def run(args: argparse.Namespace) -> int:
    """Build the searcher (the model loads once, here), then serve until interrupted."""
    from evirank._extras import require
    from evirank.errors import UsageError
    from evirank.serve.app import create_app
    from evirank.serve.build import build_searcher
    from evirank.serve.limits import bind_socket, limited_http_protocol

    uvicorn = require("uvicorn", "serve")
    try:
        config = config_from_args(args)
        searcher = build_searcher(
            index=args.index,
            model=args.model,
            scorer=args.scorer,
            segment=args.segment,
            title=args.title,
            aggregate=args.aggregate,
            alpha=args.alpha,
            weights=args.weights,
            scores=args.scores,
            device=args.device,
            evidence=args.evidence,
            max_depth=config.max_depth,
            vectors=args.vectors,
            prune=args.prune,
            prune_by=args.prune_by,
            batch=args.batch,
            scorers=args.evidence_scorer,
            scorer_weights=args.evidence_weights,
        )
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
