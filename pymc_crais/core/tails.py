"""What the run records for its diagnostics: weight tails and move correlations (NumPy only).

The Pareto k̂ of a set of importance weights (ALGORITHMS.md §11) is a fit of a generalized
Pareto distribution to the largest ``M`` weights above the ``(M + 1)``-th largest. The core
keeps no ArviZ dependency: it records just those ``M + 1`` largest log-weights of each
stage, and :mod:`pymc_crais.diagnostics` fits k̂ from them (``arviz_stats``' fit; the result
is identical to fitting the full array; ``tests/test_diagnostics.py`` checks it).
"""

from __future__ import annotations

import numpy as np

from .observers import LoopObserver, StageReport

__all__ = ["DiagnosticsRecorder", "coordinate_correlations", "log_weight_tail", "pareto_tail_size"]


def pareto_tail_size(n: int) -> int:
    """Number ``M`` of tail weights of the Pareto fit for ``n`` weights (``r_eff = 1``):
    ``⌊3√n⌋`` above 225 weights, else ``⌊n/5⌋`` (as ``arviz_stats``)."""
    return int(np.floor(3.0 * np.sqrt(n)) if n > 225 else np.floor(n / 5.0))


def log_weight_tail(log_weights: np.ndarray) -> np.ndarray:
    """The ``M + 1`` largest log-weights in ascending order (NaN/``+inf`` count as ``-inf``).

    Parameters
    ----------
    log_weights : array_like, shape (N,)

    Returns
    -------
    numpy.ndarray, shape (M + 1,)
        ``M = pareto_tail_size(N)``.
    """
    lw = np.asarray(log_weights, dtype=np.float64).ravel()
    lw = np.where(np.isfinite(lw), lw, -np.inf)
    m = min(pareto_tail_size(lw.size) + 1, lw.size)
    return np.sort(np.partition(lw, lw.size - m)[lw.size - m :])


def coordinate_correlations(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson correlation of each column of ``a`` with the same column of ``b``.

    Columns constant in either population are left out (the result may be empty).
    """
    ac = a - a.mean(axis=0)
    bc = b - b.mean(axis=0)
    den = np.sqrt(np.sum(ac * ac, axis=0) * np.sum(bc * bc, axis=0))
    ok = den > 0
    return np.sum(ac * bc, axis=0)[ok] / den[ok]


class DiagnosticsRecorder(LoopObserver):
    """The observer that keeps what :mod:`pymc_crais.diagnostics` reads of a run: the
    ``M + 1`` largest ``Δ`` of the initial particles (the tail of ``q0``'s importance
    weights); per stage the ``M + 1`` largest incremental log-weights (cut to the width of
    a population of ``N``), and the mean and max over coordinates of the correlation of the
    particles after the stage's moves with their positions before (NaN: no move)."""

    def __init__(self):
        self.initial_tail = None
        self.move_correlation = []
        self.move_correlation_max = []
        self.weight_tail = []

    def begin_run(self, state) -> None:
        self.initial_tail = log_weight_tail(state.delta)

    def end_stage(self, report: StageReport) -> None:
        width = pareto_tail_size(report.n_particles) + 1
        self.weight_tail.append(log_weight_tail(report.log_weights)[-width:])
        moved = report.moved
        corr = coordinate_correlations(report.x_start, moved.last.x) if moved.n_transitions else np.array([])
        self.move_correlation.append(float(corr.mean()) if corr.size else np.nan)
        self.move_correlation_max.append(float(corr.max()) if corr.size else np.nan)

    def as_arrays(self) -> dict[str, np.ndarray]:
        """The per-stage records as arrays (``weight_tail`` as (stage, M + 1))."""
        names = ("move_correlation", "move_correlation_max", "weight_tail")
        return {k: np.asarray(getattr(self, k), dtype=np.float64) for k in names}
