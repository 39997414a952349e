"""Applied tier, latent linear-Gaussian models: a local level (``pm.GaussianRandomWalk``), a
latent AR(1) (``pm.AR``), a latent GP (``pm.gp.Latent``) and a 300-coefficient regression.
Each model comes with its log integrand over the hyperparameters two ways (see
``applied_models``)."""

from __future__ import annotations

from functools import cache

import numpy as np
from scipy import stats

from .applied_numeric import (
    LOG2PI,
    GaussianSpec,
    dense_mvn,
    design_cov,
    gamma_u,
    halfnormal_u,
    kalman_ar1,
)


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
    cov = design_cov([(X, E2[:, 0])], E2[:, 1])
    return dense_mvn(y, 0.0, cov) + halfnormal_u(U[:, 0], 1.0) + halfnormal_u(U[:, 1], 1.0)



LATENT_SPECS = [
    GaussianSpec("applied_local_level", local_level, ["sigma_level_log__", "sigma_obs_log__"],
                 _level_fast, _level_dense, n_is=12_000),
    GaussianSpec("applied_ar1", latent_ar1, ["rho", "sigma_log__", "sigma_obs_log__"],
                 _ar_fast, _ar_dense, n_is=10_000),
    GaussianSpec("applied_gp_latent", gp_latent, ["ell_log__", "eta_log__", "sigma_log__"],
                 _gp_fast, _gp_dense, nodes=3, n_is=20_000),
    GaussianSpec("applied_wide_d302", wide_regression, ["tau_log__", "sigma_log__"],
                 _wide_fast, _wide_dense, n_is=6000),
]  # fmt: skip
