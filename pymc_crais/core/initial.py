"""Normalized initial distributions ``q0`` other than the prior, and the Laplace fit.

With a ``q0`` that is not the prior, the engine anneals ``Δ = log prior + ℓ − log q0``
(docs/algorithms.md, "Initial distributions"). A ``q0`` close to the posterior shortens
the path enormously.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from scipy import optimize, special

from .density import BatchedDensity, Evaluation

__all__ = [
    "GaussianInitial",
    "InitialReweightedDensity",
    "LaplaceFit",
    "StudentTInitial",
    "laplace_fit",
    "maximize_log_density",
]


def _cholesky_pd(cov: np.ndarray, name: str = "cov") -> np.ndarray:
    cov = np.asarray(cov, dtype=np.float64)
    if cov.ndim != 2 or cov.shape[0] != cov.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {cov.shape}")
    if not np.all(np.isfinite(cov)):
        raise ValueError(f"{name} must be finite")
    if not np.allclose(cov, cov.T, rtol=1e-8, atol=1e-12 * np.abs(cov).max()):
        raise ValueError(f"{name} must be symmetric")
    try:
        return np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        raise ValueError(f"{name} must be positive definite") from None


@dataclass(frozen=True)
class GaussianInitial:
    """``q0 = N(mean, cov)`` in the model's unconstrained coordinates.

    The inverse of the Cholesky factor is computed once, so that whitening a population
    (``z = L⁻¹ (x − mean)`` row by row) and the gradient (``Σ⁻¹ (x − mean) = L⁻ᵀ z``) are
    two matrix products: the annealing evaluates ``log q0`` and its gradient at every
    leapfrog step, and triangular solves cost 2–10× as much as the products (d = 3–60).
    """

    mean: np.ndarray
    cov: np.ndarray
    name: str = "gaussian"
    _chol: np.ndarray = field(default=None, repr=False)
    _chol_inv: np.ndarray = field(default=None, repr=False)

    def __post_init__(self):
        from scipy.linalg import solve_triangular

        mean = np.asarray(self.mean, dtype=np.float64).ravel()
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "cov", np.asarray(self.cov, dtype=np.float64))
        chol = _cholesky_pd(self.cov)
        if chol.shape[0] != mean.size:
            raise ValueError(f"mean has {mean.size} entries but cov is {self.cov.shape}")
        object.__setattr__(self, "_chol", chol)
        chol_inv = solve_triangular(chol, np.eye(mean.size), lower=True)
        object.__setattr__(self, "_chol_inv", chol_inv)

    @property
    def dim(self) -> int:
        """Dimension."""
        return self.mean.size

    def _whiten(self, x):
        return (x - self.mean) @ self._chol_inv.T

    def _log_det(self) -> float:
        return 2.0 * float(np.sum(np.log(np.diag(self._chol))))

    def _log_norm(self) -> float:
        return -0.5 * self._log_det() - 0.5 * self.dim * np.log(2 * np.pi)

    def _log_kernel(self, q: np.ndarray) -> np.ndarray:
        """Log-density as a function of the squared whitened distance ``q = |z|²``."""
        return -0.5 * q + self._log_norm()

    def _grad_factor(self, q: np.ndarray):
        """``−∇log q0 = factor · Σ⁻¹(x − mean)`` row by row: the factor given ``q`` (a
        scalar, or a column that broadcasts over the rows)."""
        return 1.0

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` exact draws."""
        return self.mean + rng.standard_normal((n, self.dim)) @ self._chol.T

    def logpdf(self, x: np.ndarray) -> np.ndarray:
        """Normalized log-density of every row of ``x``."""
        z = self._whiten(x)
        return self._log_kernel(np.sum(z * z, axis=1))

    def grad_logpdf(self, x: np.ndarray) -> np.ndarray:
        """Gradient of :meth:`logpdf`."""
        return self.logpdf_and_grad(x)[1]

    def logpdf_and_grad(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`logpdf` and :meth:`grad_logpdf` of every row of ``x``, whitening once."""
        z = self._whiten(x)
        q = np.sum(z * z, axis=1)
        return self._log_kernel(q), -self._grad_factor(q) * (z @ self._chol_inv)


@dataclass(frozen=True)
class StudentTInitial(GaussianInitial):
    """Multivariate Student-t with ``df`` degrees of freedom, location ``mean``, scale ``cov``.

    Heavier tails than the Gaussian keep the importance weights bounded when the Laplace
    covariance is too narrow somewhere.
    """

    df: float = 5.0
    name: str = "student_t"

    def __post_init__(self):
        super().__post_init__()
        if not (np.isfinite(self.df) and self.df > 0):
            raise ValueError(f"df must be positive, got {self.df}")

    def draw(self, rng, n):
        z = rng.standard_normal((n, self.dim)) @ self._chol.T
        w = rng.chisquare(self.df, size=n) / self.df
        return self.mean + z / np.sqrt(w)[:, None]

    def _log_norm(self) -> float:
        d, nu = self.dim, self.df
        return float(
            special.gammaln(0.5 * (nu + d))
            - special.gammaln(0.5 * nu)
            - 0.5 * d * np.log(nu * np.pi)
            - 0.5 * self._log_det()
        )

    def _log_kernel(self, q):
        return self._log_norm() - 0.5 * (self.df + self.dim) * np.log1p(q / self.df)

    def _grad_factor(self, q):
        return ((self.df + self.dim) / (self.df + q))[:, None]


@dataclass
class InitialReweightedDensity(BatchedDensity):
    """Anneal from another ``q0``: wraps a density whose evaluation is ``(log prior, ℓ)``.

    Returns ``log q0`` from ``initial`` and ``Δ = log prior + ℓ − log q0``; gradients alike.
    """

    base: BatchedDensity | None = None
    initial: GaussianInitial | None = None

    def for_chain(self) -> InitialReweightedDensity:
        base = self.base.for_chain()  # (a fresh wrapper: its n_evals restart at 0)
        return self if base is self.base else replace(self, base=base)

    def _base_and_initial(self, x, gradient):
        """``(base evaluation, log initial, ∇ log initial or None)`` at ``x``."""
        ev = self.base.evaluate(x, gradient=gradient)
        if gradient:
            return (ev, *self.initial.logpdf_and_grad(x))
        return ev, self.initial.logpdf(x), None

    def _evaluate(self, x, gradient):
        ev, lq, gq = self._base_and_initial(x, gradient)
        with np.errstate(invalid="ignore"):
            delta = ev.log_q0 + ev.delta - lq
        if not gradient:
            return Evaluation(lq, delta)
        return Evaluation(lq, delta, gq, ev.grad_log_q0 + ev.grad_delta - gq)


MAX_SLOPE = 1.0
"""A Laplace fit whose log-density still rises by more than this many nats over one
posterior standard deviation (:attr:`LaplaceFit.slope`) did not stop at a mode."""


def slope_problem(slope: float) -> str | None:
    """Why a fit with this :attr:`LaplaceFit.slope` is not at a mode, or None if it is."""
    if not slope > MAX_SLOPE:
        return None
    return (
        f"the optimizer stopped where the log-density still rises ({slope:.3g} nats per "
        "posterior standard deviation): not at a mode (a hard boundary of the support?)"
    )


@dataclass(frozen=True)
class LaplaceFit:
    """Mode and covariance (inverse negative Hessian) of ``log prior + ℓ``."""

    mode: np.ndarray
    cov: np.ndarray
    log_density_at_mode: float
    n_evals: int
    converged: bool
    n_nonconcave: int = 0  # Hessian eigenvalues floored: no interior mode in these directions
    slope: float = 0.0
    """``sqrt(gᵀ cov g)`` for the gradient ``g`` at ``mode``: how many nats the log-density
    still rises over one posterior standard deviation along it (0 at a stationary point;
    L-BFGS also stops where its line search cannot make progress, e.g. at a hard boundary
    of the support)."""

    def log_evidence(self) -> float:
        """The Laplace approximation of ``log Z`` (a cheap, biased reference)."""
        d = self.mode.size
        sign, logdet = np.linalg.slogdet(self.cov)
        return float(self.log_density_at_mode + 0.5 * d * np.log(2 * np.pi) + 0.5 * logdet)


def maximize_log_density(density: BatchedDensity, x0: np.ndarray, maxiter: int):
    """L-BFGS on ``log prior + ℓ`` from ``x0``: SciPy's result (``fun`` is minus the
    log-density)."""
    d = x0.size

    def neg(x):
        # a trial point may overflow (an infinite log-density is this function's 1e300);
        # errstate is per thread, and the mode search runs its L-BFGS runs in threads
        with np.errstate(all="ignore"):
            ev = density.evaluate(x[None, :], gradient=True)
            val = ev.log_q0[0] + ev.delta[0]
        if not np.isfinite(val):
            return 1e300, np.zeros(d)
        return -val, -(ev.grad_log_q0[0] + ev.grad_delta[0])

    return optimize.minimize(neg, x0, jac=True, method="L-BFGS-B", options={"maxiter": maxiter})


def laplace_fit(density: BatchedDensity, x0: np.ndarray, *, fd_step: float = 1e-4, maxiter: int = 2000) -> LaplaceFit:
    """Find the mode of ``log prior + ℓ`` by L-BFGS and its covariance from the Hessian.

    ``density`` must evaluate to ``(log prior, ℓ)`` with gradients (a :class:`ModelDensity`).
    The Hessian is the central finite difference of the batched gradient: all ``2d``
    perturbed points in one call.

    Parameters
    ----------
    density : BatchedDensity
    x0 : numpy.ndarray, shape (d,)
        Starting point (e.g. the model's initial point).
    fd_step : float, default 1e-4
        Relative finite-difference step for the Hessian.
    maxiter : int, default 2000

    Returns
    -------
    LaplaceFit
    """
    before = density.n_evals
    x0 = np.asarray(x0, dtype=np.float64).ravel()
    d = x0.size
    res = maximize_log_density(density, x0, maxiter)
    mode = res.x
    h = fd_step * np.maximum(1.0, np.abs(mode))
    pts = np.concatenate([mode + np.diag(h), mode - np.diag(h)])
    ev = density.evaluate(pts, gradient=True)
    g = ev.grad_log_q0 + ev.grad_delta
    hess = (g[:d] - g[d:]) / (2.0 * h[:, None])
    hess = 0.5 * (hess + hess.T)
    w, v = np.linalg.eigh(-hess)
    if not np.all(np.isfinite(w)):
        raise FloatingPointError("the Hessian at the mode is not finite; use init='prior'")
    floor = 1e-8 * max(float(np.max(np.abs(w))), 1e-300)
    n_nonconcave = int(np.sum(w < floor))
    w = np.maximum(w, floor)  # a flat or non-concave direction gets a wide variance
    cov = (v / w) @ v.T
    cov = 0.5 * (cov + cov.T)
    g_mode = -np.asarray(res.jac, dtype=np.float64)  # the log-density's gradient at the mode
    slope = np.inf
    if np.all(np.isfinite(g_mode)):
        slope = float(np.sqrt(max(g_mode @ cov @ g_mode, 0.0)))
    return LaplaceFit(
        mode,
        cov,
        float(-res.fun),
        int(density.n_evals - before),
        bool(res.success),
        n_nonconcave,
        slope,
    )
