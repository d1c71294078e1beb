"""evirank: rank documents by the evidence their sentences and passages hold.

The core is light: importing ``evirank`` loads pandas and numpy, never torch or a JVM.
Heavy parts (Lucene, transformers, the web service) live behind optional extras and are
imported when first used.

Example:
    >>> import evirank
    >>> evirank.__version__
    '0.1.0'
"""

from __future__ import annotations

import logging

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = ["__version__"]
