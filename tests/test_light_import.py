"""The bare import stays light: no torch, no transformers, no JVM."""

import subprocess
import sys


def test_import_evirank_loads_no_heavy_dependency() -> None:
    code = (
        "import sys, evirank, evirank.frames, evirank.stage, evirank.cli, evirank.io, evirank.io.irds,"
        " evirank.evaluate, evirank.cli.evaluate, evirank.segment, evirank.aggregate;"
        "import evirank.score, evirank.score.store, evirank.cli.explain;"
        "heavy = [m for m in ('torch', 'transformers', 'jnius', 'pyserini', 'onnxruntime', 'fastapi', "
        "'ir_datasets') if m in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
