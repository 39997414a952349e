"""The conditional-Laplace start: a proposal for latent-Gaussian models, with exact weights.

Many models people write have a few hyperparameters ``θ`` (scales, a correlation, a length
scale) and a large latent block ``x`` (random effects, the states of a random walk, a GP's
values, regression coefficients) whose conditional posterior ``p(x | θ, y)`` is Gaussian or
nearly so. The joint posterior is a funnel, which neither a single Student-t nor the prior
describes; the two-level proposal

    q(θ, x) = t_ν(θ; θ̂, S) · N(x; m(θ), P(θ)⁻¹)

does. Here ``m(θ)`` is the mode of ``x ↦ log p(θ, x, y)`` found by Newton's method from a
fixed point (:func:`latent_newton`) and ``P(θ)`` the negative Hessian there, both
deterministic functions of ``θ``; ``θ̂`` maximizes the Laplace approximation of the
marginal ``log p(θ, y) ≈ log p(θ, m, y) + (d_x/2) log 2π − ½ log |P|``, exact when
``x | θ`` is Gaussian, and ``S`` is its inverse negative Hessian (:func:`fit_hyper`).

Whatever the quality of ``m`` and ``P`` (a Newton run that did not converge, a Hessian
that had to be damped), ``q`` is a proper density evaluated exactly at its own draws, so
the importance weights ``p(θ, x, y) / q(θ, x)`` are exact and ``log Ẑ`` is unbiased on the
natural scale. Where ``x | θ`` is exactly Gaussian (linear-Gaussian state space, Gaussian
random effects, a Gaussian regression) the weights depend on ``θ`` alone and only the
low-dimensional ``t_ν`` has to fit.

The Hessian is a forward finite difference of the batched gradient (``d_x + 1`` points per
``θ`` in one call, ``c + 1`` for a sparse one whose columns take ``c`` colours:
:mod:`~pymc_crais.core.latent_hessian`), exact up to rounding for a quadratic ``log p``. Each ``θ``
draw gets ``copies`` draws of ``x`` (one Newton run serves them all); the copies share a
*family* (:class:`WeightedStart`), so the ancestry variance of ``log Ẑ`` counts each ``θ``
once.

The module knows nothing of PyMC: the density is a :class:`~pymc_crais.core.density.BatchedDensity`
over ``R^d`` and the blocks are index arrays into its coordinates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize
from scipy.linalg import solve_triangular

from .density import BatchedDensity
from .families import family_size
from .initial import StudentTInitial
from .latent_hessian import LatentSparsity, hessian_from_gradients, joined_hessian_points
from .mode_mixture import StudentTMixture

__all__ = [
    "Blocks",
    "ConditionalLaplace",
    "HyperFit",
    "LatentFit",
    "WeightedStart",
    "fit_hyper",
    "laplace_marginal",
    "latent_newton",
]

LOG_2PI = float(np.log(2.0 * np.pi))


@dataclass(frozen=True)
class Blocks:
    """Which coordinates of ``R^d`` are hyperparameters and which are latent."""

    hyper: np.ndarray
    latent: np.ndarray

    def __post_init__(self):
        h, x = np.asarray(self.hyper, dtype=int), np.asarray(self.latent, dtype=int)
        if not np.array_equal(np.sort(np.concatenate([h, x])), np.arange(h.size + x.size)):
            raise ValueError(
                "hyper and latent must split the coordinates 0..d-1, each in one block"
            )
        object.__setattr__(self, "hyper", h)
        object.__setattr__(self, "latent", x)

    @property
    def dim(self) -> int:
        """``d``."""
        return int(self.hyper.size + self.latent.size)

    def join(self, theta: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Points of ``R^d`` from ``θ`` rows and ``x`` rows (leading shapes must match)."""
        out = np.empty((*x.shape[:-1], self.dim))
        out[..., self.hyper] = theta
        out[..., self.latent] = x
        return out


@dataclass(frozen=True)
class WeightedStart:
    """Initial particles with their proposal's exact log-density.

    Attributes
    ----------
    x : numpy.ndarray, shape (N, d)
    log_q0 : numpy.ndarray, shape (N,)
        ``log q(x)`` of the proposal the rows were drawn from.
    family : numpy.ndarray of int, shape (N,)
        Rows drawn together (sharing a hyperparameter draw) share a family, in ``0..N-1``.
    n_evals : int
        Model evaluations spent drawing them.
    """

    x: np.ndarray
    log_q0: np.ndarray
    family: np.ndarray
    n_evals: int = 0


def _log_density_and_grad(density: BatchedDensity, points: np.ndarray, latent: np.ndarray):
    """``log p`` of the groups of ``points`` ``(M, k, d)`` (each sharing its ``θ``) and its
    gradient in the ``latent`` coordinates."""
    ev = density.evaluate_grouped(points, latent)
    with np.errstate(invalid="ignore"):
        return ev.log_q0 + ev.delta, ev.grad_log_q0 + ev.grad_delta


def _damped_cholesky(h: np.ndarray) -> np.ndarray:
    """Cholesky factors of the symmetric ``h`` rows ``(M, n, n)``; a row that is not
    positive definite (or not finite) is damped, ``h + λ I`` with ``λ`` growing from
    ``1e-6 · max(mean |diag|, 1)``, and replaced by the identity if that never works."""
    m, n, _ = h.shape
    h = np.where(np.isfinite(h), h, 0.0)
    try:
        return np.linalg.cholesky(h)
    except np.linalg.LinAlgError:
        pass
    out = np.empty_like(h)
    eye = np.eye(n)
    for i in range(m):  # only when some row failed
        lam = 1e-6 * max(float(np.mean(np.abs(np.diag(h[i])))), 1.0)
        for attempt in range(30):
            try:
                out[i] = np.linalg.cholesky(h[i] + (lam if attempt else 0.0) * eye)
                break
            except np.linalg.LinAlgError:
                lam *= 10.0
        else:
            out[i] = eye
    return out


@dataclass(frozen=True)
class LatentFit:
    """Per row: ``m(θ)``, the Cholesky factor ``L`` of ``P(θ) = L Lᵀ``, ``log p(θ, m, y)``."""

    x: np.ndarray
    chol: np.ndarray
    log_density: np.ndarray
    n_iter: int

    @property
    def log_det_precision(self) -> np.ndarray:
        return 2.0 * np.sum(np.log(np.diagonal(self.chol, axis1=1, axis2=2)), axis=1)


def latent_newton(
    density: BatchedDensity,
    blocks: Blocks,
    theta: np.ndarray,
    x: np.ndarray,
    *,
    max_iter: int = 20,
    tol: float = 1e-6,
    fd_step: float = 1e-4,
    sparsity: LatentSparsity | None = None,
) -> LatentFit:
    """Newton's method on ``x ↦ log p(θ_i, x, y)`` for every row ``i`` at once.

    Each iteration evaluates the gradient at ``x`` and at ``x + h_j e_j`` for every latent
    coordinate ``j`` (one batched call of ``M (d_x + 1)`` points), takes the Newton step
    (damped where the Hessian is not negative definite) and halves it until the
    log-density does not fall. A row stops when its step, or the gradient where the step
    landed, is below ``tol`` in its own metric (``√(sᵀ P s)``, ``√(gᵀ P⁻¹ g)``); for a
    quadratic ``log p`` that is after the first step, one Hessian in all. The returned
    precision is the one measured at the start of the last iteration.

    Parameters
    ----------
    density : BatchedDensity
        ``(log prior, ℓ)`` with gradients.
    blocks : Blocks
    theta : numpy.ndarray, shape (M, d_θ)
    x : numpy.ndarray, shape (M, d_x)
        Starting points.
    max_iter : int, default 20
    tol : float, default 1e-6
    fd_step : float, default 1e-4
        Relative finite-difference step of the Hessian.
    sparsity : LatentSparsity, optional
        The Hessian's pattern and column colouring (:mod:`~pymc_crais.core.latent_hessian`):
        ``c + 1`` points a row instead of ``d_x + 1``.

    Returns
    -------
    LatentFit
    """
    theta = np.atleast_2d(np.asarray(theta, dtype=np.float64))
    x = np.array(x, dtype=np.float64)
    m, dx = x.shape
    active = np.ones(m, dtype=bool)
    chol = np.empty((m, dx, dx))
    lp_at = np.full(m, -np.inf)
    it = 0
    for it in range(1, max_iter + 1):
        rows = np.flatnonzero(active)
        xa, ta = x[rows], theta[rows]
        h = fd_step * np.maximum(1.0, np.abs(xa))
        full = joined_hessian_points(blocks, ta, xa, h, sparsity)
        with np.errstate(all="ignore"):
            lp, g = _log_density_and_grad(density, full, blocks.latent)
            lp0, g0 = lp[:, 0], g[:, 0]
            hess = -hessian_from_gradients(g, h, sparsity)
        g0 = np.where(np.isfinite(g0), g0, 0.0)
        c = _damped_cholesky(hess)
        chol[rows], lp_at[rows] = c, lp0
        y = solve_triangular_batch(c, g0, lower=True)
        step = solve_triangular_batch(np.swapaxes(c, 1, 2), y, lower=False)
        size = np.sqrt(np.sum(y * y, axis=1))
        done = (size < tol) | ~np.isfinite(lp0)
        move = ~done
        t = np.ones(rows.size)
        for _ in range(20):  # backtracking: a step may not lower the log-density
            if not move.any():
                break
            trial = xa[move] + t[move, None] * step[move]
            with np.errstate(all="ignore"):
                lt, gt = _log_density_and_grad(
                    density, blocks.join(ta[move], trial)[:, None], blocks.latent
                )
                lt, gt = lt[:, 0], gt[:, 0]
            ok = np.isfinite(lt) & (lt >= lp0[move] - 1e-10 * np.abs(lp0[move]))
            sel = np.flatnonzero(move)
            x[rows[sel[ok]]] = trial[ok]
            lp_at[rows[sel[ok]]] = lt[ok]
            # a full step that lands where the gradient vanishes (in the metric just measured)
            # ends the row without another Hessian: for a quadratic that is the first step
            g_new = np.where(np.isfinite(gt[ok]), gt[ok], np.inf)
            y_new = solve_triangular_batch(c[sel[ok]], g_new, lower=True)
            done[sel[ok]] = np.sqrt(np.sum(y_new * y_new, axis=1)) < tol
            move[sel[ok]] = False
            t[move] *= 0.5
        active[rows[done | (t < 2.0**-19)]] = False
        if not active.any():
            break
    return LatentFit(x, chol, lp_at, it)


def solve_triangular_batch(c: np.ndarray, b: np.ndarray, *, lower: bool) -> np.ndarray:
    """``c[i]⁻¹ b[i]`` for triangular ``c`` rows ``(M, n, n)`` and ``b`` rows ``(M, n)``."""
    out = np.empty_like(b)
    for i in range(b.shape[0]):
        out[i] = solve_triangular(c[i], b[i], lower=lower, check_finite=False)
    return out


def laplace_marginal(
    density, blocks: Blocks, theta, x_start, **newton
) -> tuple[np.ndarray, LatentFit]:
    """The Laplace approximation of ``log p(θ_i, y)`` for every row of ``theta``, with the
    :class:`LatentFit` behind it (``x_start``: one starting point for every row)."""
    theta = np.atleast_2d(theta)
    x0 = np.repeat(np.asarray(x_start, dtype=np.float64)[None], theta.shape[0], axis=0)
    fit = latent_newton(density, blocks, theta, x0, **newton)
    dx = blocks.latent.size
    with np.errstate(invalid="ignore"):
        value = fit.log_density + 0.5 * dx * LOG_2PI - 0.5 * fit.log_det_precision
    return np.where(np.isfinite(value), value, -np.inf), fit


@dataclass(frozen=True)
class HyperFit:
    """The hyperparameters' Laplace-marginal mode ``θ̂``, covariance ``S``, the latent mode
    at ``θ̂`` (every later Newton run starts there) and the evaluations spent."""

    mode: np.ndarray
    cov: np.ndarray
    x_at_mode: np.ndarray
    n_evals: int
    problem: str | None = None


def fit_hyper(
    density, blocks: Blocks, theta0, x0, *, maxfev: int | None = None, fd_step: float = 1e-3,
    sparsity: LatentSparsity | None = None,
) -> HyperFit:
    """Maximize the Laplace marginal over ``θ`` (Nelder–Mead, each evaluation warm-started
    at the previous latent mode) and take its covariance from a central-difference Hessian
    (all ``2 d_θ² + 1`` points in one batched Newton run). ``problem`` says why the fit is
    unusable (no finite marginal, a Hessian that is not negative definite)."""
    before = density.n_evals
    theta0 = np.asarray(theta0, dtype=np.float64).ravel()
    dt = theta0.size
    warm = {"x": np.asarray(x0, dtype=np.float64).ravel()}

    def neg(th):
        v, fit = laplace_marginal(density, blocks, th[None], warm["x"], sparsity=sparsity)
        if not np.isfinite(v[0]):
            return 1e300
        warm["x"] = fit.x[0]
        return -float(v[0])

    if not np.isfinite(neg(theta0)):
        return HyperFit(theta0, np.eye(dt), warm["x"], int(density.n_evals - before),
                        "the Laplace marginal is not finite at the initial point")  # fmt: skip
    res = optimize.minimize(
        neg, theta0, method="Nelder-Mead",
        options={"xatol": 1e-4, "fatol": 1e-6, "maxfev": maxfev or 200 * max(dt, 1)},
    )  # fmt: skip
    mode = res.x
    neg(mode)  # the latent mode at θ̂: where every later Newton run starts
    e = np.eye(dt) * fd_step
    pts = [mode]
    for i in range(dt):
        for j in range(dt):
            pts += [mode + e[i] + e[j], mode + e[i] - e[j], mode - e[i] + e[j], mode - e[i] - e[j]]
    v, _ = laplace_marginal(density, blocks, np.array(pts), warm["x"], sparsity=sparsity)
    hess = np.empty((dt, dt))
    k = 1
    for i in range(dt):
        for j in range(dt):
            hess[i, j] = (v[k] - v[k + 1] - v[k + 2] + v[k + 3]) / (4.0 * fd_step**2)
            k += 4
    hess = 0.5 * (hess + hess.T)
    n = int(density.n_evals - before)
    problem = None
    if not np.all(np.isfinite(hess)):
        problem = "the Laplace marginal's Hessian is not finite"
    elif np.any(np.linalg.eigvalsh(-hess) <= 0):
        problem = "the Laplace marginal has no interior mode (its Hessian is not negative definite)"
    if problem:
        return HyperFit(mode, np.eye(dt), warm["x"], n, problem)
    return HyperFit(mode, np.linalg.inv(-hess), warm["x"], n)


@dataclass(frozen=True)
class ConditionalLaplace:
    """The proposal ``t_ν(θ) · N(x; m(θ), P(θ)⁻¹)`` (module docstring): ``theta`` is the
    Student-t over the hyperparameters, ``x_start`` where every Newton run starts,
    ``copies`` the draws of ``x`` per draw of ``θ`` and ``sparsity`` the latent Hessian's."""

    blocks: Blocks
    theta: StudentTInitial | StudentTMixture
    x_start: np.ndarray
    copies: int = 4
    max_iter: int = 20
    sparsity: LatentSparsity | None = None
    max_floats: int = 2**24
    """The Newton runs go in chunks of ``θ`` rows whose Hessian points (``rows · (c + 1) · d``)
    and the 8 or so ``rows · d_x²`` arrays of a Newton step each hold at most this many floats."""

    def draw(self, rng: np.random.Generator, n: int, density: BatchedDensity) -> WeightedStart:
        """``n`` draws with their exact ``log q``: ``n / c`` draws of ``θ`` with ``c``
        copies each, ``c`` the largest divisor of ``n`` up to ``copies`` (equal families)."""
        before = density.n_evals
        n = int(n)
        copies = family_size(n, self.copies)
        n_theta = n // copies
        theta = self.theta.draw(rng, n_theta)
        dx = self.blocks.latent.size
        z = rng.standard_normal((n_theta, copies, dx))  # (the Newton runs draw nothing)
        k = dx if self.sparsity is None else self.sparsity.n_colors
        chunk = max(1, self.max_floats // max((k + 1) * self.blocks.dim, 8 * dx * dx))
        x, log_det = np.empty_like(z), np.empty(n_theta)
        for i in range(0, n_theta, chunk):  # the factors of one chunk at a time
            rows = slice(i, i + chunk)
            x0 = np.repeat(self.x_start[None], len(theta[rows]), axis=0)
            fit = latent_newton(density, self.blocks, theta[rows], x0, max_iter=self.max_iter,
                                sparsity=self.sparsity)  # fmt: skip
            lt = np.swapaxes(fit.chol, 1, 2)
            for j in range(lt.shape[0]):  # x = m + L^{-T} z: covariance (L Lᵀ)^{-1}
                x[i + j] = solve_triangular(lt[j], z[i + j].T, lower=False, check_finite=False).T
            x[rows] += fit.x[:, None, :]
            log_det[rows] = fit.log_det_precision
        log_n = -0.5 * dx * LOG_2PI + 0.5 * log_det[:, None]
        log_n = log_n - 0.5 * np.sum(z * z, axis=2)
        log_q = self.theta.logpdf(theta)[:, None] + log_n
        points = self.blocks.join(np.repeat(theta[:, None, :], copies, axis=1), x)
        family = np.repeat(np.arange(n_theta), copies)
        n_evals = int(density.n_evals - before)
        return WeightedStart(points.reshape(-1, self.blocks.dim), log_q.ravel(), family, n_evals)
