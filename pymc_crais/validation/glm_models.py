"""The validation cases without a closed form: logistic, binomial and Poisson GLMs on
synthetic and real data, whose references come from two independent long computations
(``benchmarks/references/``, read through :func:`pymc_crais.validation.cases.load_references`)."""

from __future__ import annotations

import numpy as np
from scipy import special

from . import data as _data

# ----------------------------------------------------------------------------- GLMs


def glm(X, y, family, prior_sd, intercept_sd=None, trials=None):
    import pymc as pm

    X = np.asarray(X, float)
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, prior_sd, shape=X.shape[1])
        eta = pm.math.dot(X, beta)
        if intercept_sd is not None:
            eta = pm.Normal("alpha", 0.0, intercept_sd) + eta
        if family == "bernoulli":
            pm.Bernoulli("y", logit_p=eta, observed=y)
        elif family == "binomial":
            pm.Binomial("y", n=trials, logit_p=eta, observed=y)
        elif family == "poisson":
            pm.Poisson("y", pm.math.exp(eta), observed=y)
        else:  # pragma: no cover
            raise ValueError(family)
    return model


def logistic_synthetic(n, p, prior_sd, intercept_sd=None, seed=10):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    beta = rng.normal(0.0, 1.0, size=p)
    eta = X @ beta + (0.5 if intercept_sd is not None else 0.0)
    y = rng.binomial(1, special.expit(eta))
    return glm(X, y, "bernoulli", prior_sd, intercept_sd), None, None, None


def poisson_synthetic(n, p, prior_sd, intercept_sd=None, seed=11):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)) / np.sqrt(p)
    beta = rng.normal(0.0, 0.7, size=p)
    y = rng.poisson(np.exp(X @ beta + (1.0 if intercept_sd is not None else 0.0)))
    return glm(X, y, "poisson", prior_sd, intercept_sd), None, None, None


def pima(prior_sd=5.0, intercept_sd=None):
    from ..datasets import load_pima

    ds = load_pima()
    return glm(ds.X, ds.y, "bernoulli", prior_sd, intercept_sd), None, None, None


def sonar(prior_sd=5.0, intercept_sd=None):
    from ..datasets import load_sonar

    ds = load_sonar()
    return glm(ds.X, ds.y, "bernoulli", prior_sd, intercept_sd), None, None, None


def challenger(prior_sd=2.5):
    t = _data.CHALLENGER[:, 0]
    X = ((t - t.mean()) / t.std())[:, None]
    return (
        glm(X, _data.CHALLENGER[:, 1].astype(int), "bernoulli", prior_sd, prior_sd),
        None,
        None,
        None,
    )


def beetles(prior_sd=10.0):
    dose, n, k = _data.BEETLES.T
    X = ((dose - dose.mean()) / dose.std())[:, None]
    return (
        glm(X, k.astype(int), "binomial", prior_sd, prior_sd, trials=n.astype(int)),
        None, None, None,
    )  # fmt: skip


def coal_trend(prior_sd=1.0):
    """Poisson log-linear trend (intercept, year, year²) on the coal-mining counts."""
    counts, years = _data.COAL_DISASTERS, _data.COAL_YEARS
    keep = np.isfinite(counts)
    t = (years[keep] - years[keep].mean()) / years[keep].std()
    X = np.stack([t, t**2], axis=1)
    return glm(X, counts[keep].astype(int), "poisson", prior_sd, prior_sd), None, None, None
