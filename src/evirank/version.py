"""evirank's version, in a module of its own: records and manifests read it without importing the
package's front door (:mod:`evirank`), which reaches the whole API.

Example:
    >>> __version__
    '0.1.0'
"""

from __future__ import annotations

__version__ = "0.1.0"
