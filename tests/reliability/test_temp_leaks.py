"""The session check of the repository's conftest.py: a test run that leaves temporary folders fails."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT_CONFTEST = Path(__file__).resolve().parents[2] / "conftest.py"


def run_with_check(pytester: pytest.Pytester, body: str) -> pytest.RunResult:
    pytester.makeconftest(ROOT_CONFTEST.read_text(encoding="utf-8"))
    pytester.makepyfile(test_leaky=body)
    return pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")


def test_a_run_that_leaves_an_evirank_folder_in_the_temp_dir_fails(pytester: pytest.Pytester) -> None:
    result = run_with_check(
        pytester,
        "import tempfile\n"
        "def test_leaks():\n"
        "    tempfile.mkdtemp(prefix='evirank-fuzz-')\n"
        "    tempfile.mkdtemp()\n",
    )
    result.stdout.fnmatch_lines(["*left 2 temporary files or folders behind*evirank-fuzz-*"])
    assert result.ret != 0


def test_a_run_that_cleans_up_passes(pytester: pytest.Pytester) -> None:
    result = run_with_check(
        pytester,
        "import os, subprocess, sys, tempfile\n"
        "def test_clean(tmp_path):\n"
        "    (tmp_path / 'x').write_text('kept by pytest')\n"
        "    with tempfile.TemporaryDirectory(prefix='evirank-') as folder:\n"
        "        assert folder.startswith(os.environ['TMPDIR'])\n"
        "    code = 'import tempfile; print(tempfile.gettempdir())'\n"
        "    child = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)\n"
        "    assert child.stdout.strip() == os.environ['TMPDIR']  # child processes use it too\n",
    )
    result.assert_outcomes(passed=1)
