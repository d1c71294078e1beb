"""Lazy imports of optional dependencies, with an error that names the extra to install.

Example:
    >>> np = require("numpy", extra="core")
    >>> np.__name__
    'numpy'
"""

from __future__ import annotations

import importlib
from types import ModuleType

from evirank.errors import MissingExtraError


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtraError` naming ``extra``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        if exc.name is not None and exc.name.split(".")[0] != top:
            raise  # the package is there but one of *its* dependencies is broken
        raise MissingExtraError(module, extra) from exc
