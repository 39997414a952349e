"""Applied tier, non-Gaussian models: multilevel logistic, ordinal logistic, robust
Student-t, zero-inflated Poisson, censored regression, a truncated-normal prior and a
label-switching mixture; their references are importance sampling (and quadrature) on the
models' own densities (``applied_refs``)."""

from __future__ import annotations

import numpy as np
from scipy import special

from .applied_numeric import ISSpec


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



OTHER_SPECS = [
    ISSpec("applied_multilevel_logistic", multilevel_logistic,
           ref_model=lambda: multilevel_logistic(centred=False), conditional="sigma_a_log__"),
    ISSpec("applied_ordinal", ordinal_logistic),
    ISSpec("applied_robust_t", robust_t),
    ISSpec("applied_zip", zero_inflated_poisson),
    ISSpec("applied_censored", censored_regression, quadrature=True),
    ISSpec("applied_truncnormal_prior", truncnormal_prior, quadrature=True),
    ISSpec("applied_mixture_label_switching", label_switching_mixture,
           relabel=_mixture_relabel, x0=lambda bl: np.array([0.0, -1.0, 1.0, 0.0])),
]  # fmt: skip
