"""The search service and its web page: ``evirank serve``.

The service answers ``GET /v1/search`` with candidates and their evidence, ``GET /v1/doc/{docno}``,
``GET /health`` and an HTML page at ``/``. Its pipeline sits behind one seam, :class:`Searcher`, so the
web layer is tested with fakes and served with the real Lucene + model pipeline.

Importing this package is light (no FastAPI, no torch, no JVM): the web layer imports them in
:func:`evirank.serve.app.create_app`.

A search names ``top`` (results returned), ``depth`` (first-stage hits re-ranked) and ``k`` (the
first-stage depth: documents retrieved), as every evirank command does; the service's defaults and
limits (:class:`ServeConfig`) come from the settings table.

Example:
    >>> from evirank.config import SETTINGS
    >>> from evirank.serve import ServeConfig
    >>> config = ServeConfig()
    >>> (config.default_top, config.default_depth) == (SETTINGS.default("top"), SETTINGS.default("depth"))
    True
"""

from evirank.serve.config import ServeConfig
from evirank.serve.searcher import (
    Candidate,
    DocumentNotFound,
    Evidence,
    Searcher,
    SearchResult,
    SearchTimeout,
    stage_retriever,
)

__all__ = [
    "Candidate",
    "DocumentNotFound",
    "Evidence",
    "SearchResult",
    "SearchTimeout",
    "Searcher",
    "ServeConfig",
    "stage_retriever",
]
