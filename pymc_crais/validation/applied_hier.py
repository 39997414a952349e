"""Applied tier, hierarchical linear-Gaussian models: varying intercepts (centred and
non-centred, 60 groups), varying intercepts and slopes, BUGS-style vague precisions and a
vague flat ``Uniform(0, 1e6)`` scale.
Each model comes with its log integrand over the hyperparameters two ways (see
``applied_models``)."""

from __future__ import annotations

import numpy as np
from scipy import special

from .applied_numeric import (
    GaussianSpec,
    dense_mvn,
    design_cov,
    gamma_u,
    halfnormal_u,
    oneway_marginal,
    slopes_marginal,
)


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


def _hier_dense(U):
    y, g, J = _hier_data()
    Zg = np.eye(J)[g]
    one = np.ones((y.size, 1))
    m = U.shape[0]
    cov = design_cov([(one, np.full(m, 25.0)), (Zg, np.exp(2 * U[:, 0]))], np.exp(2 * U[:, 1]))
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
    return dense_mvn(y, 0.0, design_cov(blocks, np.exp(2 * U[:, 2]))) + _slopes_prior(U)


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
    return dense_mvn(y, 0.0, design_cov(blocks, np.exp(-U[:, 1]))) + _bugs_prior(U)


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
    cov = design_cov([(np.ones((y.size, 1)), np.full(m, 1e6))], np.exp(-U[:, 0]))
    return dense_mvn(y, 0.0, cov) + gamma_u(U[:, 0], EPS, EPS)



UNIFORM_UPPER = 1e6


def _uniform_scale_data(n=25, seed=309):
    return np.random.default_rng(seed).normal(3.0, 2.0, size=n)


def uniform_scale():
    """A normal sample with a vague flat scale: ``σ ~ Uniform(0, 1e6)``, ``μ ~ N(0, 1000²)``."""
    import pymc as pm

    y = _uniform_scale_data()
    with pm.Model(coords={"obs": np.arange(y.size)}) as model:
        mu = pm.Normal("mu", 0.0, 1000.0)
        sigma = pm.Uniform("sigma", 0.0, UNIFORM_UPPER)
        pm.Normal("y", mu, sigma, observed=y, dims="obs")
    return model


def _uniform_u(u):
    # σ = 1e6·logistic(u): the flat density 1e-6 times the Jacobian 1e6·s(u)·s(−u)
    return -np.logaddexp(0.0, -u) - np.logaddexp(0.0, u)


def _uniform_scale_fast(U):
    y = _uniform_scale_data()
    sigma = UNIFORM_UPPER * special.expit(U[:, 0])
    g = np.zeros(y.size, dtype=int)
    return oneway_marginal(y, g, 1, 0.0, sigma, 0.0, 1e3) + _uniform_u(U[:, 0])


def _uniform_scale_dense(U):
    y = _uniform_scale_data()
    sigma = UNIFORM_UPPER * special.expit(U[:, 0])
    cov = design_cov([(np.ones((y.size, 1)), np.full(U.shape[0], 1e6))], sigma**2)
    return dense_mvn(y, 0.0, cov) + _uniform_u(U[:, 0])


HIER_SPECS = [
    GaussianSpec("applied_hier60_centred", lambda: hier_gauss(True),
                 ["tau_log__", "sigma_log__"], _hier_fast, _hier_dense, n_is=12_000),
    GaussianSpec("applied_hier60_noncentred", lambda: hier_gauss(False),
                 ["tau_log__", "sigma_log__"], _hier_fast, _hier_dense, n_is=12_000),
    GaussianSpec("applied_random_slopes", random_slopes,
                 ["sigma_a_log__", "sigma_b_log__", "sigma_log__"], _slopes_fast, _slopes_dense,
                 n_is=12_000),
    GaussianSpec("applied_bugs_oneway", bugs_oneway, ["tau_a_log__", "tau_y_log__"],
                 _bugs_fast, _bugs_dense, n_is=20_000),
    GaussianSpec("applied_bugs_normal", bugs_normal, ["tau_log__"], _bugs_normal_fast,
                 _bugs_normal_dense, n_is=20_000),
    GaussianSpec("applied_uniform_scale", uniform_scale, ["sigma_interval__"],
                 _uniform_scale_fast, _uniform_scale_dense, n_is=20_000),
]  # fmt: skip
