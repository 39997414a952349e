"""Execute the notebooks' jupytext sources and write the paired ``.ipynb`` with outputs.

Usage (from the repository root)::

    python notebooks/run.py                  # every notebook, full size
    python notebooks/run.py quickstart       # one notebook
    python notebooks/run.py --small          # CI sizes (PYMC_CRAIS_NB_SMALL=1), no files written

The ``.md`` files are the source of truth; the ``.ipynb`` files are generated from them by
this script (full size) and committed with their outputs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def notebook_sources() -> list[Path]:
    """The jupytext Markdown notebooks (``.md`` files with a jupytext header)."""
    return sorted(p for p in HERE.glob("*.md") if p.read_text().startswith("---\njupyter:"))


#: Environment of the notebook kernels: the size switch, and single-threaded BLAS (the
#: samplers run their chains in this process with ``cores=1``; on a small shared machine
#: multi-threaded BLAS on 100-particle batches mostly spins, several times slower).
KERNEL_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def execute(source: Path, small: bool, timeout: int = 1800):
    """Read ``source`` with jupytext and execute it in a fresh kernel in this folder."""
    import jupytext
    from nbclient import NotebookClient

    nb = jupytext.read(source)
    env = {**KERNEL_ENV, "PYMC_CRAIS_NB_SMALL": "1" if small else "0"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return nb


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="notebook names (default: all)")
    parser.add_argument("--small", action="store_true", help="CI sizes; do not write .ipynb")
    args = parser.parse_args(argv)
    import jupytext

    sources = notebook_sources()
    if args.names:
        sources = [p for p in sources if p.stem in args.names]
        if len(sources) != len(args.names):
            print(f"unknown notebook among {args.names}; have {[p.stem for p in notebook_sources()]}", file=sys.stderr)
            return 2
    for src in sources:
        t0 = time.perf_counter()
        nb = execute(src, args.small)
        wall = time.perf_counter() - t0
        if not args.small:
            jupytext.write(nb, src.with_suffix(".ipynb"))
        print(f"{src.name}: executed in {wall:.1f} s{'' if args.small else ', wrote ' + src.with_suffix('.ipynb').name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
