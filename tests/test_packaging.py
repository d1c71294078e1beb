"""The wheel and the sdist: built by ``python -m build``, installed into a fresh virtual environment.

The wheel is built from the sdist (``python -m build`` does that), installed with pip into a new
virtual environment, and run from there, outside the source tree: ``evirank --version``, the
dataset registry, and a small index -> search -> rerank -> evaluate run with a tiny random model.

The new environment does not download its dependencies again (torch, transformers, pyserini and
Java are large): it sees this environment's installed packages through a ``.pth`` file that
points at a folder of links to them, *leaving evirank out*, so the only evirank it can import is
the one the wheel installed. ``pip check`` then confirms the wheel's declared requirements are met.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from evirank import __version__

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
DOCS = {
    "d1": ("Cats", "The cat sat on the mat. It is a cat. Cats are not dogs."),
    "d2": ("Dogs", "Dogs sat on the mat. A dog is not a cat."),
    "d3": ("Ranking", "BM25 ranks documents. A passage is evidence. The query is relevant."),
    "d4": ("Vaccine", "A vaccine trains cells. The virus is in the cell."),
    "d5": ("Search", "Search and retrieval rank documents by score. This is a model of ranking."),
}
TOPICS = {"1": "cat on the mat", "2": "vaccine virus cells"}
QRELS = [("1", "d1", 1), ("2", "d4", 1)]


def _run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{args}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``python -m build`` on a copy of the sources (the checkout gets no build folders)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (REPO / name).exists():
            shutil.copy2(REPO / name, source / name)
    shutil.copytree(
        REPO / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    )
    out = tmp_path_factory.mktemp("dist")
    # --no-isolation: build with this environment's setuptools instead of fetching it again.
    _run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, source, cwd=source)
    return out


def _dependency_view(folder: Path) -> Path:
    """Links to every package installed here except evirank itself."""
    folder.mkdir()
    site = Path(sysconfig.get_paths()["purelib"])
    for entry in site.iterdir():
        name = entry.name.lower()
        if name.startswith(("evirank", "__editable__")) or name.endswith(".pth"):
            continue
        (folder / entry.name).symlink_to(entry)
    return folder


@pytest.fixture(scope="module")
def venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment with the wheel installed; dependencies seen through a .pth file."""
    root = tmp_path_factory.mktemp("venv")
    # Without pip or setuptools of its own: this environment's pip installs into it (--python).
    _run(sys.executable, "-m", "venv", "--without-pip", root / "env", cwd=root)
    python = root / "env" / "bin" / "python"
    purelib = _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=root)
    view = _dependency_view(root / "deps")
    (Path(purelib.strip()) / "evirank-test-deps.pth").write_text(f"{view}\n")
    (wheel,) = dist.glob("evirank-*.whl")
    pip = (sys.executable, "-m", "pip", "--python", python)
    _run(*pip, "install", "--quiet", "--no-index", "--no-deps", wheel, cwd=root)
    return root / "env"


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return env | {"HF_HUB_OFFLINE": "1", "EVIRANK_HOME": str(home), "EVIRANK_DATASETS": str(home / "none")}


def test_build_makes_a_wheel_and_an_sdist_with_every_module(dist: Path) -> None:
    (wheel,) = dist.glob(f"evirank-{__version__}-py3-none-any.whl")
    (sdist,) = dist.glob(f"evirank-{__version__}.tar.gz")
    modules = {p.relative_to(REPO / "src").as_posix() for p in (REPO / "src" / "evirank").rglob("*.py")}
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = archive.read(f"evirank-{__version__}.dist-info/entry_points.txt").decode()
        metadata = archive.read(f"evirank-{__version__}.dist-info/METADATA").decode()
    assert modules <= names
    assert "evirank/py.typed" in names
    assert "evirank = evirank.cli:main" in entry_points
    assert 'Requires-Dist: torch>=2.1; extra == "torch"' in metadata
    assert sdist.stat().st_size > 0


def test_the_installed_wheel_runs_outside_the_source_tree(venv: Path, tmp_path: Path) -> None:
    env = _env(tmp_path / "home")
    python, evirank = venv / "bin" / "python", venv / "bin" / "evirank"
    where = Path(_run(python, "-c", "import evirank; print(evirank.__file__)", cwd=tmp_path, env=env).strip())
    assert where.is_relative_to(venv)
    assert not where.is_relative_to(REPO)
    assert _run(evirank, "--version", cwd=tmp_path, env=env).strip() == f"evirank {__version__}"
    assert "scifact" in _run(evirank, "data", "list", cwd=tmp_path, env=env)
    _run(sys.executable, "-m", "pip", "--python", python, "check", cwd=tmp_path, env=env)


def test_index_search_rerank_and_evaluate_from_the_installed_wheel(
    venv: Path, tmp_path: Path, tiny_cross_encoder_path: Path
) -> None:
    env = _env(tmp_path / "home")
    (tmp_path / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d, "title": t, "text": x}) + "\n" for d, (t, x) in DOCS.items())
    )
    (tmp_path / "topics.tsv").write_text("".join(f"{q}\t{text}\n" for q, text in TOPICS.items()))
    (tmp_path / "qrels.txt").write_text("".join(f"{q} 0 {d} {label}\n" for q, d, label in QRELS))
    evirank = venv / "bin" / "evirank"

    _run(evirank, "-q", "index", "--corpus", "corpus.jsonl", "--index", "idx", cwd=tmp_path, env=env)
    _run(evirank, "-q", "search", "--index", "idx", "--topics", "topics.tsv", "--output", "bm25.txt",
         cwd=tmp_path, env=env)  # fmt: skip
    _run(evirank, "-q", "rerank", "--run", "bm25.txt", "--index", "idx", "--topics", "topics.tsv",
         "--model", tiny_cross_encoder_path, "--device", "cpu", "--aggregate", "maxp", "--depth", "3",
         "--output", "maxp.txt", cwd=tmp_path, env=env)  # fmt: skip
    table = _run(evirank, "-q", "evaluate", "--qrels", "qrels.txt", "--run", "bm25=bm25.txt",
                 "--run", "maxp=maxp.txt", "--metrics", "nDCG@10", cwd=tmp_path, env=env)  # fmt: skip

    bm25 = [line.split() for line in (tmp_path / "bm25.txt").read_text().splitlines()]
    reranked = [line.split() for line in (tmp_path / "maxp.txt").read_text().splitlines()]
    assert {row[0] for row in bm25} == set(TOPICS)
    assert sorted((r[0], r[2]) for r in reranked) == sorted((r[0], r[2]) for r in bm25)
    assert {row[5] for row in reranked} == {"evirank-cross-maxp"}
    assert "bm25" in table and "maxp" in table
