"""Finding a collection on this machine, or downloading it into the data home, verified and atomic.

Where a collection is looked for, in order:

1. the datasets folder: ``$EVIRANK_DATASETS``, else ``$DATA``, else ``../shared/datasets`` from the
   current folder (a repository clone with that folder beside it);
2. the data home: ``$EVIRANK_HOME``, else the user's cache folder (``~/.cache/evirank`` on Linux,
   ``$XDG_CACHE_HOME/evirank`` where that is set, ``~/Library/Caches/evirank`` on macOS,
   ``%LOCALAPPDATA%\\evirank\\Cache`` on Windows);
3. a download into the data home.

A download streams into ``<home>/downloads/<file>.part`` (a rerun resumes it where the host allows,
else restarts it), is checked against its size and published checksum (or parsed, where no checksum
was published), and is then unpacked into a temporary folder that is renamed into place only once
every file is there: a dataset folder in the data home is complete or absent, never half-made.
``$EVIRANK_DATA_URL`` points every download at a mirror holding the same file names.

Why not pooch (which fetches, hashes and caches files too): it neither resumes a partial download nor
checks a file that has no published checksum by parsing it, and an offline failure does not say which
file to fetch by hand and where to put it; machines without internet access need exactly that.

Example:
    >>> import os, tempfile
    >>> os.environ["EVIRANK_HOME"] = tempfile.mkdtemp()
    >>> data_home() == Path(os.environ["EVIRANK_HOME"])
    True
    >>> path = get_dataset("scifact")  # doctest: +SKIP
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import logging
import os
import shutil
import socket
import sys
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from evirank.data.registry import Dataset, RemoteFile, registry
from evirank.datasets import DEFAULT, ENVIRONMENT, datasets_folder
from evirank.errors import EvirankError
from evirank.outputs import atomic_output, replace_output
from evirank.progress import progress_bar
from evirank.version import __version__

logger = logging.getLogger(__name__)

HOME_ENV = "EVIRANK_HOME"
MIRROR_ENV = "EVIRANK_DATA_URL"
_CHUNK = 1 << 20


class UnknownDatasetError(EvirankError, KeyError):
    """A dataset name that is not in the registry."""

    def __init__(self, name: str, known: Iterable[str]) -> None:
        super().__init__(f"no dataset named {name!r}; known: {', '.join(sorted(known))}")

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class DownloadError(EvirankError, ConnectionError):
    """A file could not be downloaded; the message says which file to put where instead."""


class VerificationError(EvirankError, ValueError):
    """A downloaded file is not the published one (wrong size, checksum or content)."""


class DataFolderError(EvirankError, FileExistsError):
    """A dataset folder in the data home is there but incomplete, so it is not replaced unasked."""


def data_home() -> Path:
    """The folder downloads go to: ``$EVIRANK_HOME``, else ``evirank`` in the user's cache folder.

    Example:
        >>> data_home().name in ("evirank", "Cache") or "EVIRANK_HOME" in os.environ
        True
    """
    env = os.environ.get(HOME_ENV)
    if env:
        return Path(env).expanduser()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
        return base / "evirank" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "evirank"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "evirank"


def dataset(name: str) -> Dataset:
    """The registry entry ``name``, or :class:`UnknownDatasetError` listing the known ones."""
    entries = registry()
    try:
        return entries[name]
    except KeyError:
        raise UnknownDatasetError(name, entries) from None


def is_complete(entry: Dataset, folder: Path) -> bool:
    """Whether ``folder`` holds every file ``entry`` expects."""
    return all((folder / rel).is_file() for rel in entry.expect)


def find_dataset(name: str, *, home: Path | None = None) -> Path | None:
    """Where ``name`` already is on this machine (datasets folder, then data home), or ``None``.

    Example:
        >>> found = find_dataset("scifact")
        >>> found is None or (found / "corpus.jsonl").is_file()
        True
    """
    entry = dataset(name)
    places = [datasets_folder(), home or data_home()]
    for base in places:
        if base is not None and is_complete(entry, base / entry.folder):
            return base / entry.folder
    return None


def get_dataset(
    name: str,
    *,
    home: Path | None = None,
    force: bool = False,
    base_url: str | None = None,
    timeout: float = 60.0,
) -> Path:
    """The folder of dataset ``name``: found on this machine, or downloaded into the data home.

    Args:
        name: a registry name (``evirank data list``).
        home: the data home (default :func:`data_home`).
        force: download again into the data home even if the dataset is already there.
        base_url: a mirror holding the same file names (default ``$EVIRANK_DATA_URL``, else each
            file's own address).
        timeout: seconds to wait for the host before giving up.

    Raises:
        DownloadError: the host could not be reached or the transfer broke off; the message names
            each file to fetch by hand and where to put it.
        VerificationError: a file is not the published one.
    """
    entry = dataset(name)
    home = home or data_home()
    if not force:
        found = find_dataset(name, home=home)
        if found is not None:
            logger.info("%s: using %s", name, found)
            return found
    target = home / entry.folder
    if target.exists() and not force:
        missing = [rel for rel in entry.expect if not (target / rel).is_file()]
        raise DataFolderError(
            f"{target} exists but lacks {', '.join(missing)}; it was not made by a download (those are "
            f"complete or absent): move it away, or replace it with `evirank data get {name} --force`"
        )
    size = entry.size
    what = f"{size / 1e6:.1f} MB" if size else "its files"
    logger.info("%s: not on this machine; getting it (%s) into %s", name, what, target)
    downloads = home / "downloads"
    files = [_fetch(entry, remote, downloads, base_url, timeout, home) for remote in entry.files]
    if force and target.exists():
        # --force: the user asked for this data-home folder to be replaced (the files are fetched by now)
        logger.info("%s: replacing %s (--force)", name, target)
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink()
    with atomic_output(target) as tmp:
        tmp.mkdir(parents=True)
        for remote, path in zip(entry.files, files, strict=True):
            _unpack(remote, path, tmp)
        missing = [rel for rel in entry.expect if not (tmp / rel).is_file()]
        if missing:
            raise VerificationError(
                f"{name}: after unpacking, {', '.join(missing)} is missing from the files of "
                f"{', '.join(str(p) for p in files)}; expected {', '.join(entry.expect)}"
            )
    for path in files:
        path.unlink()
    logger.info("%s: ready in %s", name, target)
    return target


def _url(remote: RemoteFile, base_url: str | None) -> str:
    base = base_url if base_url is not None else os.environ.get(MIRROR_ENV)
    return f"{base.rstrip('/')}/{remote.name}" if base else remote.url


def _fetch(
    entry: Dataset, remote: RemoteFile, downloads: Path, base_url: str | None, timeout: float, home: Path
) -> Path:
    """The verified file of ``remote`` in ``downloads``: already there, or downloaded now."""
    final = downloads / remote.name
    if final.is_file():
        logger.info("%s: checking %s (already downloaded)", entry.name, final)
        _verify(remote, final, placed=True)
        return final
    downloads.mkdir(parents=True, exist_ok=True)
    part = downloads / f"{remote.name}.part"
    url = _url(remote, base_url)
    try:
        _download(url, part, remote, timeout)
    except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError) as exc:
        raise DownloadError(_offline_message(entry, url, exc, downloads, home)) from exc
    try:
        _verify(remote, part, placed=False)
    except VerificationError:
        part.unlink(missing_ok=True)  # a wrong file is never resumed
        raise
    # the .part file is this download's own temporary (kept across runs to resume): it is
    # renamed into place by the one helper every rename of evirank goes through
    return replace_output(part, final, overwrite=True)


def _download(url: str, part: Path, remote: RemoteFile, timeout: float) -> None:
    """Stream ``url`` into ``part``, resuming a partial file where the host answers a range request.

    A partial file is resumed only when a checksum was published for the whole file: without one,
    a damaged beginning (a disk error, a file put there by something else) could not be told from a
    good one once the rest is appended, so the download starts over.
    """
    have = part.stat().st_size if part.exists() else 0
    if remote.size is not None and have > remote.size:
        have = 0
    if have and remote.checksum is None:
        logger.info(
            "%s: no published checksum to check a resumed download against; starting it over", remote.name
        )
        have = 0
    headers = {"User-Agent": f"evirank/{__version__}"}
    if have:
        headers["Range"] = f"bytes={have}-"
    request = urllib.request.Request(url, headers=headers)
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # nothing left to send: the partial file is whole
            return
        raise
    with response:
        resumed = have > 0 and response.status == 206
        if have and not resumed:
            logger.info("%s: the host does not resume downloads; starting %s again", remote.name, url)
            have = 0
        length = response.headers.get("Content-Length")
        total = have + int(length) if length is not None else remote.size
        bar = progress_bar(desc=remote.name, total=total, unit="B", unit_scale=True)
        bar.update(have)
        try:
            with open(part, "ab" if resumed else "wb") as out:
                while chunk := response.read(_CHUNK):
                    out.write(chunk)
                    bar.update(len(chunk))
        finally:
            bar.close()
    received = part.stat().st_size
    if total is not None and received < total:
        raise http.client.IncompleteRead(b"", total - received)


def _digest(path: Path, algorithm: str) -> str:
    hasher = hashlib.new(algorithm)
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            hasher.update(chunk)
    return hasher.hexdigest()


def _verify(remote: RemoteFile, path: Path, *, placed: bool) -> None:
    """Check size, then the published checksum; without one, parse the file and warn."""
    what = f"{path} ({remote.url})"
    again = (
        f"delete {path} and run the command again, or put the file from {remote.url} there"
        if placed
        else "the partial file was removed; run the command again"
    )
    size = path.stat().st_size
    if remote.size is not None and size != remote.size:
        raise VerificationError(f"{what}: expected {remote.size:,} bytes, found {size:,}; {again}")
    if remote.checksum is not None:
        algorithm, _, expected = remote.checksum.partition(":")
        found = _digest(path, algorithm)
        if found != expected:
            raise VerificationError(f"{what}: expected {algorithm} {expected}, found {found}; {again}")
        return
    logger.warning(
        "%s: no published checksum to verify against; checked by %s only",
        remote.name,
        "size and content" if remote.size is not None else "its content",
    )
    try:
        _check_content(remote, path)
    except (ValueError, zipfile.BadZipFile, OSError) as exc:
        raise VerificationError(f"{what}: not a valid {remote.kind} file ({exc}); {again}") from exc


def _check_content(remote: RemoteFile, path: Path) -> None:
    if remote.kind == "zip":
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
        if bad is not None:
            raise ValueError(f"member {bad} is damaged")
        return
    plain = path
    if remote.unpack == "gunzip":
        plain = path.with_name(path.name + ".check")
        _gunzip(path, plain)
    try:
        if remote.kind == "topics":
            from evirank.io.topics import read_topics

            read_topics(plain)
        else:
            from evirank.io.qrels import read_qrels

            read_qrels(plain)
    finally:
        if plain != path:
            plain.unlink(missing_ok=True)


def _gunzip(source: Path, dest: Path) -> None:
    with gzip.open(source, "rb") as src, open(dest, "wb") as out:
        shutil.copyfileobj(src, out, _CHUNK)


def _unpack(remote: RemoteFile, path: Path, folder: Path) -> None:
    """Put the contents of a verified download into the (temporary) dataset ``folder``."""
    if remote.unpack == "gunzip":
        _gunzip(path, folder / remote.target)
    elif remote.unpack == "copy":
        shutil.copyfile(path, folder / remote.target)
    else:
        _extract(path, remote.strip, folder)


def _extract(path: Path, strip: str, folder: Path) -> None:
    """Extract the members under ``strip/`` into ``folder`` (refusing any that would land outside it)."""
    prefix = PurePosixPath(strip) if strip else None
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            member = PurePosixPath(info.filename)
            if prefix is not None:
                if member.parts[: len(prefix.parts)] != prefix.parts:
                    continue  # e.g. __MACOSX/ entries
                member = PurePosixPath(*member.parts[len(prefix.parts) :])
            if not member.parts or info.is_dir():
                continue
            if member.is_absolute() or ".." in member.parts:
                raise VerificationError(f"{path}: member {info.filename} would unpack outside its folder")
            dest = folder.joinpath(*member.parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out, _CHUNK)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError):
        exc = exc.reason if isinstance(exc.reason, BaseException) else exc
    if isinstance(exc, http.client.IncompleteRead):
        return "the transfer broke off before the end (a rerun resumes it)"
    if isinstance(exc, socket.timeout | TimeoutError):
        return "the host did not answer in time"
    return str(exc) or type(exc).__name__


def _offline_message(entry: Dataset, url: str, exc: BaseException, downloads: Path, home: Path) -> str:
    lines = [
        f"cannot download {entry.name}: {url}: {_reason(exc)}.",
        "If this machine cannot reach the host, fetch these files elsewhere and put them here:",
    ]
    lines += [f"  {remote.url}  ->  {downloads / remote.name}" for remote in entry.files]
    lines.append(
        f"then run the command again (or `evirank data get {entry.name}`): they are checked and "
        f"unpacked into {home / entry.folder}."
    )
    named = next((os.environ[name] for name in ENVIRONMENT if os.environ.get(name)), None)
    folder = datasets_folder() or (Path(named) if named else DEFAULT)
    lines.append(f"Or put an unpacked copy ({', '.join(entry.expect)}) in {folder / entry.folder}.")
    return "\n".join(lines)


def describe(entries: Iterable[Dataset], *, home: Path | None = None) -> list[dict[str, str]]:
    """One row per dataset for ``evirank data list``: name, size, where it is, checksum, contents.

    Example:
        >>> rows = describe([dataset("scifact")])
        >>> rows[0]["name"], rows[0]["checksum"]
        ('scifact', 'md5')
    """
    rows = []
    for entry in entries:
        found = find_dataset(entry.name, home=home)
        size = entry.size
        checksums = {r.checksum.partition(":")[0] if r.checksum else "none" for r in entry.files}
        rows.append(
            {
                "name": entry.name,
                "download": f"{size / 1e6:.1f} MB" if size else "unknown",
                "checksum": "+".join(sorted(checksums)),
                "here": str(found) if found else "-",
                "description": entry.description,
            }
        )
    return rows
