"""Importance sampling from a Student-t fitted to a run's own posterior draws.

An annealing run ends with (approximately) equal-weight draws of the posterior. A
multivariate Student-t at their mean and covariance is a proposal that shares nothing with
the run's path: importance sampling from it gives a second, independent estimate of
``log Z``. Where its weights have a light tail (Pareto k̂ ≤ 0.7, computed by the caller),
that estimate is trustworthy, and a run whose ``log Ẑ`` lies well below it lost mass on
its way (a start at a funnel's neck that the annealing never left). The same Student-t is
then a start close to the posterior for a second run.

Where the two estimates agree and the importance weights have a finite variance (Pareto
k̂ ≤ :data:`POOL_KHAT`), they are two independent unbiased estimates of ``Z`` (given the
run, the importance draws are fresh): :func:`pool_with_refit` averages them, each weighted
by its inverse variance, which only shrinks the error.
"""

from __future__ import annotations

import numpy as np

from .density import BatchedDensity
from .initial import StudentTInitial
from .weights import clean_log_weights, log_mean_exp, log_z_relative_variance

__all__ = [
    "POOL_KHAT",
    "REFIT_FLOOR",
    "REFIT_SIGMA",
    "ImportanceEstimate",
    "importance_estimate",
    "pool_with_refit",
    "shrunk_covariance",
    "student_t_from_draws",
]

REFIT_SIGMA = 3.0
"""Combined standard errors beyond which the importance estimate and the run disagree."""
REFIT_FLOOR = 0.05
"""Nats added to that tolerance (as :func:`pymc_crais.cross_check`'s ``floor``)."""
POOL_KHAT = 0.5
"""Largest Pareto k̂ of the importance weights for :func:`pool_with_refit` to use them: below
0.5 their variance is finite, so its estimate (and an inverse-variance weight) means
something; between 0.5 and 0.7 the estimate is still usable as a check, not as a weight."""


def student_t_from_draws(
    x, *, scale: float = 1.2, df: float = 5.0, shrink: bool = False
) -> StudentTInitial | None:
    """A Student-t at the mean and covariance of the draws ``x`` (rows), its covariance
    times ``scale²``; ``None`` when the draws give no finite positive-definite covariance
    (fewer rows than ``d + 1``, or than 3 with ``shrink``; a coordinate that did not vary;
    non-finite draws).

    Parameters
    ----------
    x : numpy.ndarray, shape (n, d)
        Posterior draws (equal weights).
    scale : float, default 1.2
        Factor on the standard deviations (a proposal a little wider than the draws).
    df : float, default 5.0
        Degrees of freedom.
    shrink : bool, default False
        Use :func:`shrunk_covariance` (the correlations shrunk towards 0 by the
        Ledoit–Wolf intensity) instead of the sample covariance: with few draws per
        dimension (1,000 in 62 dimensions) the sample correlations' noise is a misfit that
        the importance weights' tail shows.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or not np.all(np.isfinite(x)):
        return None
    if x.shape[0] <= (2 if shrink else x.shape[1]):  # shrunk: positive definite from 3 rows
        return None
    try:
        cov = shrunk_covariance(x)[0] if shrink else np.atleast_2d(np.cov(x, rowvar=False))
        return StudentTInitial(x.mean(axis=0), cov * scale**2, df=df)
    except ValueError:  # a coordinate that did not vary; not positive definite
        return None


def shrunk_covariance(x: np.ndarray) -> tuple[np.ndarray, float]:
    """The covariance of the draws ``x`` (rows) with their correlations shrunk towards 0:
    ``(cov, intensity)``.

    The draws are standardized by their standard deviations; their correlation matrix ``R``
    is replaced by ``s I + (1 − s) R`` with the Ledoit–Wolf intensity for this target
    (Schäfer and Strimmer's "target D"): ``s = min(1, b² / Σ_{i≠j} R_ij²)``, where
    ``b² = (mean_k Σ_{i≠j} z_ki² z_kj² − Σ_{i≠j} R_ij²) / n`` (``z_k`` the standardized
    rows) estimates the sampling variance of the off-diagonal entries, the only ones the target
    changes. The variances are kept (unbiased, ``n − 1``). ``intensity`` is ``s`` (1 when
    ``R`` has no off-diagonal entry away from 0, as with ``d = 1``). The result is positive
    definite when ``s > 0``, even with fewer rows than dimensions.

    Raises
    ------
    ValueError
        With fewer than 3 rows, a non-finite value, or a coordinate that does not vary
        (standard deviation at most ``1e-12`` of its largest absolute value).
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 3 or not np.all(np.isfinite(x)):
        raise ValueError("shrunk_covariance needs a 2-d array of at least 3 finite rows")
    n, d = x.shape
    sd = x.std(axis=0)
    if not np.all(sd > 1e-12 * np.max(np.abs(x), axis=0)):
        raise ValueError("shrunk_covariance needs every coordinate varying")
    z = (x - x.mean(axis=0)) / sd
    r = z.T @ z / n
    off = float(np.sum(r * r) - np.sum(np.diag(r) ** 2))  # Σ_{i≠j} R_ij²
    z2 = z * z
    cross = float(np.mean(np.sum(z2, axis=1) ** 2 - np.sum(z2 * z2, axis=1)))
    noise = max(cross - off, 0.0) / n
    s = 1.0 if off <= 0.0 else min(1.0, noise / off)
    shrunk = (1.0 - s) * r
    shrunk[np.diag_indices(d)] = 1.0
    return shrunk * np.outer(sd, sd) * (n / (n - 1)), s


class ImportanceEstimate:
    """``log Ẑ`` by importance sampling: ``log_z``, its delta-method error ``mcse``
    (``sqrt(r / n)``, ``r`` the weights' relative variance; trust it only when their Pareto
    k̂ is small), the ``log_weights`` and the model evaluations ``n_evals``."""

    def __init__(self, log_weights: np.ndarray, n_evals: int):
        self.log_weights = clean_log_weights(log_weights)  # NaN, +inf: zero weight
        self.n_evals = int(n_evals)
        finite = np.isfinite(self.log_weights).any()
        self.log_z = float(log_mean_exp(self.log_weights)) if finite else -np.inf
        self.mcse = float(np.sqrt(log_z_relative_variance(self.log_weights)))


def importance_estimate(
    density: BatchedDensity,
    proposal: StudentTInitial,
    rng: np.random.Generator,
    n: int,
    *,
    gradient: bool = False,
) -> ImportanceEstimate:
    """Importance sampling of ``density``'s normalizing constant from ``proposal``.

    ``density`` evaluates ``(log q0, Δ)`` of some start (any: ``log q0 + Δ`` is the
    unnormalized posterior, whatever ``q0`` is); ``n`` draws of ``proposal``; weights whose
    log-density is not finite are zero. ``gradient=True`` evaluates with the gradient
    function (when it is compiled and a values-only one is not, that is cheaper than
    compiling one for a few thousand draws).
    """
    x = proposal.draw(rng, n)
    before = density.n_evals
    ev = density.evaluate(x, gradient=gradient)
    with np.errstate(invalid="ignore"):
        log_w = ev.log_q0 + ev.delta - proposal.logpdf(x)
    return ImportanceEstimate(log_w, density.n_evals - before)


def pool_with_refit(
    log_z: float,
    mcse: float,
    refit_log_z: float,
    refit_mcse: float,
    refit_khat: float,
    tail_factor: float = 1.0,
) -> tuple[float, float] | None:
    """A run's ``log Ẑ`` pooled with an importance estimate of the same ``Z``.

    ``Ẑ = (Ẑ_run / v_run + Ẑ_is / v_is) / (1 / v_run + 1 / v_is)``, the variances those of
    ``log Ẑ`` (relative variances of ``Ẑ``), ``v_is = tail_factor · refit_mcse²`` (the
    factor of the weights' k̂, :func:`pymc_crais.tail_stats.heavy_tail_factor`); its error
    ``(1 / v_run + 1 / v_is)^{-1/2}``. ``None`` (keep the run's) unless both are finite with
    a positive error, ``refit_khat ≤`` :data:`POOL_KHAT`, and the two agree: ``|log Ẑ_is −
    log Ẑ_run| ≤`` :data:`REFIT_SIGMA` combined errors ``+`` :data:`REFIT_FLOOR`. An
    importance estimate far above the run is the posterior refit check's business (a run
    that lost mass), one far below is the proposal's failure (a mode it misses): neither
    is averaged in.

    Parameters
    ----------
    log_z, mcse : float
        The run's estimate and its Monte Carlo standard error.
    refit_log_z, refit_mcse, refit_khat : float
        The importance estimate, its delta-method error and its weights' Pareto k̂.
    tail_factor : float, default 1.0
        Factor on ``refit_mcse²`` for the weights' tail.

    Returns
    -------
    (log_z, mcse) or None
    """
    vals = np.array([log_z, mcse, refit_log_z, refit_mcse, refit_khat, tail_factor], float)
    if not np.all(np.isfinite(vals)) or mcse <= 0 or refit_mcse <= 0:
        return None
    if refit_khat > POOL_KHAT:
        return None
    v_run, v_is = mcse**2, max(tail_factor, 1.0) * refit_mcse**2
    if abs(refit_log_z - log_z) > REFIT_SIGMA * np.sqrt(v_run + v_is) + REFIT_FLOOR:
        return None
    w_run, w_is = 1.0 / v_run, 1.0 / v_is
    top = max(log_z, refit_log_z)
    mean = w_run * np.exp(log_z - top) + w_is * np.exp(refit_log_z - top)
    return float(top + np.log(mean / (w_run + w_is))), float((w_run + w_is) ** -0.5)
