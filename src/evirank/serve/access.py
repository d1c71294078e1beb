"""Who may call the service: an optional API key, and browsers of other origins only when asked.

With a key (``--api-key-file``), every request but ``/health`` and ``/ready`` must send it, as
``Authorization: Bearer KEY`` (the form Cohere's, Jina's and TEI's clients send) or the bare key
(LlamaIndex's TEI client sends its token as given); the comparison takes the same time whatever the
key sent, so the key cannot be guessed a character at a time. Without one, the service is open
(bind it to 127.0.0.1, the default, or put it behind a proxy). No CORS header is sent unless origins
are named (``--cors-origins``).

Example:
    >>> key_matches("Bearer s3cret", "s3cret"), key_matches("Bearer guess", "s3cret"), key_matches(None, "s3cret")
    (True, False, False)
"""

from __future__ import annotations

import hmac
from pathlib import Path

from evirank.errors import InputFormatError

#: Paths open without a key: liveness and readiness probes.
OPEN_PATHS = ("/health", "/ready")


def read_api_key(path: str | Path) -> str:
    """The key in ``path``: its first line, stripped.

    Raises:
        InputFormatError: the file cannot be read, or holds no key.
    """
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputFormatError(source, None, "a readable UTF-8 file holding the API key", str(exc)) from None
    key = text.strip().splitlines()[0].strip() if text.strip() else ""
    if not key:
        raise InputFormatError(source, 1, "the API key on the first line", "an empty file")
    return key


def key_matches(header: str | None, key: str) -> bool:
    """Whether an ``Authorization`` header carries ``key`` (``Bearer KEY`` or the bare key), in time
    independent of where the two differ."""
    if not header:
        return False
    sent = header.strip()
    if sent[:7].lower() == "bearer ":
        sent = sent[7:].strip()
    return hmac.compare_digest(sent.encode("utf-8", "surrogatepass"), key.encode("utf-8"))
