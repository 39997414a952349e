"""The core is NumPy only: no module under pymc_crais/core imports PyMC, PyTensor, ArviZ or
the package's other layers (checked on the source, since importing pymc_crais imports PyMC)."""

from __future__ import annotations

import ast
from pathlib import Path

import pymc_crais.core

CORE = Path(pymc_crais.core.__file__).resolve().parent
FORBIDDEN = {"pymc", "pytensor", "arviz", "arviz_base", "arviz_stats", "xarray"}


def _imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield 0, a.name
        elif isinstance(node, ast.ImportFrom):
            yield node.level, node.module or ""


def test_core_imports_no_pymc_and_no_other_layer():
    files = sorted(CORE.rglob("*.py"))
    assert len(files) > 10
    bad = []
    for f in files:
        depth = len(f.relative_to(CORE).parts) - 1  # 0 for core/x.py, 1 for core/rts/x.py
        for level, mod in _imports(f):
            top = mod.split(".")[0]
            if level == 0 and (top in FORBIDDEN or top == "pymc_crais"):
                bad.append(f"{f.relative_to(CORE)}: import {mod}")
            if level > depth + 1:  # a relative import reaching out of the core
                bad.append(f"{f.relative_to(CORE)}: from {'.' * level}{mod} import ...")
    assert not bad, "the core must stay NumPy only:\n" + "\n".join(bad)
