import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from evirank.errors import OutputExistsError
from evirank.record import plain, sidecar, versions, write_record


@dataclass(frozen=True)
class _Config:
    path: Path
    weights: tuple[float, ...]
    alpha: float


def test_plain_makes_every_value_strict_json() -> None:
    value = {
        "config": _Config(Path("runs/a.txt"), (1.0, 0.5), float("nan")),
        "scores": np.array([0.25, np.inf], dtype=np.float32),
        "count": np.int64(3),
        7: {"set": frozenset({"x"})},
        "other": object,
    }
    out = plain(value)
    text = json.dumps(out, allow_nan=False)  # raises on NaN / infinity
    assert json.loads(text) == {
        "config": {"path": "runs/a.txt", "weights": [1.0, 0.5], "alpha": None},
        "scores": [0.25, None],
        "count": 3,
        "7": {"set": ["x"]},
        "other": str(object),
    }


def test_write_record_holds_command_config_facts_and_versions(tmp_path: Path) -> None:
    path = sidecar(tmp_path / "run.txt")
    assert path.name == "run.txt.json"
    record = write_record(path, "search", {"k": 10}, queries=np.int64(3), versions={"java": "21"})
    on_disk = json.loads(path.read_text())
    assert on_disk == record
    assert list(on_disk)[:2] == ["command", "config"] and list(on_disk)[-1] == "versions"
    assert on_disk["queries"] == 3 and on_disk["versions"]["java"] == "21"
    assert {"evirank", "python", "numpy", "pandas"} <= set(on_disk["versions"])
    with pytest.raises(OutputExistsError):
        write_record(path, "search", {}, overwrite=False)
    assert json.loads(path.read_text()) == record  # untouched


def test_versions_reads_metadata_without_importing(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.delitem(sys.modules, "ir_measures", raising=False)
    found = versions("no-such-package-evirank")
    assert "no-such-package-evirank" not in found and "ir_measures" in found
    assert "ir_measures" not in sys.modules
