"""The package's layering, checked from the source (imports parsed with ``ast``).

* the NumPy core imports nothing from PyMC, PyTensor, ArviZ or xarray, and nothing of the
  package above it;
* the results layer imports no sampler;
* samplers/ holds the public samplers, one module each, and samplers/engine/ what they
  share; no engine module imports a public sampler module;
* no module imports another module's private (underscore) names;
* the package's modules import each other without a cycle (every import counted, also
  those inside functions or under ``TYPE_CHECKING``: neither makes a cycle go away);
* no module is longer than ``MAX_LINES`` (no exceptions).

docs/architecture.md describes the layers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pymc_crais"
MAX_LINES = 400

FORBIDDEN_IN_CORE = ("pymc", "pytensor", "arviz", "arviz_base", "arviz_stats", "xarray")
CORE_MAY_IMPORT = ("pymc_crais.core", "pymc_crais.warnings")
RESULTS_LAYER = (
    "results.py", "chain_result.py", "comparison.py", "plots.py", "evidence_group.py", "cross_check.py",
)
# the public samplers, one module each; what they share is in samplers/engine/
SAMPLER_MODULES = ("ais", "bridge", "crais", "many", "mcd", "rts", "smc", "smc_kernels")


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _rel(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def _module_name(path: Path) -> str:
    parts = ["pymc_crais", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_of(path: Path) -> str:
    name = _module_name(path)
    return name if path.name == "__init__.py" else name.rsplit(".", 1)[0]


def _resolve(path: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` reads from."""
    if not node.level:
        return node.module or ""
    base = _package_of(path).split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _imports(path: Path, text: str | None = None) -> list[tuple[str, list[str], int]]:
    """``(module, names, line)`` for every import of the file (function-level ones too)."""
    out = []
    text = path.read_text() if text is None else text
    for node in ast.walk(ast.parse(text, filename=str(path))):
        if isinstance(node, ast.Import):
            out.extend((alias.name, [], node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _resolve(path, node)
            names = [a.name for a in node.names]
            out.append((module, names, node.lineno))
            # ``from . import x`` imports the module ``pkg.x``
            out.extend((f"{module}.{n}", [], node.lineno) for n in names)
    return out


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_the_walk_finds_the_package():
    names = {_rel(p) for p in _modules()}
    assert {"core/anneal.py", "results.py", "samplers/engine/runner.py", "samplers/ais.py"} <= names


def _core_violations(path: Path, text: str | None = None) -> list[str]:
    bad = []
    for module, _, line in _imports(path, text):
        top = module.split(".")[0]
        if top in FORBIDDEN_IN_CORE:
            bad.append(f"line {line}: {module}")
        elif top == "pymc_crais" and not module.startswith(CORE_MAY_IMPORT):
            bad.append(f"line {line}: {module} (the core is the bottom layer)")
    return bad


@pytest.mark.parametrize("path", [p for p in _modules() if _rel(p).startswith("core/")], ids=_rel)
def test_core_imports_no_modelling_library(path):
    bad = _core_violations(path)
    assert not bad, f"{_rel(path)} imports {bad}"


@pytest.mark.parametrize("name", RESULTS_LAYER)
def test_results_layer_imports_no_sampler(name):
    bad = [
        f"line {line}: {module}"
        for module, _, line in _imports(PACKAGE / name)
        if module.startswith("pymc_crais.samplers")
    ]
    assert not bad, f"{name} imports {bad}"


@pytest.mark.parametrize(
    "path", [p for p in _modules() if _rel(p).startswith("samplers/engine/")], ids=_rel
)
def test_engine_imports_no_sampler(path):
    samplers = tuple(f"pymc_crais.samplers.{m}" for m in SAMPLER_MODULES)
    bad = [
        f"line {line}: {module}"
        for module, _, line in _imports(path)
        if module in samplers or module.startswith(tuple(f"{s}." for s in samplers))
    ]
    assert not bad, f"{_rel(path)} imports {bad}"


def test_samplers_folder_holds_the_public_samplers():
    """samplers/ holds one module per public sampler; everything they share is in
    samplers/engine/ (the folders show the architecture)."""
    top = {p.stem for p in (PACKAGE / "samplers").glob("*.py")} - {"__init__"}
    assert top == set(SAMPLER_MODULES), (
        f"samplers/ should hold only the public samplers {sorted(SAMPLER_MODULES)}; "
        f"move {sorted(top - set(SAMPLER_MODULES))} to samplers/engine/"
    )


def _private_violations(path: Path, text: str | None = None) -> list[str]:
    text = path.read_text() if text is None else text
    tree = ast.parse(text, filename=str(path))
    bad = []
    module_aliases = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _resolve(path, node)
            if source == "__future__":
                continue
            for alias in node.names:
                if _private(alias.name):
                    bad.append(f"line {node.lineno}: from {source} import {alias.name}")
                if source.startswith("pymc_crais"):
                    module_aliases.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("pymc_crais"):
                    module_aliases.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in module_aliases
            and _private(node.attr)
        ):
            bad.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return bad


@pytest.mark.parametrize("path", _modules(), ids=_rel)
def test_no_private_names_cross_modules(path):
    bad = _private_violations(path)
    assert not bad, f"{_rel(path)} reaches into private names: {bad}"


def test_no_module_is_too_long():
    lengths = {_rel(p): len(p.read_text().splitlines()) for p in _modules()}
    too_long = {k: n for k, n in lengths.items() if n > MAX_LINES}
    assert not too_long, f"modules over {MAX_LINES} lines (split them): {too_long}"


def test_checks_catch_violations():
    """The checks themselves find what they are meant to find (the old shape of the
    package: ``from . import sampling as _s`` then ``_s._setup``, a private import, a core
    module importing PyMC or the samplers)."""
    probe = PACKAGE / "samplers" / "probe.py"
    src = "from . import sampling as _s\nfrom .compile import _compile\nx = _s._setup\n"
    assert _private_violations(probe, src) == [
        "line 2: from pymc_crais.samplers.compile import _compile",
        "line 3: _s._setup",
    ]
    assert _private_violations(probe, "from __future__ import annotations\nx = a._b\n") == []
    core = PACKAGE / "core" / "probe.py"
    src = "import numpy\nimport pytensor.tensor as pt\nfrom ..samplers import ais\n"
    src += "from ..warnings import MaxStepsWarning\nfrom .paths import make_path\n"
    assert [v.split(":")[0] for v in _core_violations(core, src)] == ["line 2", "line 3", "line 3"]


# ----------------------------------------------------------------------------- import cycles
def _import_graph(sources: dict[str, tuple[Path, str]]) -> dict[str, set[str]]:
    """``module -> the package modules it imports`` from ``{module: (path, text)}``.

    ``from A import n`` reads the module ``A.n`` when there is one, else ``A``;
    ``import A.B`` reads ``A.B``. Every import counts, also one inside a function or
    under ``if TYPE_CHECKING:`` (a cycle of type hints is still a cycle of the design)."""
    graph = {}
    for name, (path, text) in sources.items():
        edges = set()
        for node in ast.walk(ast.parse(text, filename=str(path))):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in sources)
            elif isinstance(node, ast.ImportFrom):
                source = _resolve(path, node)
                for alias in node.names:
                    if f"{source}.{alias.name}" in sources:
                        edges.add(f"{source}.{alias.name}")
                    elif source in sources:
                        edges.add(source)
        edges.discard(name)
        graph[name] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_no_import_cycle():
    sources = {_module_name(p): (p, p.read_text()) for p in _modules()}
    graph = _import_graph(sources)
    assert "pymc_crais.core.anneal" in graph["pymc_crais.samplers.engine.anneal_chain"]
    cycles = _cycles(graph)
    detail = [{m: sorted(graph[m] & set(c)) for m in c} for c in cycles]
    assert not cycles, f"import cycles (module -> the modules of its cycle it imports): {detail}"


def test_cycle_check_catches_cycles():
    """A function-level or ``TYPE_CHECKING`` import closes a cycle as much as a
    module-level one; ``from . import x`` reads the module ``x``."""
    a, b, c = PACKAGE / "pa.py", PACKAGE / "pb.py", PACKAGE / "pc.py"
    sources = {
        "pymc_crais.pa": (a, "from .pb import f\n"),
        "pymc_crais.pb": (b, "def f():\n    from . import pc\n"),
        "pymc_crais.pc": (c, "from .pa import g\n"),
    }
    assert _cycles(_import_graph(sources)) == [["pymc_crais.pa", "pymc_crais.pb", "pymc_crais.pc"]]
    sources["pymc_crais.pc"] = (c, "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .pa import g\n")
    assert len(_cycles(_import_graph(sources))) == 1
    sources["pymc_crais.pc"] = (c, "import numpy\nfrom .core import paths\n")
    assert _cycles(_import_graph(sources)) == []
