"""Every test run leaves the temporary folder as it found it.

- The whole session (and every process it starts) gets a private temporary folder (``tempfile``'s
  and ``TMPDIR``); at the end, a folder or file left there whose name starts with ``evirank-`` or
  ``tmp`` (what :mod:`tempfile` makes) fails the run, naming them. Tests write to ``tmp_path``;
  the private folder lives under pytest's own base folder, which pytest prunes.
- Doctests (``pytest --doctest-modules src``) make their example files with ``tempfile.mkdtemp()``:
  each doctest's ``tempfile`` points at its own ``tmp_path``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from _pytest.doctest import DoctestModule  # the doctest plugin's collector (no public alias)

#: The package whose modules' docstring examples run with the tests.
PACKAGE = Path(__file__).resolve().parent / "src" / "evirank"

#: Names a test may not leave behind in the temporary folder.
LEFTOVER_PREFIXES = ("evirank-", "tmp")


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist (``make test`` runs workers side by side), each worker and every command
    it starts computes on one thread: the workers already share the cores, and two thread pools per
    core only contend. Set before torch or the engines are imported, so they read it."""
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ.setdefault(name, "1")


@pytest.fixture(scope="session", autouse=True)
def private_temp_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point ``tempfile`` and ``TMPDIR`` at a folder of this session's; fail if tests leave files there."""
    folder = tmp_path_factory.mktemp("tempdir", numbered=True)
    saved_tempdir, saved_env = tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir = str(folder)
    os.environ["TMPDIR"] = str(folder)
    try:
        yield folder
    finally:
        tempfile.tempdir = saved_tempdir
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env
    left = sorted(p.name for p in folder.iterdir() if p.name.startswith(LEFTOVER_PREFIXES))
    if left:
        pytest.fail(
            f"the tests left {len(left)} temporary files or folders behind (use tmp_path, or "
            f"tempfile.TemporaryDirectory): {', '.join(left[:10])}{' ...' if len(left) > 10 else ''}",
            pytrace=False,
        )


@pytest.fixture(autouse=True)
def doctest_temp_folder(request: pytest.FixtureRequest) -> Iterator[None]:
    """A doctest's ``tempfile.mkdtemp()`` lands in its own ``tmp_path`` (pytest prunes those)."""
    if not isinstance(request.node, pytest.DoctestItem):
        yield
        return
    folder = request.getfixturevalue("tmp_path")
    saved = tempfile.tempdir
    tempfile.tempdir = str(folder)
    try:
        yield
    finally:
        tempfile.tempdir = saved


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """Collect every module of the package as its doctests (what ``--doctest-modules`` does, for the
    package only: the tests' own conftest files must not be imported as doctest modules)."""
    if (
        file_path.suffix == ".py"
        and file_path.name != "__main__.py"
        and PACKAGE in file_path.parents
        and not parent.config.option.doctestmodules
    ):
        return DoctestModule.from_parent(parent, path=file_path)  # type: ignore[no-any-return]
    return None
