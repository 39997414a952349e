"""Models whose evidence is known in closed form, shared by the tests and benchmarks.

(They lived in ``tests/exact_models.py`` and ``benchmarks/mcse_coverage.py``; the cases of the
validation suite are in :mod:`.cases`, the NumPy-core synthetic targets in
:mod:`.synthetic_targets`.)

Each builder returns the same model object for the same arguments within a process
(``functools.cache``): the samplers cache a model's compiled functions on the model object,
so tests that share a model compile it once per test session instead of once per test.
Treat the returned models as read-only (do not add variables to them).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from scipy import special, stats

from . import exact_models as vem


@dataclass
class ExactModel:
    name: str
    model: pm.Model
    log_z: float
    posterior_mean: dict | None = None


@functools.cache
def normal_mean(n: int = 20, sigma: float = 1.0, prior_sd: float = 2.0, seed: int = 0) -> ExactModel:
    """y_i ~ N(mu, sigma^2), mu ~ N(0, prior_sd^2)."""
    y = np.random.default_rng(seed).normal(1.0, sigma, size=n)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, prior_sd)
        pm.Normal("y", mu, sigma, observed=y)
    s2, t2 = sigma**2, prior_sd**2
    log_z = (
        -0.5 * n * np.log(2 * np.pi * s2)
        - 0.5 * np.log1p(n * t2 / s2)
        - 0.5 / s2 * (np.sum(y**2) - np.sum(y) ** 2 * t2 / (s2 + n * t2))
    )
    post_mean = (np.sum(y) / s2) / (n / s2 + 1 / t2)
    return ExactModel("normal_mean", model, float(log_z), {"mu": post_mean})


@functools.cache
def linear_regression(n: int = 50, d: int = 5, sigma: float = 0.5, prior_sd: float = 1.0, seed: int = 1) -> ExactModel:
    """Bayesian linear regression with known noise: log Z = log N(y; 0, σ²I + X Σ0 Xᵀ)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    beta = rng.normal(0.0, prior_sd, size=d)
    y = X @ beta + rng.normal(0.0, sigma, size=n)
    with pm.Model(coords={"feature": [f"x{i}" for i in range(d)]}) as model:
        Xd = pm.Data("X", X)
        b = pm.Normal("beta", 0.0, prior_sd, dims="feature")
        mu = pm.Deterministic("mu", Xd @ b)
        pm.Normal("y", mu, sigma, observed=y)
    cov = sigma**2 * np.eye(n) + prior_sd**2 * X @ X.T
    log_z = stats.multivariate_normal(np.zeros(n), cov).logpdf(y)
    prec = X.T @ X / sigma**2 + np.eye(d) / prior_sd**2
    post_mean = np.linalg.solve(prec, X.T @ y / sigma**2)
    return ExactModel("linear_regression", model, float(log_z), {"beta": post_mean})


@functools.cache
def beta_binomial(a: float = 2.0, b: float = 3.0, seed: int = 2) -> ExactModel:
    """k_i ~ Binomial(n_i, p), p ~ Beta(a, b): the validation suite's case (log-odds transformed)."""
    model, log_z, _, _ = vem.beta_binomial(a, b, seed)
    n, k = vem.beta_binomial_data(seed)
    return ExactModel("beta_binomial", model, log_z, {"p": (a + k.sum()) / (a + b + n.sum())})


@functools.cache
def poisson_normal() -> ExactModel:
    """k ~ Poisson(3) (discrete), y_i ~ N(k, 1): Z = Σ_k Poisson(k; 3) Π_i N(y_i; k, 1)."""
    y = np.array([2.2, 3.1, 1.7])
    with pm.Model() as model:
        k = pm.Poisson("k", 3.0)
        pm.Normal("y", k, 1.0, observed=y)
    ks = np.arange(60)
    log_z = special.logsumexp(stats.poisson(3.0).logpmf(ks) + stats.norm(ks[:, None], 1).logpdf(y).sum(1))
    return ExactModel("poisson_normal", model, float(log_z))


@functools.cache
def gaussian_mixture_potential(d: int = 3) -> ExactModel:
    """x ~ N(0, I) with a pm.Potential equal to a normalized two-component Gaussian mixture.

    Z = Σ_k w_k N(m_k; 0, I + S_k): a bimodal target with a closed-form evidence.
    """
    means = np.stack([np.full(d, -1.5), np.full(d, 1.5)])
    model, log_z = vem.normal_prior_times_mixture(d, 1.0, [0.3, 0.7], means, [0.5, 0.4])
    return ExactModel("gaussian_mixture_potential", model, log_z)


@functools.cache
def peaked_normal_mean(n: int = 20_000) -> ExactModel:
    """A normal-mean model with so much data that log Z is about -2.8e4."""
    return normal_mean(n=n, sigma=1.0, prior_sd=3.0, seed=5)



def linear_regression_density(n: int = 50, d: int = 5, sigma: float = 0.5, seed: int = 1):
    """The model of :func:`linear_regression` (prior N(0, I)) as a NumPy-core
    ``FunctionDensity``, with its exact log Z: ``(density, log_z)``."""
    from pymc_crais.core.density import FunctionDensity

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X @ rng.normal(size=d) + rng.normal(0.0, sigma, size=n)
    log_z = stats.multivariate_normal(np.zeros(n), sigma**2 * np.eye(n) + X @ X.T).logpdf(y)
    c_prior, c_lik = -0.5 * d * np.log(2 * np.pi), -0.5 * n * np.log(2 * np.pi * sigma**2)

    def log_q0(x):
        return c_prior - 0.5 * np.sum(x * x, axis=1)

    def log_target(x):
        r = y - x @ X.T
        return log_q0(x) + c_lik - 0.5 * np.sum(r * r, axis=1) / sigma**2

    def grad_target(x):
        return -x + (y - x @ X.T) @ X / sigma**2

    dens = FunctionDensity(d, log_q0, log_target, lambda x: -x, grad_target, lambda rng, m: rng.normal(size=(m, d)))
    return dens, float(log_z)


def assert_evidence(idata, log_z: float, max_mcse: float, bias: float = 0.02) -> None:
    """The run is precise (its within-chain MCSE is below ``max_mcse``) and the combined
    estimate is within 4·MCSE + bias of the exact log Z, with the reported MCSE (which
    also carries the t-inflated between-chain term: with 2 chains that term alone is
    6.5 times the spread of the chains, so it does not measure the run's precision)."""
    import pymc_crais as pmc

    value, mcse, details = pmc.log_marginal_likelihood(idata, return_details=True)
    own = details["mcse_within"] if np.isfinite(details["mcse_within"]) else mcse
    assert 0 < own < max_mcse, (value, own, mcse)
    assert abs(value - log_z) <= 4 * mcse + bias, (value, log_z, mcse)


def build_case(name: str):
    """``(model, exact log Z)`` of a named case."""
    if name == "d50_regression":  # issue 13: known noise, d = 50, n = 120
        c = linear_regression(n=120, d=50, sigma=1.0, prior_sd=1.0, seed=13)
    elif name == "mixture10":  # issue 13: 10-d mixture of 3 Gaussians as a Potential
        c = mixture_potential(10)
    elif name == "mixture10_unequal":  # the same with unequal widths, the narrowest heaviest
        c = mixture_potential(10, sds=(0.2, 0.5, 1.0), weights=(0.5, 0.3, 0.2))
    elif name == "mixture10_overlapping":  # x ~ N(0, I) times a 3-component mixture density
        c = overlapping_mixture(10)
    elif name in EXACT_MODELS:
        c = EXACT_MODELS[name]()
    else:  # a case of the validation suite (pymc_crais.validation), exact or reference
        from .cases import get_case

        inst = get_case(name).build()
        return inst.model, inst.log_z
    return c.model, c.log_z


def mixture_potential(d: int = 10, sds=(0.5, 0.5, 0.5), weights=(0.2, 0.3, 0.5)):
    """Issue 13's case: a 10-d mixture of 3 well-separated Gaussians as the target, exact
    ``log Z = 0``. ``x ~ N(0, 2² I)`` and the Potential is ``log mix(x) − log N(x; 0, 2² I)``,
    so the posterior is the normalized mixture itself (means ``+2·1``, ``−2·1`` and
    alternating ``±2``, sd 0.5, weights 0.2/0.3/0.5: modes 25 sd apart)."""
    from .exact_models import mixture_normalized

    model, log_z, _, _ = mixture_normalized(d, prior_sd=2.0, weights=weights, sds=sds)
    return ExactModel("mixture10", model, log_z)


def overlapping_mixture(d: int = 10):
    """``x ~ N(0, I)`` times a Potential equal to a normalized 3-component mixture density
    (means −1, alternating ±1, +1; sds 0.3, 0.4, 0.5): ``Z = Σ_k w_k N(m_k; 0, (1 + s_k²) I)``."""
    w = np.array([0.2, 0.3, 0.5])
    means = np.stack([np.full(d, -1.0), np.zeros(d), np.full(d, 1.0)])
    means[1, ::2] = 1.0
    sds = np.array([0.3, 0.4, 0.5])
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0, shape=d)
        comps = [
            np.log(w[j]) + pm.logp(pm.Normal.dist(means[j], sds[j]), x).sum() for j in range(3)
        ]
        pm.Potential("mixture", pt.logsumexp(pt.stack(comps)))
    log_z = special.logsumexp(
        [
            np.log(w[j])
            + stats.multivariate_normal(np.zeros(d), (1 + sds[j] ** 2) * np.eye(d)).logpdf(means[j])
            for j in range(3)
        ]
    )
    return ExactModel("mixture10_overlapping", model, float(log_z))


EXACT_MODELS = {
    f.__name__: f
    for f in (normal_mean, linear_regression, beta_binomial, poisson_normal,
              gaussian_mixture_potential, peaked_normal_mean)
}
"""The cached exact models by name (what :func:`build_case` looks up)."""
