"""Other modes than a Laplace fit's: short L-BFGS runs from several starting points.

``init="auto"`` and the moment-averaging path use it to tell a unimodal posterior (start from
the fit) from one with separated modes (start from the prior, and warn); bridge sampling uses
it to look for modes its draws did not visit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .batch_gate import BatchGate, GatedDensity, run_gated
from .density import BatchedDensity
from .initial import LaplaceFit, maximize_log_density

__all__ = [
    "CONFIRM_RUNS",
    "STATIONARY_TOL",
    "ModeSearch",
    "maximize_in_lockstep",
    "negligible_drop",
    "search_modes",
]


@dataclass(frozen=True)
class ModeSearch:
    """What short L-BFGS runs from several starting points found, relative to a Laplace fit.

    Attributes
    ----------
    n_starts : int
        Runs made.
    n_modes : int
        Distinct local maxima among the converged runs and the fit's mode (1: only the fit's).
    n_unsettled : int
        Runs that stopped without converging (iteration cap, or a non-finite density), or
        that SciPy reports converged at a point that is not stationary: whitened gradient
        ``‖Lᵀ∇‖`` above :data:`STATIONARY_TOL` (L-BFGS stops on a "relative reduction"
        where a vague prior's scale leaves the density nearly flat in other coordinates),
        or whose density is more than :func:`negligible_drop` nats below the fit's mode.
    max_gain : float
        Largest ``log density(run's end) − log density(fit's mode)`` over the runs: above 0
        (beyond rounding) the fit's mode is not the highest one.
    max_distance : float
        Largest whitened distance ``‖L⁻¹(x − mode)‖`` (``cov = L Lᵀ`` of the fit) of a
        converged run's end from the fit's mode.
    n_evals : int
        Model evaluations spent.
    ends : tuple of numpy.ndarray
        The fit's mode, then every run's end that counts as a mode (converged, stationary,
        not negligibly low), whether or not it is distinct (unconstrained coordinates).
    end_log_densities : tuple of float
        ``log prior + ℓ`` at each of ``ends``.
    """

    n_starts: int
    n_modes: int
    n_unsettled: int
    max_gain: float
    max_distance: float
    n_evals: int
    ends: tuple = ()
    end_log_densities: tuple = ()


STATIONARY_TOL = 1.0
"""Largest whitened gradient norm ``‖Lᵀ∇ log p‖`` (``cov = L Lᵀ`` of the fit) at which a run's
end counts as a mode: about the gradient one standard deviation from a Gaussian's mode. A
start from a BUGS-style ``Gamma(0.001, 0.001)`` precision's prior draw (``log τ ≈ −460``)
ends after two L-BFGS iterations "converged" at ``log τ ≈ −118`` with a gradient of 15 along
``log τ`` (whitened ≈ 4); counted, such ends made ``init="auto"`` see 11 modes of a
unimodal normal model."""


CONFIRM_RUNS = 2
"""Restarts of L-BFGS from an end that would be a new mode: it counts if a restart stays
within the separation (a gentle slope where L-BFGS stopped, 54 nats below the mode with a
whitened gradient of 0.99, counted as a second mode of a normal model with a
``Uniform(0, 1e6)`` scale)."""


def negligible_drop(d: int) -> float:
    """Nats below the fit's mode beyond which a run's end cannot be a mode that matters:
    ``50 + 10 d``. Such a mode's share of the posterior mass is below ``e^-50`` unless it is
    more than ``e^10`` times wider than the fit in every whitened direction. (At a prior
    draw of a vague precision far out in its tail, ``log τ ≈ −527``, PyMC's gradient
    underflows to about 0 while the density is 7900 nats below the mode: such an end passes
    the gradient test but not this one.)"""
    return 50.0 + 10.0 * d


def search_modes(
    density: BatchedDensity,
    starts: np.ndarray,
    fit: LaplaceFit,
    *,
    maxiter: int = 200,
    separation: float = 3.0,
) -> ModeSearch:
    """Look for other modes than ``fit.mode``: one short L-BFGS run from each start.

    Two converged ends are the same mode when their whitened distance (in the metric of
    ``fit.cov``) is at most ``separation``; a converged end farther than that from the
    fit's mode and every mode already found is a new mode.

    Parameters
    ----------
    density : BatchedDensity
        Evaluates ``(log prior, ℓ)`` with gradients.
    starts : numpy.ndarray, shape (k, d)
        Starting points (e.g. prior draws).
    fit : LaplaceFit
        The fit whose mode is checked.
    maxiter : int, default 200
        L-BFGS iterations per run.
    separation : float, default 3
        Whitened distance beyond which two ends are distinct modes.

    Returns
    -------
    ModeSearch
    """
    from scipy.linalg import solve_triangular

    before = density.n_evals
    chol = np.linalg.cholesky(fit.cov)
    modes = [np.zeros(fit.mode.size)]  # whitened, the fit's mode at the origin
    ends, end_lp = [fit.mode], [float(fit.log_density_at_mode)]
    unsettled, gain, dist = 0, -np.inf, 0.0

    def settled_end(res):
        """The whitened end of a run, or None if it is not a mode that matters."""
        value = -float(res.fun) if res.fun < 1e300 else -np.inf
        if not (res.success and np.isfinite(value)):
            return None
        if np.linalg.norm(chol.T @ np.asarray(res.jac, dtype=np.float64)) > STATIONARY_TOL:
            return None  # stopped where the density still climbs: not a mode
        if value < fit.log_density_at_mode - negligible_drop(fit.mode.size):
            return None  # too far below to hold any mass (or a gradient that underflowed)
        return solve_triangular(chol, res.x - fit.mode, lower=True)

    starts = np.atleast_2d(np.asarray(starts, dtype=np.float64))
    for res in maximize_in_lockstep(density, starts, maxiter):
        gain = max(gain, -float(res.fun) - fit.log_density_at_mode)
        z = settled_end(res)
        for _ in range(CONFIRM_RUNS):
            if z is None or min(float(np.linalg.norm(z - m)) for m in modes) <= separation:
                break
            # a new mode? L-BFGS also stops on a gentle slope (a relative reduction below
            # its tolerance); a restart from the end, with a fresh curvature memory, stays
            # at a mode and climbs on from a slope
            res = maximize_log_density(density, res.x, maxiter)
            gain = max(gain, -float(res.fun) - fit.log_density_at_mode)
            again = settled_end(res)
            if again is None or float(np.linalg.norm(again - z)) <= separation:
                z = again
                break
            z = again
        if z is None:
            unsettled += 1
            continue
        dist = max(dist, float(np.linalg.norm(z)))
        ends.append(fit.mode + chol @ z)
        end_lp.append(-float(res.fun))
        if min(float(np.linalg.norm(z - m)) for m in modes) > separation:
            modes.append(z)
    return ModeSearch(
        int(starts.shape[0]),
        len(modes),
        unsettled,
        float(gain),
        dist,
        int(density.n_evals - before),
        tuple(ends),
        tuple(end_lp),
    )


def maximize_in_lockstep(density: BatchedDensity, starts: np.ndarray, maxiter: int) -> list:
    """:func:`~pymc_crais.core.initial.maximize_log_density` from each row of ``starts``,
    all runs at once: each in a thread, their model calls batched (:class:`BatchGate`), so
    a round of the runs' iterations costs one batched call instead of one call a run (the
    search's hundreds of one-particle calls were most of a small model's set-up). Each run
    computes what it would alone, on rows of a bigger call; the results (SciPy's, in the
    order of ``starts``) depend only on the starts. The runs take turns between calls
    (``one_at_a_time``). An error in one run is raised here."""
    k = starts.shape[0]
    if k <= 1:
        return [maximize_log_density(density, x0, maxiter) for x0 in starts]
    gate = BatchGate(density, range(k), one_at_a_time=True)

    def run(i: int):
        view = GatedDensity(density.dim, gate=gate, key=i)
        return maximize_log_density(view, starts[i], maxiter)

    results = run_gated(gate, run, k)
    for res in results:
        if isinstance(res, BaseException):
            raise res
    return results
