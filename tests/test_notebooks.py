"""The notebooks in ``notebooks/``: each jupytext ``.md`` runs without error at CI sizes
(``PYMC_CRAIS_NB_SMALL=1``), and its committed ``.ipynb`` is the same notebook with outputs.

The code cells are executed in order in this process (a fresh namespace per notebook, the
non-interactive Agg backend), not in a Jupyter kernel: that needs only jupytext, keeps the
CI install small and saves a kernel start and the imports per notebook. The committed
``.ipynb`` files are produced in a real kernel by ``notebooks/run.py``.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import jupytext
import matplotlib
import nbformat
import pytest
from threadpoolctl import threadpool_limits

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
SOURCES = sorted(p for p in NOTEBOOKS.glob("*.md") if p.read_text().startswith("---\njupyter:"))


def test_there_are_notebooks():
    names = {p.stem for p in SOURCES}
    assert {"quickstart", "bayes_factors", "crais_2d"} <= names, names


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_notebook_runs_at_small_size(source, monkeypatch, capsys):
    monkeypatch.setenv("PYMC_CRAIS_NB_SMALL", "1")
    monkeypatch.chdir(NOTEBOOKS)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nb = jupytext.read(source)
    namespace = {"__name__": "__main__"}
    try:
        # single-threaded BLAS, as notebooks/run.py: on 2 cores threaded BLAS only spins
        with warnings.catch_warnings(), threadpool_limits(limits=1):
            warnings.simplefilter("ignore")
            for i, cell in enumerate(nb.cells):
                if cell.cell_type != "code":
                    continue
                code = compile(cell.source, f"<{source.name}, cell {i}>", "exec")
                exec(code, namespace)  # noqa: S102 - running our own notebook is the test
    finally:
        plt.close("all")
    out = capsys.readouterr().out
    assert "small run: True" in out, f"{source.name} must print whether it runs small"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_committed_ipynb_matches_source_and_has_outputs(source):
    ipynb = source.with_suffix(".ipynb")
    assert ipynb.exists(), f"{ipynb.name} is missing: run `python notebooks/run.py {source.stem}`"
    executed = nbformat.read(ipynb, as_version=4)
    expected = jupytext.read(source)
    got = [(c.cell_type, c.source) for c in executed.cells]
    want = [(c.cell_type, c.source) for c in expected.cells]
    assert got == want, (
        f"{ipynb.name} differs from {source.name}; re-run `python notebooks/run.py {source.stem}`"
    )
    code = [c for c in executed.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code), f"{ipynb.name} has unexecuted cells"
    assert not any(o.output_type == "error" for c in code for o in c.outputs), f"{ipynb.name} has errors"
    first_text = "".join(o.get("text", "") for o in code[0].outputs)
    assert "small run: False" in first_text, f"{ipynb.name} must be committed from a full-size run"
