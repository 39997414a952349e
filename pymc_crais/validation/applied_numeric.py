"""Numerics of the applied tier's references (``applied_models``): the log prior densities
of log-transformed scales, Gaussian marginal likelihoods (per-group Sherman–Morrison and
Woodbury, a Kalman filter, a dense Cholesky), composite Gauss–Legendre quadrature over a box
grown until the integrand has decayed, and :func:`model_integrand`, which integrates a PyMC
model's Gaussian coordinates out exactly. No sampler of the package is used."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import linalg, optimize, special

__all__ = [
    "GaussianSpec", "ISSpec", "dense_mvn", "design_cov", "gamma_u", "grid_log_integral",
    "grow_box", "halfnormal_u", "kalman_ar1", "laplace_k", "model_integrand",
    "oneway_marginal", "panel_nodes", "slopes_marginal",
]  # fmt: skip

LOG2PI = np.log(2 * np.pi)


# ----------------------------------------------------------------------------- priors in u


def halfnormal_u(u, s):
    """log density of ``log X`` for ``X ~ HalfNormal(s)`` (the prior times the Jacobian)."""
    x = np.exp(u)
    return 0.5 * np.log(2 / np.pi) - np.log(s) - 0.5 * (x / s) ** 2 + u


def gamma_u(u, a, b):
    """log density of ``log X`` for ``X ~ Gamma(a, rate b)``, exact for any ``u``."""
    return a * np.log(b) - special.gammaln(a) + a * u - b * np.exp(u)


# ----------------------------------------------------------------------------- marginals


def oneway_marginal(y, g, J, tau, sigma, m0, s0):
    """log p(y | τ, σ) for ``y = μ + a[g] + e``, ``a ~ N(0, τ²)``, ``e ~ N(0, σ²)``,
    ``μ ~ N(m0, s0²)`` integrated out; per-group Sherman–Morrison, vectorized over the
    broadcast shape of ``tau`` and ``sigma``."""
    tau, sigma = np.broadcast_arrays(np.asarray(tau, float), np.asarray(sigma, float))
    nj = np.bincount(g, minlength=J).astype(float)
    S = np.bincount(g, weights=y, minlength=J)
    SS = np.bincount(g, weights=y * y, minlength=J)
    t2, s2 = tau[..., None] ** 2, sigma[..., None] ** 2
    c = t2 / (s2 + nj * t2)
    logdet = ((nj - 1) * np.log(s2) + np.log(s2 + nj * t2)).sum(-1)
    A = ((nj - c * nj**2) / s2).sum(-1)
    B = ((S - c * nj * S) / s2).sum(-1)
    C = ((SS - c * S**2) / s2).sum(-1)
    P = A + 1 / s0**2
    quad = C + m0**2 / s0**2 - (B + m0 / s0**2) ** 2 / P
    return -0.5 * y.size * LOG2PI - 0.5 * logdet - 0.5 * np.log(s0**2 * P) - 0.5 * quad


def slopes_marginal(y, x, g, J, ta, tb, sigma, s0):
    """log p(y | τ_a, τ_b, σ) for ``y = (α + a[g]) + (β + b[g]) x + e`` with ``a ~ N(0, τ_a²)``,
    ``b ~ N(0, τ_b²)``, ``α, β ~ N(0, s0²)`` integrated out (per-group Woodbury, 2×2)."""
    ta, tb, sigma = np.broadcast_arrays(*(np.asarray(v, float) for v in (ta, tb, sigma)))
    shape = ta.shape
    ta, tb, sigma = ta.ravel(), tb.ravel(), sigma.ravel()
    X = np.stack([np.ones_like(x), x], 1)
    G = np.zeros((J, 2, 2))
    h = np.zeros((J, 2))
    np.add.at(G, g, X[:, :, None] * X[:, None, :])
    np.add.at(h, g, X * y[:, None])
    nj = np.bincount(g, minlength=J).astype(float)
    yy = np.bincount(g, weights=y * y, minlength=J)
    s2 = sigma[:, None, None, None] ** 2  # (m, 1, 1, 1)
    Dinv = np.zeros((ta.size, 1, 2, 2))
    Dinv[:, 0, 0, 0], Dinv[:, 0, 1, 1] = ta**-2, tb**-2
    M = s2 * Dinv + G  # (m, J, 2, 2)
    Minv = np.linalg.inv(M)
    GMG = G - G @ Minv @ G
    XSX = (GMG / s2).sum(1)  # (m, 2, 2)
    XSy = ((h - np.einsum("mjab,jb->mja", G @ Minv, h)) / s2[..., 0]).sum(1)
    ySy = ((yy - np.einsum("ja,mjab,jb->mj", h, Minv, h)) / s2[:, :, 0, 0]).sum(1)
    # log det(σ²I + X D Xᵀ) = n log σ² + log det(I + D G / σ²) = (n − 2) log σ² + logdet(M) + log det D
    logdet = ((nj - 2) * np.log(s2[:, :, 0, 0]) + np.linalg.slogdet(M)[1]).sum(1) + J * (
        2 * np.log(ta) + 2 * np.log(tb)
    )
    P = XSX + np.eye(2) / s0**2
    Pinv_b = np.linalg.solve(P, XSy[..., None])[..., 0]
    out = (
        -0.5 * y.size * LOG2PI
        - 0.5 * logdet
        - 0.5 * np.linalg.slogdet(s0**2 * P)[1]
        - 0.5 * (ySy - np.einsum("ma,ma->m", XSy, Pinv_b))
    )
    return out.reshape(shape)


def kalman_ar1(y, rho, q, r, m0, p0):
    """log p(y) for ``x_0 ~ N(m0, p0)``, ``x_t = ρ x_{t-1} + N(0, q)``, ``y_t = x_t + N(0, r)``
    (``ρ = 1``: a local level), by the Kalman filter, vectorized over the parameters."""
    rho, q, r = np.broadcast_arrays(*(np.asarray(v, float) for v in (rho, q, r)))
    m = np.full(rho.shape, float(m0))
    P = np.full(rho.shape, float(p0))
    ll = np.zeros(rho.shape)
    for t, yt in enumerate(y):
        if t > 0:
            m, P = rho * m, rho**2 * P + q
        S = P + r
        v = yt - m
        ll += -0.5 * (LOG2PI + np.log(S) + v * v / S)
        K = P / S
        m, P = m + K * v, (1 - K) * P
    return ll


def dense_mvn(y, mean, cov):
    """log N(y; mean, cov) for a batch of covariances ``(m, n, n)`` by Cholesky."""
    out = np.empty(cov.shape[0])
    for i, c in enumerate(cov):
        try:
            L = linalg.cholesky(c, lower=True, check_finite=False)
        except np.linalg.LinAlgError:  # numerically singular: far out in a tail (counted)
            out[i] = -np.inf
            continue
        z = linalg.solve_triangular(L, y - mean, lower=True, check_finite=False)
        out[i] = -0.5 * (y.size * LOG2PI + 2 * np.log(np.diag(L)).sum() + z @ z)
    return out



# ----------------------------------------------------------------------------- specs


@dataclass
class GaussianSpec:
    """A linear-Gaussian model reduced to ``k`` hyperparameters (see the module docstring).

    ``fast(U)`` and ``dense(U)`` give the log integrand (log marginal likelihood + log prior
    density of the unconstrained hyperparameters, Jacobian included) for ``U`` of shape
    ``(m, k)``, two independent ways; ``hyper`` names the PyMC value variables of ``U``'s
    columns, in order.
    """

    name: str
    model: object  # () -> pymc.Model
    hyper: list
    fast: object
    dense: object
    lo: list = field(default_factory=list)  # optional fixed box (per dim), else grown
    hi: list = field(default_factory=list)
    nodes: int = 0  # quadrature nodes per dim (0: by k)
    n_is: int = 4000
    is_df: float = 4.0  # way 2's Student-t: degrees of freedom and scale on the Laplace fit
    is_scale: float = 1.5


@dataclass
class ISSpec:
    """A model whose reference is importance sampling on its own joint density."""

    name: str
    model: object
    n_is: int = 200_000
    relabel: object = None  # bl -> (d, d) permutation of a label swap (mixtures)
    x0: object = None  # bl -> start of the Laplace fit (default: the model's initial point)
    scale1: float = 1.2  # way 1's scale on the Laplace covariance
    ref_model: object = None  # an equivalent parameterization the references integrate
    quadrature: bool = False  # way 1: quadrature of the joint density (d <= 3)
    conditional: str | None = None  # a scale whose conditional posterior is log-concave


def design_cov(blocks, noise_var):
    """Dense covariances ``noise·I + Σ v_k Z_k Z_kᵀ`` for each row of hyperparameters."""
    out = np.einsum("m,ij->mij", noise_var, np.eye(blocks[0][0].shape[0]))
    for Z, v in blocks:
        out += np.einsum("m,ij->mij", v, Z @ Z.T)
    return out



# ----------------------------------------------------------------------------- references


def laplace_k(f, k, x0=None):
    """Mode and inverse negative Hessian of a low-dimensional log integrand ``f`` ((m, k))."""
    x0 = np.zeros(k) if x0 is None else x0
    res = optimize.minimize(lambda x: -f(x[None])[0], x0, method="Nelder-Mead",
                            options={"xatol": 1e-9, "fatol": 1e-11, "maxiter": 20000})  # fmt: skip
    res = optimize.minimize(lambda x: -f(x[None])[0], res.x, method="BFGS")
    x = res.x
    h = 1e-3
    H = np.empty((k, k))
    for i in range(k):
        for j in range(k):
            ei, ej = np.eye(k)[i] * h, np.eye(k)[j] * h
            pts = np.stack([x + ei + ej, x + ei - ej, x - ei + ej, x - ei - ej])
            v = f(pts)
            H[i, j] = -(v[0] - v[1] - v[2] + v[3]) / (4 * h * h)
    cov = np.linalg.inv(0.5 * (H + H.T))
    return x, 0.5 * (cov + cov.T)


def panel_nodes(lo, hi, mode, sd, per_panel):
    """Composite Gauss–Legendre nodes and log weights on ``[lo, hi]``: panels one ``sd``
    wide within 4 sd of ``mode``, then widening by 1.6× a panel towards the ends."""
    cuts = [mode]
    for direction, end in ((1, hi), (-1, lo)):
        x, w = mode, sd
        for i in range(10_000):
            if i >= 4:
                w *= 1.6
            x = x + direction * w
            if direction * (x - end) >= 0:
                cuts.append(end)
                break
            cuts.append(x)
    cuts = np.unique(np.clip(cuts, lo, hi))
    z, wz = np.polynomial.legendre.leggauss(per_panel)
    a, b = cuts[:-1, None], cuts[1:, None]
    nodes = (0.5 * (b - a) * z + 0.5 * (b + a)).ravel()
    logw = np.log(0.5 * (b - a) * wz).ravel()
    return nodes, logw


def grid_log_integral(f, lo, hi, mode, sd, per_panel, chunk=20_000):
    """log ∫ exp f over the box by a tensor product of composite Gauss–Legendre rules."""
    rules = [panel_nodes(lo[i], hi[i], mode[i], sd[i], per_panel) for i in range(len(lo))]
    P = np.stack(np.meshgrid(*[r[0] for r in rules], indexing="ij"), -1).reshape(-1, len(lo))
    LW = sum(np.meshgrid(*[r[1] for r in rules], indexing="ij")).ravel()
    vals = np.concatenate([f(P[i : i + chunk]) for i in range(0, len(P), chunk)])
    return float(special.logsumexp(vals + LW)), len(P)


def grow_box(f, mode, sd, drop=40.0, lo=None, hi=None):
    """A box around ``mode`` whose faces lie ``drop`` nats below the maximum (probed on a
    coarse grid of each face), starting at ±6 sd and growing by 1.5 sd steps."""
    k = mode.size
    fmax = float(f(mode[None])[0])
    lo = np.array(lo if lo else mode - 6 * sd, float)
    hi = np.array(hi if hi else mode + 6 * sd, float)
    for _ in range(200):
        grew = False
        for i in range(k):
            for side, arr in ((0, lo), (1, hi)):
                axes = [np.linspace(lo[j], hi[j], 21) for j in range(k)]
                axes[i] = np.array([arr[i]])
                P = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, k)
                if np.max(f(P)) > fmax - drop:
                    arr[i] += (1 if side else -1) * 1.5 * sd[i]
                    grew = True
        if not grew:
            return lo, hi
    raise RuntimeError("the integrand does not decay: no finite box found")



def model_integrand(model, hyper: list, U: np.ndarray) -> np.ndarray:
    """log ∫ p(y, x, u) dx on the PyMC model itself, at each row of ``U`` (values of the
    value variables ``hyper``), where ``x`` are all other coordinates: the model's log
    density is quadratic in them, so the integral is exact from its mode and Hessian (found
    by one Newton step from zero with a finite-difference Hessian, exact for a quadratic)."""
    from .numeric import batched_logp

    bl = batched_logp(model)
    sizes = [int(np.prod(s, dtype=int)) for s in bl.shapes]
    starts = np.cumsum([0, *sizes])
    hidx = np.concatenate([np.arange(starts[bl.names.index(h)], starts[bl.names.index(h) + 1])
                           for h in hyper])  # fmt: skip
    lidx = np.setdiff1d(np.arange(bl.d), hidx)
    out = []
    for u in np.atleast_2d(U):
        x = np.zeros(bl.d)
        x[hidx] = u

        def grad(xl):
            full = x.copy()
            full[lidx] = xl
            return np.asarray(bl.dlogp(full))[lidx]

        m = lidx.size
        g0 = grad(np.zeros(m))
        H = np.empty((m, m))
        for j in range(m):
            e = np.zeros(m)
            e[j] = 1.0
            H[:, j] = (grad(e) - grad(-e)) / 2.0
        H = 0.5 * (H + H.T)
        xl = -np.linalg.solve(H, g0)
        full = x.copy()
        full[lidx] = xl
        lp = float(bl.logp(full[None])[0])
        out.append(lp + 0.5 * m * LOG2PI - 0.5 * np.linalg.slogdet(-H)[1])
    return np.array(out)


