"""The applied tier of the validation suite: models written as PyMC users write them.

Coordinates and dims, ``pm.Data``, centred random effects, ``pm.GaussianRandomWalk``,
``pm.AR``, ``pm.gp.Latent``, vague BUGS-style precisions... on data generated here with a
fixed seed. Each model's reference ``log Z`` is computed without SMC or AIS, two
independent ways, by :func:`reference` (``benchmarks/references/compute_applied.py`` stores
the results, both ways and their difference, in ``pymc_crais/data/applied_references.json``).

Linear-Gaussian models (:class:`GaussianSpec`): the Gaussian parameters (fixed and random
effects, latent states, a latent GP) are integrated out analytically, leaving a log
integrand over the ``k ≤ 3`` remaining hyperparameters, written in the PyMC model's own
unconstrained coordinates (``log σ``, ``log τ``...), prior density and Jacobian included.

* Way 1: tensor-product Gauss–Legendre quadrature of that integrand over a box grown until
  the integrand on its faces is 40 nats below its maximum, with a structured marginal
  (per-group Sherman–Morrison / Woodbury, a Kalman filter, an eigendecomposition); run
  again with 1.5× the nodes, the difference is the stated quadrature error.
* Way 2: importance sampling over the same hyperparameters from a Student-t at the
  integrand's Laplace fit, with the marginal computed from the dense covariance matrix of
  all observations (a Cholesky factorization; no shared code with way 1's marginal).

``tests/test_applied.py`` also checks each model against its integrand: with the
hyperparameters fixed, the PyMC model's log density is quadratic in the other coordinates,
so integrating it exactly (its mode and Hessian) must give way 1's integrand.

Models with a non-Gaussian likelihood (:class:`ISSpec`): importance sampling on the PyMC
model's own joint density (:func:`pymc_crais.validation.numeric.batched_logp`) two ways,
from two different proposals with different seeds.

Every factory returns ``(model, None, None, None)``: the reference is read from the stored
file by :meth:`pymc_crais.validation.cases.Case.build`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

import numpy as np
from scipy import linalg, optimize, special, stats

from .numeric import _logmeanexp_with_mcse, pareto_khat

__all__ = ["APPLIED_SPECS", "GaussianSpec", "ISSpec", "reference"]

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


# ----------------------------------------------------------------------------- models


def _hier_data(J=60, seed=301):
    rng = np.random.default_rng(seed)
    nj = rng.integers(2, 12, size=J)
    g = np.repeat(np.arange(J), nj)
    a = rng.normal(0.0, 0.6, size=J)
    y = 1.5 + a[g] + rng.normal(0.0, 1.0, size=g.size)
    return y, g, J


def hier_gauss(centred: bool):
    """Varying intercepts for 60 groups (387 rows): ``μ ~ N(0, 5)``, ``τ, σ ~
    HalfNormal(1)``, ``a ~ N(μ, τ)`` (centred) or ``μ + τ z`` (non-centred)."""
    import pymc as pm

    y, g, J = _hier_data()
    coords = {"group": np.arange(J), "obs": np.arange(y.size)}
    with pm.Model(coords=coords) as model:
        gidx = pm.Data("group_idx", g, dims="obs")
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfNormal("tau", 1.0)
        if centred:
            a = pm.Normal("a", mu, tau, dims="group")
        else:
            z = pm.Normal("z", 0.0, 1.0, dims="group")
            a = pm.Deterministic("a", mu + tau * z, dims="group")
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.Normal("y", a[gidx], sigma, observed=y, dims="obs")
    return model


def _hier_fast(U):
    y, g, J = _hier_data()
    lt, ls = U[:, 0], U[:, 1]
    return (
        oneway_marginal(y, g, J, np.exp(lt), np.exp(ls), 0.0, 5.0)
        + halfnormal_u(lt, 1.0)
        + halfnormal_u(ls, 1.0)
    )


def _design_cov(U_cols, blocks, noise_var):
    """Dense covariances ``noise·I + Σ v_k Z_k Z_kᵀ`` for each row of hyperparameters."""
    out = np.einsum("m,ij->mij", noise_var, np.eye(blocks[0][0].shape[0]))
    for Z, v in blocks:
        out += np.einsum("m,ij->mij", v, Z @ Z.T)
    return out


def _hier_dense(U):
    y, g, J = _hier_data()
    Zg = np.eye(J)[g]
    one = np.ones((y.size, 1))
    m = U.shape[0]
    cov = _design_cov(U, [(one, np.full(m, 25.0)), (Zg, np.exp(2 * U[:, 0]))], np.exp(2 * U[:, 1]))
    return dense_mvn(y, 0.0, cov) + halfnormal_u(U[:, 0], 1.0) + halfnormal_u(U[:, 1], 1.0)


def _slopes_data(J=20, seed=302):
    rng = np.random.default_rng(seed)
    nj = rng.integers(4, 15, size=J)
    g = np.repeat(np.arange(J), nj)
    x = rng.normal(size=g.size)
    a = rng.normal(0.0, 0.8, size=J)
    b = rng.normal(0.0, 0.4, size=J)
    y = (0.5 + a[g]) + (1.0 + b[g]) * x + rng.normal(0.0, 0.7, size=g.size)
    return y, x, g, J


def random_slopes():
    """Varying intercepts and slopes, 20 groups, centred, independent effects."""
    import pymc as pm

    y, x, g, J = _slopes_data()
    coords = {"group": np.arange(J), "obs": np.arange(y.size)}
    with pm.Model(coords=coords) as model:
        xd = pm.Data("x", x, dims="obs")
        gidx = pm.Data("group_idx", g, dims="obs")
        alpha = pm.Normal("alpha", 0.0, 5.0)
        beta = pm.Normal("beta", 0.0, 5.0)
        sigma_a = pm.HalfNormal("sigma_a", 1.0)
        sigma_b = pm.HalfNormal("sigma_b", 1.0)
        a = pm.Normal("a", alpha, sigma_a, dims="group")
        b = pm.Normal("b", beta, sigma_b, dims="group")
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.Normal("y", a[gidx] + b[gidx] * xd, sigma, observed=y, dims="obs")
    return model


def _slopes_prior(U):
    return sum(halfnormal_u(U[:, i], 1.0) for i in range(3))


def _slopes_fast(U):
    y, x, g, J = _slopes_data()
    E = np.exp(U)
    return slopes_marginal(y, x, g, J, E[:, 0], E[:, 1], E[:, 2], 5.0) + _slopes_prior(U)


def _slopes_dense(U):
    y, x, g, J = _slopes_data()
    Zg = np.eye(J)[g]
    m = U.shape[0]
    blocks = [
        (np.ones((y.size, 1)), np.full(m, 25.0)),
        (x[:, None], np.full(m, 25.0)),
        (Zg, np.exp(2 * U[:, 0])),
        (Zg * x[:, None], np.exp(2 * U[:, 1])),
    ]
    return dense_mvn(y, 0.0, _design_cov(U, blocks, np.exp(2 * U[:, 2]))) + _slopes_prior(U)


def _level_data(T=150, seed=303):
    rng = np.random.default_rng(seed)
    x = np.cumsum(rng.normal(0.0, 0.3, size=T)) + 1.0
    return x + rng.normal(0.0, 0.5, size=T)


def local_level():
    """Local level: ``pm.GaussianRandomWalk`` with 150 latent states, noisy observations."""
    import pymc as pm

    y = _level_data()
    with pm.Model(coords={"time": np.arange(y.size)}) as model:
        sigma_level = pm.HalfNormal("sigma_level", 1.0)
        sigma_obs = pm.HalfNormal("sigma_obs", 1.0)
        level = pm.GaussianRandomWalk(
            "level", sigma=sigma_level, init_dist=pm.Normal.dist(0.0, 5.0), dims="time"
        )
        pm.Normal("y", level, sigma_obs, observed=y, dims="time")
    return model


def _level_fast(U):
    y = _level_data()
    E = np.exp(U)
    ll = kalman_ar1(y, 1.0, E[:, 0] ** 2, E[:, 1] ** 2, 0.0, 25.0)
    return ll + halfnormal_u(U[:, 0], 1.0) + halfnormal_u(U[:, 1], 1.0)


def _level_dense(U):
    y = _level_data()
    T = y.size
    t = np.arange(T)
    C = np.minimum(t[:, None], t[None, :]).astype(float)
    E2 = np.exp(2 * U)
    cov = 25.0 + E2[:, 0, None, None] * C + E2[:, 1, None, None] * np.eye(T)
    return dense_mvn(y, 0.0, cov) + halfnormal_u(U[:, 0], 1.0) + halfnormal_u(U[:, 1], 1.0)


def _ar_data(T=120, seed=304):
    rng = np.random.default_rng(seed)
    x = np.zeros(T)
    x[0] = rng.normal(0.0, 1.0)
    for t in range(1, T):
        x[t] = 0.7 * x[t - 1] + rng.normal(0.0, 0.5)
    return x + rng.normal(0.0, 0.4, size=T)


def latent_ar1():
    """A latent AR(1) (``pm.AR``, 120 states) observed with noise; ``ρ ~ N(0, 0.5)``."""
    import pymc as pm

    y = _ar_data()
    with pm.Model(coords={"time": np.arange(y.size)}) as model:
        rho = pm.Normal("rho", 0.0, 0.5)
        sigma = pm.HalfNormal("sigma", 1.0)
        sigma_obs = pm.HalfNormal("sigma_obs", 1.0)
        x = pm.AR(
            "x", rho=rho, sigma=sigma, init_dist=pm.Normal.dist(0.0, 2.0), ar_order=1,
            dims="time",
        )  # fmt: skip
        pm.Normal("y", x, sigma_obs, observed=y, dims="time")
    return model


def _ar_prior(U):
    return stats.norm(0.0, 0.5).logpdf(U[:, 0]) + halfnormal_u(U[:, 1], 1.0) + halfnormal_u(
        U[:, 2], 1.0
    )


def _ar_fast(U):
    y = _ar_data()
    E2 = np.exp(2 * U[:, 1:])
    return kalman_ar1(y, U[:, 0], E2[:, 0], E2[:, 1], 0.0, 4.0) + _ar_prior(U)


def _ar_dense(U):
    y = _ar_data()
    T = y.size
    t = np.arange(T)
    lag = t[:, None] - t[None, :]
    out = np.empty(U.shape[0])
    for i, (rho, ls, lo) in enumerate(U):
        Lm = np.where(lag >= 0, rho ** np.maximum(lag, 0), 0.0)
        v = np.full(T, np.exp(2 * ls))
        v[0] = 4.0
        cov = (Lm * v) @ Lm.T + np.exp(2 * lo) * np.eye(T)
        out[i] = dense_mvn(y, 0.0, cov[None])[0]
    return out + _ar_prior(U)


def _gp_data(n=40, seed=305):
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(0.0, 10.0, size=n))
    f = np.sin(X) + 0.5 * np.cos(2.1 * X)
    return X, f + rng.normal(0.0, 0.3, size=n)


def gp_latent():
    """GP regression with a latent function (``pm.gp.Latent``, ExpQuad, 40 points)."""
    import pymc as pm

    X, y = _gp_data()
    with pm.Model(coords={"obs": np.arange(y.size)}) as model:
        ell = pm.Gamma("ell", alpha=2.0, beta=1.0)
        eta = pm.HalfNormal("eta", 1.0)
        gp = pm.gp.Latent(cov_func=eta**2 * pm.gp.cov.ExpQuad(1, ls=ell))
        f = gp.prior("f", X=X[:, None], dims="obs")
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.Normal("y", f, sigma, observed=y, dims="obs")
    return model


def _gp_prior(U):
    return gamma_u(U[:, 0], 2.0, 1.0) + halfnormal_u(U[:, 1], 1.0) + halfnormal_u(U[:, 2], 1.0)


def _gp_cov(U):
    X, _ = _gp_data()
    E = np.exp(U)
    D2 = (X[:, None] - X[None, :]) ** 2
    K = E[:, 1, None, None] ** 2 * np.exp(-0.5 * D2 / E[:, 0, None, None] ** 2)
    return K + (1e-6 + E[:, 2, None, None] ** 2) * np.eye(X.size)  # Latent's jitter 1e-6


def _gp_fast(U, chunk=2000):
    _, y = _gp_data()
    out = np.empty(U.shape[0])
    for i in range(0, U.shape[0], chunk):
        cov = _gp_cov(U[i : i + chunk])
        w, V = np.linalg.eigh(cov)
        z = np.einsum("mij,i->mj", V, y)
        out[i : i + chunk] = -0.5 * (y.size * LOG2PI + np.log(w).sum(1) + (z * z / w).sum(1))
    return out + _gp_prior(U)


def _gp_dense(U):
    _, y = _gp_data()
    return dense_mvn(y, 0.0, _gp_cov(U)) + _gp_prior(U)


def _wide_data(n=360, p=300, seed=306):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)) / np.sqrt(p)
    beta = rng.normal(0.0, 0.8, size=p)
    return X, X @ beta + rng.normal(0.0, 0.5, size=n)


def wide_regression():
    """Ridge-type hierarchical shrinkage on 300 coefficients (d = 302), 360 rows."""
    import pymc as pm

    X, y = _wide_data()
    coords = {"obs": np.arange(y.size), "predictor": np.arange(X.shape[1])}
    with pm.Model(coords=coords) as model:
        Xd = pm.Data("X", X, dims=("obs", "predictor"))
        tau = pm.HalfNormal("tau", 1.0)
        beta = pm.Normal("beta", 0.0, tau, dims="predictor")
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.Normal("y", Xd @ beta, sigma, observed=y, dims="obs")
    return model


@cache
def _wide_eig():
    X, y = _wide_data()
    w, V = np.linalg.eigh(X @ X.T)
    return w, (V.T @ y) ** 2


def _wide_fast(U):
    _, y = _wide_data()
    w, z2 = _wide_eig()
    E2 = np.exp(2 * U)
    s = E2[:, :1] * w + E2[:, 1:2]
    ll = -0.5 * (y.size * LOG2PI + np.log(s).sum(1) + (z2 / s).sum(1))
    return ll + halfnormal_u(U[:, 0], 1.0) + halfnormal_u(U[:, 1], 1.0)


def _wide_dense(U):
    X, y = _wide_data()
    E2 = np.exp(2 * U)
    cov = _design_cov(U, [(X, E2[:, 0])], E2[:, 1])
    return dense_mvn(y, 0.0, cov) + halfnormal_u(U[:, 0], 1.0) + halfnormal_u(U[:, 1], 1.0)


EPS = 0.001  # BUGS' Gamma(ε, ε)


def _bugs_data(J=10, seed=307):
    rng = np.random.default_rng(seed)
    nj = np.full(J, 6)
    g = np.repeat(np.arange(J), nj)
    a = rng.normal(0.0, 1.0, size=J)
    return 3.0 + a[g] + rng.normal(0.0, 1.5, size=g.size), g, J


def bugs_oneway():
    """One-way random effects as in BUGS: ``μ ~ dnorm(0, 1e-6)``, precisions
    ``τ_y, τ_a ~ dgamma(0.001, 0.001)``, 10 groups × 6 rows, centred."""
    import pymc as pm

    y, g, J = _bugs_data()
    coords = {"group": np.arange(J), "obs": np.arange(y.size)}
    with pm.Model(coords=coords) as model:
        gidx = pm.Data("group_idx", g, dims="obs")
        mu = pm.Normal("mu", 0.0, tau=1e-6)
        tau_a = pm.Gamma("tau_a", EPS, EPS)
        tau_y = pm.Gamma("tau_y", EPS, EPS)
        a = pm.Normal("a", mu, tau=tau_a, dims="group")
        pm.Normal("y", a[gidx], tau=tau_y, observed=y, dims="obs")
    return model


def _bugs_prior(U):
    return gamma_u(U[:, 0], EPS, EPS) + gamma_u(U[:, 1], EPS, EPS)


def _bugs_fast(U):
    y, g, J = _bugs_data()
    return (
        oneway_marginal(y, g, J, np.exp(-0.5 * U[:, 0]), np.exp(-0.5 * U[:, 1]), 0.0, 1e3)
        + _bugs_prior(U)
    )


def _bugs_dense(U):
    y, g, J = _bugs_data()
    Zg = np.eye(J)[g]
    m = U.shape[0]
    blocks = [(np.ones((y.size, 1)), np.full(m, 1e6)), (Zg, np.exp(-U[:, 0]))]
    return dense_mvn(y, 0.0, _design_cov(U, blocks, np.exp(-U[:, 1]))) + _bugs_prior(U)


def _bugs_normal_data(n=30, seed=308):
    return np.random.default_rng(seed).normal(2.0, 1.3, size=n)


def bugs_normal():
    """A normal sample with BUGS priors: ``μ ~ dnorm(0, 1e-6)``, ``τ ~ dgamma(0.001, 0.001)``."""
    import pymc as pm

    y = _bugs_normal_data()
    with pm.Model(coords={"obs": np.arange(y.size)}) as model:
        mu = pm.Normal("mu", 0.0, tau=1e-6)
        tau = pm.Gamma("tau", EPS, EPS)
        pm.Normal("y", mu, tau=tau, observed=y, dims="obs")
    return model


def _bugs_normal_fast(U):
    # μ integrated out: the one-way marginal with one group and no group effect (τ_a → 0)
    y = _bugs_normal_data()
    g = np.zeros(y.size, dtype=int)
    return oneway_marginal(y, g, 1, 0.0, np.exp(-0.5 * U[:, 0]), 0.0, 1e3) + gamma_u(
        U[:, 0], EPS, EPS
    )


def _bugs_normal_dense(U):
    y = _bugs_normal_data()
    m = U.shape[0]
    cov = _design_cov(U, [(np.ones((y.size, 1)), np.full(m, 1e6))], np.exp(-U[:, 0]))
    return dense_mvn(y, 0.0, cov) + gamma_u(U[:, 0], EPS, EPS)


# ----------------------------------------------------------------------------- non-Gaussian


def _mlogit_data(J=30, seed=311):
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(J), 12)
    x = rng.normal(size=g.size)
    a = rng.normal(-0.3, 0.8, size=J)
    y = rng.binomial(1, special.expit(a[g] + 0.7 * x))
    return y, x, g, J


def multilevel_logistic(centred: bool = True):
    """Varying-intercept logistic regression, 30 groups × 12 rows, centred (the
    non-centred version, the same ``log Z``, is what the references integrate: the centred
    joint density has no interior mode for a Laplace fit)."""
    import pymc as pm

    y, x, g, J = _mlogit_data()
    coords = {"group": np.arange(J), "obs": np.arange(y.size)}
    with pm.Model(coords=coords) as model:
        xd = pm.Data("x", x, dims="obs")
        gidx = pm.Data("group_idx", g, dims="obs")
        alpha = pm.Normal("alpha", 0.0, 2.5)
        beta = pm.Normal("beta", 0.0, 2.5)
        sigma_a = pm.HalfNormal("sigma_a", 1.0)
        if centred:
            a = pm.Normal("a", alpha, sigma_a, dims="group")
        else:
            z = pm.Normal("z", 0.0, 1.0, dims="group")
            a = pm.Deterministic("a", alpha + sigma_a * z, dims="group")
        pm.Bernoulli("y", logit_p=a[gidx] + beta * xd, observed=y, dims="obs")
    return model


def ordinal_logistic(seed=312):
    """Ordinal logistic regression: 5 categories, 3 predictors, 200 rows, ordered cutpoints."""
    import pymc as pm

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(200, 3))
    eta = X @ np.array([0.8, -0.5, 0.3])
    cuts = np.array([-1.5, -0.5, 0.5, 1.5])
    y = (eta[:, None] + rng.logistic(size=200)[:, None] > cuts).sum(1)
    coords = {"obs": np.arange(200), "predictor": ["x1", "x2", "x3"], "cut": np.arange(4)}
    with pm.Model(coords=coords) as model:
        Xd = pm.Data("X", X, dims=("obs", "predictor"))
        beta = pm.Normal("beta", 0.0, 1.0, dims="predictor")
        cutpoints = pm.Normal("cutpoints", 0.0, 3.0, dims="cut",
                              transform=pm.distributions.transforms.ordered,
                              initval=np.linspace(-1.5, 1.5, 4))  # fmt: skip
        pm.OrderedLogistic("y", eta=Xd @ beta, cutpoints=cutpoints, observed=y, dims="obs")
    return model


def robust_t(seed=313):
    """Robust regression: Student-t likelihood with unknown ν ~ Gamma(2, 0.1), 80 rows with
    6 outliers."""
    import pymc as pm

    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, size=80)
    y = 1.0 + 0.5 * x + rng.normal(0.0, 0.5, size=80)
    y[rng.choice(80, 6, replace=False)] += rng.choice([-1, 1], 6) * rng.uniform(3, 6, 6)
    with pm.Model(coords={"obs": np.arange(80)}) as model:
        xd = pm.Data("x", x, dims="obs")
        alpha = pm.Normal("alpha", 0.0, 5.0)
        beta = pm.Normal("beta", 0.0, 5.0)
        sigma = pm.HalfNormal("sigma", 2.0)
        nu = pm.Gamma("nu", alpha=2.0, beta=0.1)
        pm.StudentT("y", nu=nu, mu=alpha + beta * xd, sigma=sigma, observed=y, dims="obs")
    return model


def zero_inflated_poisson(seed=314):
    """Zero-inflated Poisson regression, 2 predictors, 200 rows."""
    import pymc as pm

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(200, 2))
    lam = np.exp(0.8 + X @ np.array([0.4, -0.3]))
    y = np.where(rng.uniform(size=200) < 0.3, 0, rng.poisson(lam))
    coords = {"obs": np.arange(200), "predictor": ["x1", "x2"]}
    with pm.Model(coords=coords) as model:
        Xd = pm.Data("X", X, dims=("obs", "predictor"))
        psi = pm.Beta("psi", 2.0, 2.0)
        alpha = pm.Normal("alpha", 0.0, 2.0)
        beta = pm.Normal("beta", 0.0, 1.0, dims="predictor")
        pm.ZeroInflatedPoisson("y", psi=psi, mu=pm.math.exp(alpha + Xd @ beta), observed=y,
                               dims="obs")  # fmt: skip
    return model


def censored_regression(seed=315):
    """Normal regression right-censored at 2 (``pm.Censored``), 100 rows, about a quarter
    censored."""
    import pymc as pm

    rng = np.random.default_rng(seed)
    x = rng.normal(size=100)
    y = np.minimum(1.0 + 1.0 * x + rng.normal(0.0, 0.8, size=100), 2.0)
    with pm.Model(coords={"obs": np.arange(100)}) as model:
        xd = pm.Data("x", x, dims="obs")
        alpha = pm.Normal("alpha", 0.0, 5.0)
        beta = pm.Normal("beta", 0.0, 5.0)
        sigma = pm.HalfNormal("sigma", 2.0)
        pm.Censored("y", pm.Normal.dist(alpha + beta * xd, sigma), lower=None, upper=2.0,
                    observed=y, dims="obs")  # fmt: skip
    return model


def truncnormal_prior(seed=316):
    """A dose-response slope known to be positive: ``β ~ TruncatedNormal(0.5, 1, lower=0)``,
    weak data (30 rows) so the truncation matters."""
    import pymc as pm

    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, size=30)
    y = 0.2 + 0.3 * x + rng.normal(0.0, 0.6, size=30)
    with pm.Model(coords={"obs": np.arange(30)}) as model:
        xd = pm.Data("dose", x, dims="obs")
        alpha = pm.Normal("alpha", 0.0, 2.0)
        beta = pm.TruncatedNormal("beta", mu=0.5, sigma=1.0, lower=0.0)
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.Normal("y", alpha + beta * xd, sigma, observed=y, dims="obs")
    return model


def _mixture_data(seed=317):
    rng = np.random.default_rng(seed)
    z = rng.uniform(size=120) < 0.4
    return np.where(z, rng.normal(-2.0, 0.7, 120), rng.normal(2.0, 0.7, 120))


def label_switching_mixture():
    """Two-component normal mixture with exchangeable components (no ordering): the
    posterior has two relabelled copies of each mode; ``log Z`` is the evidence of that
    whole posterior (both copies), what every estimator should return."""
    import pymc as pm

    y = _mixture_data()
    with pm.Model(coords={"component": [0, 1], "obs": np.arange(y.size)}) as model:
        w = pm.Beta("w", 1.0, 1.0)
        mu = pm.Normal("mu", 0.0, 5.0, dims="component")
        sigma = pm.HalfNormal("sigma", 2.0)
        pm.NormalMixture("y", w=pm.math.stack([w, 1 - w]), mu=mu, sigma=sigma, observed=y,
                         dims="obs")  # fmt: skip
    return model


def _mixture_relabel(bl):
    """The label swap on the flat unconstrained vector: logit w → −logit w, μ₀ ↔ μ₁."""
    idx = {n: i for i, n in enumerate(bl.names)}
    sizes = [int(np.prod(s, dtype=int)) for s in bl.shapes]
    start = np.cumsum([0, *sizes])
    iw, imu = start[idx["w_logodds__"]], start[idx["mu"]]
    P = np.eye(bl.d)
    P[iw, iw] = -1.0
    P[[imu, imu + 1]] = P[[imu + 1, imu]]
    return P


APPLIED_SPECS = {
    s.name: s
    for s in [
        GaussianSpec("applied_hier60_centred", lambda: hier_gauss(True),
                     ["tau_log__", "sigma_log__"], _hier_fast, _hier_dense),
        GaussianSpec("applied_hier60_noncentred", lambda: hier_gauss(False),
                     ["tau_log__", "sigma_log__"], _hier_fast, _hier_dense),
        GaussianSpec("applied_random_slopes", random_slopes,
                     ["sigma_a_log__", "sigma_b_log__", "sigma_log__"], _slopes_fast,
                     _slopes_dense),
        GaussianSpec("applied_local_level", local_level, ["sigma_level_log__", "sigma_obs_log__"],
                     _level_fast, _level_dense),
        GaussianSpec("applied_ar1", latent_ar1, ["rho", "sigma_log__", "sigma_obs_log__"],
                     _ar_fast, _ar_dense, n_is=10_000),
        GaussianSpec("applied_gp_latent", gp_latent, ["ell_log__", "eta_log__", "sigma_log__"],
                     _gp_fast, _gp_dense, nodes=3, n_is=20_000),
        GaussianSpec("applied_wide_d302", wide_regression, ["tau_log__", "sigma_log__"],
                     _wide_fast, _wide_dense, n_is=2000),
        GaussianSpec("applied_bugs_oneway", bugs_oneway, ["tau_a_log__", "tau_y_log__"],
                     _bugs_fast, _bugs_dense, n_is=20_000),
        GaussianSpec("applied_bugs_normal", bugs_normal, ["tau_log__"], _bugs_normal_fast,
                     _bugs_normal_dense, n_is=20_000),
        ISSpec("applied_multilevel_logistic", multilevel_logistic,
               ref_model=lambda: multilevel_logistic(centred=False),
               conditional="sigma_a_log__"),
        ISSpec("applied_ordinal", ordinal_logistic),
        ISSpec("applied_robust_t", robust_t),
        ISSpec("applied_zip", zero_inflated_poisson),
        ISSpec("applied_censored", censored_regression, quadrature=True),
        ISSpec("applied_truncnormal_prior", truncnormal_prior, quadrature=True),
        ISSpec("applied_mixture_label_switching", label_switching_mixture,
               relabel=_mixture_relabel, x0=lambda bl: np.array([0.0, -1.0, 1.0, 0.0])),
    ]
}  # fmt: skip


# ----------------------------------------------------------------------------- references


def _laplace_k(f, k, x0=None):
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


def _panel_nodes(lo, hi, mode, sd, per_panel):
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


def _grid_log_integral(f, lo, hi, mode, sd, per_panel, chunk=20_000):
    """log ∫ exp f over the box by a tensor product of composite Gauss–Legendre rules."""
    rules = [_panel_nodes(lo[i], hi[i], mode[i], sd[i], per_panel) for i in range(len(lo))]
    P = np.stack(np.meshgrid(*[r[0] for r in rules], indexing="ij"), -1).reshape(-1, len(lo))
    LW = sum(np.meshgrid(*[r[1] for r in rules], indexing="ij")).ravel()
    vals = np.concatenate([f(P[i : i + chunk]) for i in range(0, len(P), chunk)])
    return float(special.logsumexp(vals + LW)), len(P)


def _grow_box(f, mode, sd, drop=40.0, lo=None, hi=None):
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


def gaussian_reference(spec: GaussianSpec, seed: int = 0) -> dict:
    """Both ways for a :class:`GaussianSpec` (see the module docstring)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):  # many small factorizations: threads only contend
        return _gaussian_reference(spec, seed)


def _gaussian_reference(spec, seed):
    k = len(spec.hyper)
    mode, cov = _laplace_k(spec.fast, k)
    sd = np.sqrt(np.diag(cov))
    lo, hi = _grow_box(spec.fast, mode, sd, lo=spec.lo or None, hi=spec.hi or None)
    n = spec.nodes or {1: 12, 2: 8, 3: 5}[k]
    q1, _ = _grid_log_integral(spec.fast, lo, hi, mode, sd, n)
    q2, n_nodes = _grid_log_integral(spec.fast, lo, hi, mode, sd, n + 3)
    # way 2: IS from a t_4 at the Laplace fit, 1.5 × its scale, dense marginal
    df, scale = 4.0, 1.5
    prop = stats.multivariate_t(loc=mode, shape=scale**2 * cov, df=df)
    rng = np.random.default_rng(seed)
    U = prop.rvs(size=spec.n_is, random_state=rng).reshape(spec.n_is, k)
    lw = np.concatenate([spec.dense(U[i : i + 25]) for i in range(0, spec.n_is, 25)])
    lw = lw - prop.logpdf(U).reshape(-1)
    n_fail = int(np.sum(~np.isfinite(lw)))
    est, mcse, ess = _logmeanexp_with_mcse(np.where(np.isfinite(lw), lw, -np.inf))
    way1 = {"method": f"composite Gauss-Legendre quadrature over {k} unconstrained "
                      f"hyperparameter(s), {n + 3} nodes a panel ({n_nodes} in all) on the box "
                      f"{np.round(lo, 2).tolist()} - {np.round(hi, 2).tolist()}, structured "
                      f"marginal; error = change from {n} nodes a panel",
            "log_z": q2, "error": abs(q2 - q1)}  # fmt: skip
    way2 = {"method": f"importance sampling over the hyperparameters, t_{df:g} at the Laplace "
                      f"fit x {scale}, {spec.n_is} draws, dense-covariance marginal (Cholesky)",
            "log_z": est, "mcse": mcse, "khat": pareto_khat(lw), "ess": ess, "seed": seed,
            "n_singular": n_fail}  # fmt: skip
    diff = q2 - est
    return {
        "log_z": q2,
        "mcse": 0.0,
        "reference": "exact",
        "method": f"quadrature of the analytic marginal {q2:.4f} (err {abs(q2 - q1):.1e}); "
        f"cross-check IS {est:.4f} ± {mcse:.4f}",
        "way1": way1,
        "way2": way2,
        "difference": diff,
        "agree": bool(abs(diff) < 4 * mcse + 1e-3),
    }


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


def _is(bl, n, seed, comps, df, batch=5000):
    """IS from an equal-weight mixture of Student-t's ``comps = [(loc, cov), ...]``."""
    props = [stats.multivariate_t(loc=m, shape=c, df=df) for m, c in comps]
    rng = np.random.default_rng(seed)
    lw = np.empty(n)
    for i in range(0, n, batch):
        m = min(batch, n - i)
        which = rng.integers(len(props), size=m)
        x = np.concatenate([props[k].rvs(size=int(np.sum(which == k)), random_state=rng)
                            .reshape(-1, bl.d) for k in range(len(props))])  # fmt: skip
        lq = special.logsumexp([p.logpdf(x).reshape(-1) for p in props], axis=0) - np.log(
            len(props)
        )
        lw[i : i + m] = np.asarray(bl.logp(x), dtype=float) - lq
    lw = np.where(np.isfinite(lw), lw, -np.inf)
    est, mcse, ess = _logmeanexp_with_mcse(lw)
    return lw, {"log_z": est, "mcse": mcse, "khat": pareto_khat(lw), "ess": ess, "n": n,
                "seed": seed}  # fmt: skip


def is_reference(spec: ISSpec, seed: int = 0) -> dict:
    """Both ways for an :class:`ISSpec`: importance sampling on the model's joint density
    from (1) a t_5 at the Laplace fit (scale ``spec.scale1``), and (2) a t_3 at the posterior
    mean and covariance estimated by a separate weighted pilot of (1), scale 1.5;
    for a label-switching model, each proposal is the equal mixture of its relabelled
    copies (so both copies of the posterior are covered)."""
    from threadpoolctl import threadpool_limits

    from .numeric import batched_logp, laplace

    bl = batched_logp((spec.ref_model or spec.model)())
    if spec.conditional is not None:
        with threadpool_limits(limits=1):
            return _conditional_reference(spec, bl, seed)
    with threadpool_limits(limits=1):
        mode, cov, converged = laplace(bl, None if spec.x0 is None else spec.x0(bl))
        perms = [np.eye(bl.d)] if spec.relabel is None else [np.eye(bl.d), spec.relabel(bl)]
        c1 = [(P @ mode, spec.scale1**2 * P @ cov @ P.T) for P in perms]
        if spec.quadrature:
            w1 = _joint_quadrature(bl, mode, cov)
        else:
            _, w1 = _is(bl, spec.n_is, seed, c1, 5.0)
        # way 2: moments of the posterior (one relabelling) from a separate pilot of way 1's
        # single-copy proposal, then a different (heavier, wider) proposal at them
        lwp, _ = _is(bl, 20_000, seed + 1000, c1[:1], 5.0)
        rng = np.random.default_rng(seed + 1000)  # the pilot's draws, regenerated
        xp = _pilot_draws(c1[0], 20_000, rng, bl.d)
        wp = np.exp(lwp - lwp.max())
        wp /= wp.sum()
        mean2 = wp @ xp
        cov2 = (xp - mean2).T @ ((xp - mean2) * wp[:, None])
        c2 = [(P @ mean2, 1.5**2 * P @ cov2 @ P.T) for P in perms]
        _, w2 = _is(bl, spec.n_is, seed + 1, c2, 3.0)
    diff = w1["log_z"] - w2["log_z"]
    if spec.quadrature:  # the quadrature is the reference, the IS its check
        return {
            "log_z": w1["log_z"], "mcse": 0.0, "reference": "exact",
            "method": f"quadrature of the joint density {w1['log_z']:.4f} (err "
                      f"{w1['error']:.1e}); cross-check IS {w2['log_z']:.4f} ± {w2['mcse']:.4f}",
            "way1": w1, "way2": w2, "difference": float(diff),
            "laplace_converged": bool(converged),
            "agree": bool(abs(diff) < 4 * w2["mcse"] + 1e-3 and w2["khat"] < 0.7),
        }  # fmt: skip
    v1, v2 = w1["mcse"] ** 2, w2["mcse"] ** 2
    mean = (w1["log_z"] / v1 + w2["log_z"] / v2) / (1 / v1 + 1 / v2)
    mcse = max((1 / v1 + 1 / v2) ** -0.5, abs(diff) / 2)
    mix = " (equal mixture over both labellings)" if spec.relabel is not None else ""
    if not spec.quadrature:
        w1["method"] = (f"IS on the model, t_5 at the Laplace mode, {spec.scale1} x its scale, "
                        f"{spec.n_is} draws{mix}")
    w2["method"] = (f"IS on the model, t_3 at the posterior mean/covariance estimated by a "
                    f"20000-draw pilot of way 1, 1.5 x scale, {spec.n_is} draws{mix}")
    return {
        "log_z": float(mean),
        "mcse": float(mcse),
        "reference": "reference",
        "method": f"inverse-variance mean of two IS proposals: {w1['log_z']:.4f} ± "
        f"{w1['mcse']:.4f} (k̂ {w1['khat']:.2f}), {w2['log_z']:.4f} ± {w2['mcse']:.4f} "
        f"(k̂ {w2['khat']:.2f})",
        "way1": w1,
        "way2": w2,
        "difference": float(diff),
        "laplace_converged": bool(converged),
        "agree": bool(abs(diff) < 4 * np.sqrt(v1 + v2) + 1e-3
                      and max(w1["khat"], w2["khat"]) < 0.7),
    }


class _Conditional:
    """Fits of the posterior of all coordinates but one (``u``) given ``u``."""

    def __init__(self, bl, name):
        sizes = [int(np.prod(sh, dtype=int)) for sh in bl.shapes]
        self.iu = int(np.cumsum([0, *sizes])[bl.names.index(name)])
        self.rest = np.setdiff1d(np.arange(bl.d), [self.iu])
        self.bl, self.start = bl, np.zeros(bl.d - 1)

    def full(self, u, xr):
        x = np.empty(xr.shape[:-1] + (self.bl.d,))
        x[..., self.iu] = u
        x[..., self.rest] = xr
        return x

    def fit(self, u):
        """Conditional mode and covariance (Newton from the last mode, FD Hessian)."""
        bl = self.bl

        def f(xr):
            return -float(bl.logp(self.full(u, xr)[None])[0])

        def g(xr):
            return -np.asarray(bl.dlogp(self.full(u, xr)))[self.rest]

        res = optimize.minimize(f, self.start, jac=g, method="BFGS", options={"gtol": 1e-9})
        x = res.x
        m = x.size
        H = np.empty((m, m))
        for j in range(m):
            e = np.zeros(m)
            e[j] = 1e-5
            H[:, j] = (g(x + e) - g(x - e)) / 2e-5
        H = 0.5 * (H + H.T)
        self.start = x
        cov = np.linalg.inv(H)
        return x, 0.5 * (cov + cov.T), -res.fun

    def laplace_log(self, u):
        x, cov, top = self.fit(u)
        return top + 0.5 * x.size * LOG2PI + 0.5 * np.linalg.slogdet(cov)[1]


def _conditional_reference(spec, bl, seed) -> dict:
    """Way 1: quadrature over the scale ``u`` of the conditional evidence, each by IS from a
    t_5 at the conditional Laplace fit; way 2: IS on the joint density from ``t(u) ×
    N(x; m(u), S(u))``, the conditional fits interpolated linearly in ``u`` (a valid
    proposal whatever the interpolation's accuracy)."""
    c = _Conditional(bl, spec.conditional)
    grid = np.linspace(-4.0, 2.0, 25)
    prof = np.array([c.laplace_log(u) for u in grid])
    k = int(np.argmax(prof))
    # refine the profile's mode and curvature on a fine local grid
    fine = np.linspace(grid[max(k - 2, 0)], grid[min(k + 2, 24)], 21)
    c.start = np.zeros(bl.d - 1)
    pf = np.array([c.laplace_log(u) for u in fine])
    j = int(np.argmax(pf))
    mode_u = fine[j]
    h = fine[1] - fine[0]
    curv = -(pf[min(j + 1, 20)] - 2 * pf[j] + pf[max(j - 1, 0)]) / h**2
    sd_u = 1 / np.sqrt(max(curv, 1e-6))
    lo, hi = _grow_box(lambda U: np.array([c.laplace_log(u) for u in U[:, 0]]),
                       np.array([mode_u]), np.array([sd_u]), drop=30.0)  # fmt: skip
    nodes, logw = _panel_nodes(lo[0], hi[0], mode_u, sd_u, 6)
    rng = np.random.default_rng(seed)
    fits, vals, ses = [], [], []
    c.start = np.zeros(bl.d - 1)
    for u in nodes:
        x, cov, _ = c.fit(u)
        fits.append((x, cov))
        prop = stats.multivariate_t(loc=x, shape=1.1**2 * cov, df=5.0)
        xr = prop.rvs(size=4000, random_state=rng)
        lw = np.asarray(bl.logp(c.full(u, xr)), dtype=float) - prop.logpdf(xr)
        est, se, _ = _logmeanexp_with_mcse(lw)
        vals.append(est)
        ses.append(se)
    vals, ses = np.array(vals), np.array(ses)
    q = special.logsumexp(vals + logw)
    wts = np.exp(vals + logw - q)
    way1 = {"method": f"composite Gauss-Legendre quadrature over {spec.conditional} "
                      f"({nodes.size} nodes on [{lo[0]:.2f}, {hi[0]:.2f}]) of the conditional "
                      f"evidence, each by IS from a t_5 at the conditional Laplace fit (4000 "
                      f"draws)", "log_z": float(q), "mcse": float(np.sqrt(np.sum((wts * ses) ** 2)))}  # fmt: skip
    # way 2
    order = np.argsort(nodes)
    nodes_s = nodes[order]
    M = np.stack([fits[i][0] for i in order])
    L = np.stack([np.linalg.cholesky(fits[i][1]) for i in order])
    tu = stats.t(df=4.0, loc=mode_u, scale=1.5 * sd_u)
    n = spec.n_is // 2
    rng2 = np.random.default_rng(seed + 1)
    us = tu.rvs(size=n, random_state=rng2)
    pos = np.clip(np.searchsorted(nodes_s, us) - 1, 0, nodes_s.size - 2)
    t = np.clip((us - nodes_s[pos]) / (nodes_s[pos + 1] - nodes_s[pos]), 0.0, 1.0)[:, None]
    mu = (1 - t) * M[pos] + t * M[pos + 1]
    Lu = (1 - t[..., None]) * L[pos] + t[..., None] * L[pos + 1]
    zz = rng2.standard_normal(size=mu.shape)
    xr = mu + np.einsum("nij,nj->ni", Lu, zz)
    logq = (tu.logpdf(us) - 0.5 * (zz**2).sum(1) - 0.5 * mu.shape[1] * LOG2PI
            - np.log(np.abs(np.diagonal(Lu, axis1=1, axis2=2))).sum(1))  # fmt: skip
    X = c.full(us, xr)
    lp = np.concatenate([bl.logp(X[i : i + 5000]) for i in range(0, n, 5000)])
    lw = np.where(np.isfinite(lp), lp - logq, -np.inf)
    est, se, ess = _logmeanexp_with_mcse(lw)
    way2 = {"method": f"IS on the joint density from t_4({spec.conditional}) x the "
                      f"interpolated conditional Laplace Gaussian, {n} draws",
            "log_z": est, "mcse": se, "khat": pareto_khat(lw), "ess": ess, "seed": seed + 1}  # fmt: skip
    diff = way1["log_z"] - est
    v1, v2 = way1["mcse"] ** 2, se**2
    mean = (way1["log_z"] / v1 + est / v2) / (1 / v1 + 1 / v2)
    return {
        "log_z": float(mean),
        "mcse": float(max((1 / v1 + 1 / v2) ** -0.5, abs(diff) / 2)),
        "reference": "reference",
        "method": f"inverse-variance mean: quadrature x conditional IS {way1['log_z']:.4f} ± "
        f"{way1['mcse']:.4f}, joint IS {est:.4f} ± {se:.4f} (k̂ {way2['khat']:.2f})",
        "way1": way1,
        "way2": way2,
        "difference": float(diff),
        "agree": bool(abs(diff) < 4 * np.sqrt(v1 + v2) + 1e-3 and way2["khat"] < 0.7),
    }


def _joint_quadrature(bl, mode, cov) -> dict:
    """Way 1 for ``d <= 3``: composite Gauss–Legendre quadrature of the model's own joint
    density over its unconstrained coordinates (no analytic step)."""
    sd = np.sqrt(np.diag(cov))

    def f(U):
        return np.asarray(bl.logp(U), dtype=float)

    lo, hi = _grow_box(f, mode, sd)
    n = {1: 12, 2: 8, 3: 5}[bl.d]
    q1, _ = _grid_log_integral(f, lo, hi, mode, sd, n)
    q2, n_nodes = _grid_log_integral(f, lo, hi, mode, sd, n + 3)
    return {"method": f"composite Gauss-Legendre quadrature of the joint density over all "
                      f"{bl.d} unconstrained coordinates, {n_nodes} nodes, box "
                      f"{np.round(lo, 2).tolist()} - {np.round(hi, 2).tolist()}; error = change "
                      f"from {n} nodes a panel", "log_z": q2, "error": abs(q2 - q1)}  # fmt: skip


def _pilot_draws(comp, n, rng, d, batch=5000):
    """The draws :func:`_is` makes from one component with generator ``rng`` (same order)."""
    prop = stats.multivariate_t(loc=comp[0], shape=comp[1], df=5.0)
    out = []
    for i in range(0, n, batch):
        m = min(batch, n - i)
        rng.integers(1, size=m)
        out.append(prop.rvs(size=m, random_state=rng).reshape(-1, d))
    return np.concatenate(out)


def reference(name: str, seed: int = 0) -> dict:
    """The two-way reference of applied case ``name`` (slow: seconds to minutes)."""
    spec = APPLIED_SPECS[name]
    if isinstance(spec, GaussianSpec):
        return gaussian_reference(spec, seed)
    return is_reference(spec, seed)
