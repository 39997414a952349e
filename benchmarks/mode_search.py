"""How often the automatic start's mode search sees a second mode, by number of starts.

    python benchmarks/mode_search.py [--starts 8,16,32] [--seeds 40] [--cases all]

For every continuous validation case whose Laplace fit passes ``init="auto"``'s checks, the
search (:func:`pymc_crais.core.mode_search.search_modes`, as ``choose_initial`` runs it) is run
from ``k`` prior draws for each ``k`` in ``--starts`` and each of ``--seeds`` generators;
printed: in how many seeds it saw several modes (or a higher density than the fit's mode),
and the mean model evaluations and milliseconds per start. On a multimodal case every seed
should see several modes; on a unimodal case none should. BLAS runs on one thread, as in
the samplers (with the default pool, on a loaded 2-core machine, a start took 50–100 ms
instead of 1.3 ms on ``linreg_d10``).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from pymc_crais.core.initial import laplace_fit
from pymc_crais.core.mode_search import search_modes
from pymc_crais.samplers.engine import init_auto
from pymc_crais.samplers.engine.compile import (
    compile_model_density,
    initial_point_vector,
    parameter_layout,
)
from pymc_crais.samplers.engine.prior import prior_sampler
from pymc_crais.samplers.engine.runner import one_blas_thread
from pymc_crais.validation.cases import CASES


def row(name: str, ks: list[int], seeds: int) -> str:
    """One case's Markdown row."""
    case = CASES[name]
    model = case.factory()[0]
    layout = parameter_layout(model)
    dens = compile_model_density(model, gradient=True)
    prior = prior_sampler(model, layout)
    with np.errstate(all="ignore"):
        fit = laplace_fit(dens, initial_point_vector(model, layout))
    if init_auto.fit_problems(fit):
        return f"| {name} | {case.modality} | " + " | ".join("(no fit)" for _ in ks) + " | | |"
    cells, evals, secs, runs = [], 0, 0.0, 0
    for k in ks:
        seen = 0
        for seed in range(seeds):
            starts = prior.draw(np.random.default_rng(seed), k)
            t, before = time.perf_counter(), dens.n_evals
            with np.errstate(all="ignore"):
                s = search_modes(dens, starts, fit, maxiter=init_auto.START_MAXITER)
            secs += time.perf_counter() - t
            evals += dens.n_evals - before
            runs += k
            seen += bool(s.n_modes > 1 or s.max_gain > init_auto.GAIN_TOL)
        cells.append(f"{seen}/{seeds}")
    return (f"| {name} | {case.modality} | {' | '.join(cells)} | {evals / runs:.0f} | "
            f"{1000 * secs / runs:.1f} |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--starts", default="8,16,32")
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--cases", default="all", help="comma-separated names, or all")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    names = list(CASES) if args.cases == "all" else args.cases.split(",")
    ks = [int(k) for k in args.starts.split(",")]
    print(f"| case | modality | {' | '.join(f'{k} starts' for k in ks)} | evals / start | ms / start |")
    print("|---|---|" + "---|" * (len(ks) + 2))
    with one_blas_thread():
        for name in names:
            if not CASES[name].discrete:
                print(row(name, ks, args.seeds), flush=True)


if __name__ == "__main__":
    main()
