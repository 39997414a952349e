"""Importance sampling from a Student-t fitted to a run's own posterior draws.

An annealing run ends with (approximately) equal-weight draws of the posterior. A
multivariate Student-t at their mean and covariance is a proposal that shares nothing with
the run's path: importance sampling from it gives a second, independent estimate of
``log Z``. Where its weights have a light tail (Pareto k̂ ≤ 0.7, computed by the caller),
that estimate is trustworthy, and a run whose ``log Ẑ`` lies well below it lost mass on
its way (a start at a funnel's neck that the annealing never left). The same Student-t is
then a start close to the posterior for a second run.
"""

from __future__ import annotations

import numpy as np

from .density import BatchedDensity
from .initial import StudentTInitial
from .weights import clean_log_weights, log_mean_exp, log_z_relative_variance

__all__ = ["ImportanceEstimate", "importance_estimate", "student_t_from_draws"]


def student_t_from_draws(x, *, scale: float = 1.2, df: float = 5.0) -> StudentTInitial | None:
    """A Student-t at the mean and covariance of the draws ``x`` (rows), its covariance
    times ``scale²``; ``None`` when the draws give no finite positive-definite covariance
    (fewer rows than ``d + 1``, a coordinate that did not vary, non-finite draws).

    Parameters
    ----------
    x : numpy.ndarray, shape (n, d)
        Posterior draws (equal weights).
    scale : float, default 1.2
        Factor on the standard deviations (a proposal a little wider than the draws).
    df : float, default 5.0
        Degrees of freedom.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] <= x.shape[1] or not np.all(np.isfinite(x)):
        return None
    cov = np.atleast_2d(np.cov(x, rowvar=False))
    try:
        return StudentTInitial(x.mean(axis=0), cov * scale**2, df=df)
    except ValueError:  # not positive definite
        return None


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
