"""The validation cases with exact ``log Z``: closed forms (conjugate Gaussian regressions,
Normal-Inverse-Gamma, Beta-Binomial, Gamma-Poisson, Dirichlet-Multinomial) and 1-D/2-D
quadrature of conjugate marginals (hierarchical scales, Student-t likelihoods, bimodal and
mixture targets, a discrete switchpoint summed out). Each factory returns the model, ``log Z``
and how it was obtained; :mod:`pymc_crais.validation.cases` registers them."""

from __future__ import annotations

import numpy as np
from scipy import integrate, special, stats

from . import data as _data
from .numeric import quad_log

# ----------------------------------------------------------------------------- helpers


def mvn_logpdf(y, cov) -> float:
    return float(stats.multivariate_normal(np.zeros(len(y)), cov, allow_singular=False).logpdf(y))


def gamma_poisson_logm(y, a, b) -> float:
    """log ∫ Π Poisson(y_i; λ) Gamma(λ; a, rate b) dλ."""
    y = np.asarray(y, dtype=float)
    S, n = y.sum(), y.size
    return float(
        -special.gammaln(y + 1).sum()
        + a * np.log(b)
        - special.gammaln(a)
        + special.gammaln(a + S)
        - (a + S) * np.log(b + n)
    )


# ----------------------------------------------------------------------------- Gaussian


def linreg_known(n, d, sigma=0.5, prior_sd=1.0, seed=0):
    import pymc as pm

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X @ rng.normal(0.0, prior_sd, size=d) + rng.normal(0.0, sigma, size=n)
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, prior_sd, shape=d)
        pm.Normal("y", pm.math.dot(X, beta), sigma, observed=y)
    log_z = mvn_logpdf(y, sigma**2 * np.eye(n) + prior_sd**2 * X @ X.T)
    return model, log_z, 0.0, "closed form: y ~ N(0, σ²I + s²XXᵀ)"


def linreg_nig(n, p, a0=3.0, b0=2.0, g=1.0, seed=0):
    """σ² ~ InvGamma(a0, b0), β | σ² ~ N(0, g σ² I), y ~ N(Xβ, σ²)."""
    import pymc as pm

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    sigma = 0.8
    y = X @ rng.normal(0.0, sigma * np.sqrt(g), size=p) + rng.normal(0.0, sigma, size=n)
    with pm.Model() as model:
        s2 = pm.InverseGamma("sigma2", alpha=a0, beta=b0)
        beta = pm.Normal("beta", 0.0, pm.math.sqrt(g * s2), shape=p)
        pm.Normal("y", pm.math.dot(X, beta), pm.math.sqrt(s2), observed=y)
    shape = (b0 / a0) * (np.eye(n) + g * X @ X.T)
    log_z = float(stats.multivariate_t(np.zeros(n), shape, df=2 * a0).logpdf(y))
    return model, log_z, 0.0, "closed form (Normal-Inverse-Gamma): y ~ t_{2a}(0, (b/a)(I + gXXᵀ))"


def nonidentified(n=20, prior_sd=10.0, sigma=1.0, seed=3):
    """y ~ N(a + b, σ): only a + b is identified; the posterior is a long thin ridge."""
    import pymc as pm

    y = np.random.default_rng(seed).normal(1.0, sigma, size=n)
    with pm.Model() as model:
        a = pm.Normal("a", 0.0, prior_sd)
        b = pm.Normal("b", 0.0, prior_sd)
        pm.Normal("y", a + b, sigma, observed=y)
    log_z = mvn_logpdf(y, sigma**2 * np.eye(n) + 2 * prior_sd**2 * np.ones((n, n)))
    return model, log_z, 0.0, "closed form: y ~ N(0, σ²I + 2s²11ᵀ)"


# ----------------------------------------------------------------------------- conjugate


def beta_binomial_data(seed=2):
    """The Beta-Binomial case's data: trials ``n`` and successes ``k`` (p = 0.3)."""
    n = np.array([10, 20, 15, 30])
    return n, np.random.default_rng(seed).binomial(n, 0.3)


def beta_binomial(a=2.0, b=3.0, seed=2):
    import pymc as pm

    n, k = beta_binomial_data(seed)
    with pm.Model() as model:
        p = pm.Beta("p", a, b)
        pm.Binomial("k", n=n, p=p, observed=k)
    log_z = (
        np.sum(special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1))
        + special.betaln(a + k.sum(), b + (n - k).sum())
        - special.betaln(a, b)
    )
    return model, float(log_z), 0.0, "closed form (Beta-Binomial)"


def gamma_poisson(a=0.5, b=1.0):
    """Few small counts and a shape-0.5 prior: a skewed posterior piled up near 0."""
    import pymc as pm

    y = np.array([0, 1, 0])
    with pm.Model() as model:
        lam = pm.Gamma("lam", alpha=a, beta=b)
        pm.Poisson("y", lam, observed=y)
    return model, gamma_poisson_logm(y, a, b), 0.0, "closed form (Gamma-Poisson)"


def dirichlet_multinomial(seed=4):
    import pymc as pm

    alpha = np.array([1.0, 2.0, 0.5, 1.0, 3.0])
    rng = np.random.default_rng(seed)
    N = np.array([12, 30, 7])
    counts = np.stack([rng.multinomial(m, [0.1, 0.3, 0.05, 0.25, 0.3]) for m in N])
    with pm.Model() as model:
        p = pm.Dirichlet("p", a=alpha)
        pm.Multinomial("x", n=N, p=p, observed=counts)

    def lnB(a):
        return special.gammaln(a).sum() - special.gammaln(a.sum())

    log_z = (
        np.sum(special.gammaln(N + 1)) - np.sum(special.gammaln(counts + 1))
        + lnB(alpha + counts.sum(0)) - lnB(alpha)
    )  # fmt: skip
    return model, float(log_z), 0.0, "closed form (Dirichlet-Multinomial)"


def halfcauchy_scale(n=10, seed=6):
    """y ~ N(0, σ), σ ~ HalfCauchy(1): a positive parameter with a heavy-tailed prior."""
    import pymc as pm

    y = np.random.default_rng(seed).normal(0.0, 2.0, size=n)
    with pm.Model() as model:
        s = pm.HalfCauchy("sigma", 1.0)
        pm.Normal("y", 0.0, s, observed=y)
    ss = float(np.sum(y**2))

    def f(ls):  # integrate over log σ (smooth, unbounded)
        s = np.exp(ls)
        return (
            np.log(2 / np.pi) - np.log1p(s * s) + ls
            - 0.5 * n * np.log(2 * np.pi * s * s) - 0.5 * ss / (s * s)
        )  # fmt: skip

    return model, quad_log(f, -30.0, 30.0), 0.0, "1-D quadrature over log σ"


# ----------------------------------------------------------------------------- hierarchical


def hier_marginal_cov(tau, sigma_obs, groups, mu_sd):
    n = groups.size
    Z = (groups[:, None] == np.unique(groups)[None, :]).astype(float)
    return (
        np.diag(np.broadcast_to(np.asarray(sigma_obs, float) ** 2, (n,)))
        + tau**2 * Z @ Z.T
        + mu_sd**2
    )


def hier_log_z(y, sigma_obs, groups, mu_sd, log_prior_tau, upper=np.inf):
    """∫ p(τ) N(y; 0, diag(σ²) + τ² ZZᵀ + s_μ² 11ᵀ) dτ: θ and μ are integrated analytically."""

    def f(tau):
        return log_prior_tau(tau) + mvn_logpdf(y, hier_marginal_cov(tau, sigma_obs, groups, mu_sd))

    grid = np.linspace(1e-6, 30.0, 601)
    vals = np.array([f(t) for t in grid])
    c = float(grid[np.argmax(vals)])
    fmax = f(c)
    opts = {"epsabs": 0.0, "epsrel": 1e-11, "limit": 500}
    v1, _ = integrate.quad(lambda t: np.exp(f(t) - fmax), 0.0, c, **opts) if c > 0 else (0.0, 0)
    v2, _ = integrate.quad(lambda t: np.exp(f(t) - fmax), c, upper, **opts)
    return float(fmax + np.log(v1 + v2))


def hier_synthetic(centered: bool, J=8, per=3, sigma=1.0, mu_sd=5.0, tau_sd=2.5, seed=7):
    """Weak data on small group effects: the centred form is a funnel in (τ, θ)."""
    import pymc as pm

    rng = np.random.default_rng(seed)
    theta = 1.0 + 0.3 * rng.normal(size=J)
    groups = np.repeat(np.arange(J), per)
    y = theta[groups] + rng.normal(0.0, sigma, size=groups.size)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, mu_sd)
        tau = pm.HalfNormal("tau", tau_sd)
        if centered:
            th = pm.Normal("theta", mu, tau, shape=J)
        else:
            z = pm.Normal("z", 0.0, 1.0, shape=J)
            th = pm.Deterministic("theta", mu + tau * z)
        pm.Normal("y", th[groups], sigma, observed=y)
    log_z = hier_log_z(
        y, sigma, groups, mu_sd, lambda t: stats.halfnorm(scale=tau_sd).logpdf(t), upper=60.0
    )
    return model, log_z, 0.0, "1-D quadrature over τ of the Gaussian marginal (θ, μ integrated)"


def eight_schools(centered: bool, mu_sd=5.0, tau_beta=5.0):
    import pymc as pm

    y, s = _data.EIGHT_SCHOOLS["y"], _data.EIGHT_SCHOOLS["sigma"]
    J = y.size
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, mu_sd)
        tau = pm.HalfCauchy("tau", tau_beta)
        if centered:
            th = pm.Normal("theta", mu, tau, shape=J)
        else:
            z = pm.Normal("z", 0.0, 1.0, shape=J)
            th = pm.Deterministic("theta", mu + tau * z)
        pm.Normal("y", th, s, observed=y)
    log_z = hier_log_z(
        y, s, np.arange(J), mu_sd, lambda t: stats.halfcauchy(scale=tau_beta).logpdf(t)
    )
    return model, log_z, 0.0, "1-D quadrature over τ of the Gaussian marginal (θ, μ integrated)"


# ----------------------------------------------------------------------------- heavy tails


T_LOC_Y = np.array([-1.2, -0.4, 0.1, 0.3, 0.9, 1.4, 7.5, 8.2])


def student_t_location(nu=3.0, prior_sd=10.0):
    """Outliers under a t_3 likelihood: a skewed, heavy-tailed posterior for the location."""
    import pymc as pm

    y = T_LOC_Y
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, prior_sd)
        pm.StudentT("y", nu=nu, mu=mu, sigma=1.0, observed=y)

    def f(m):
        m = np.asarray(m, dtype=float)
        return stats.norm(0, prior_sd).logpdf(m) + stats.t(nu).logpdf(y - m[..., None]).sum(-1)

    log_z = quad_log(f, -150.0, 150.0, points=[float(np.median(y)), 7.8])
    return model, log_z, 0.0, "1-D quadrature over μ"


def student_t_loc_scale(nu=4.0, prior_sd=10.0, scale_sd=5.0, n=15, seed=8):
    import pymc as pm

    y = stats.t(nu).rvs(size=n, random_state=np.random.default_rng(seed)) * 1.5 + 2.0
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, prior_sd)
        s = pm.HalfNormal("sigma", scale_sd)
        pm.StudentT("y", nu=nu, mu=mu, sigma=s, observed=y)

    lo, hi = float(y.min()) - 130, float(y.max()) + 130
    c_t = special.gammaln((nu + 1) / 2) - special.gammaln(nu / 2) - 0.5 * np.log(nu * np.pi)
    c_n = -0.5 * np.log(2 * np.pi * prior_sd**2)
    c_h = 0.5 * np.log(2 / np.pi) - np.log(scale_sd)

    def inner(ls):  # log ∫ p(μ) Π t(y; μ, σ) dμ + log p(σ) + log σ (integration over log σ)
        s = np.exp(ls)

        def f(m):
            z = (y - np.asarray(m)[..., None]) / s
            lt = c_t - np.log(s) - 0.5 * (nu + 1) * np.log1p(z * z / nu)
            return c_n - 0.5 * (np.asarray(m) / prior_sd) ** 2 + lt.sum(-1)

        grid = np.linspace(lo, hi, 4001)
        c = float(grid[np.argmax(f(grid))])
        return quad_log(f, lo, hi, center=c, points=[c], epsrel=1e-10) + (
            c_h - 0.5 * (s / scale_sd) ** 2 + ls
        )

    log_z = quad_log(inner, -8.0, 5.0, center=float(np.log(np.std(y))), epsrel=1e-9)
    return model, log_z, 0.0, "2-D quadrature (nested) over μ and log σ"


# ----------------------------------------------------------------------------- multimodal


def mixture_normalized(d=10, prior_sd=5.0, weights=(0.5, 0.3, 0.2), sds=(0.5, 0.8, 1.0)):
    """The joint density is a normalized 3-component Gaussian mixture: log Z = 0 exactly.

    ``x ~ N(0, prior_sd²)`` plus ``Potential(log mixture(x) − log N(x; 0, prior_sd²))``;
    means ``+2·1``, ``−2·1`` and alternating ``±2``.
    """
    import pymc as pm
    import pytensor.tensor as pt

    w = np.asarray(weights, dtype=float)
    alt = np.where(np.arange(d) % 2 == 0, 2.0, -2.0)
    means = np.stack([np.full(d, 2.0), np.full(d, -2.0), alt])
    sds = np.asarray(sds, dtype=float)
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, prior_sd, shape=d)
        comps = [
            np.log(w[k]) + pm.logp(pm.Normal.dist(means[k], sds[k]), x).sum() for k in range(3)
        ]
        prior = pm.logp(pm.Normal.dist(0.0, prior_sd), x).sum()
        pm.Potential("mixture", pt.logsumexp(pt.stack(comps)) - prior)
    return model, 0.0, 0.0, "exact: the joint density is a normalized mixture (log Z = 0)"


def normal_prior_times_mixture(d, prior_sd, weights, means, sds):
    """``x ~ N(0, prior_sd² I)`` times a ``Potential`` equal to a normalized Gaussian mixture
    density (component ``k``: weight ``weights[k]``, mean ``means[k]``, sd ``sds[k]`` per
    coordinate): ``Z = Σ_k w_k N(m_k; 0, (s² + s_k²) I)``. Returns ``(model, log Z)``."""
    import pymc as pm
    import pytensor.tensor as pt

    w, means, sds = np.asarray(weights), np.asarray(means), np.asarray(sds)
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, prior_sd, shape=d)
        comps = [
            np.log(w[k]) + pm.logp(pm.Normal.dist(means[k], sds[k]), x).sum()
            for k in range(w.size)
        ]
        pm.Potential("mixture", pt.logsumexp(pt.stack(comps)))
    log_z = special.logsumexp(
        [
            np.log(w[k]) + mvn_logpdf(means[k], (prior_sd**2 + sds[k] ** 2) * np.eye(d))
            for k in range(w.size)
        ]
    )
    return model, float(log_z)


def mixture_prior_times(d=2, prior_sd=3.0):
    """x ~ N(0, s²I) times a normalized 2-component mixture: Z = Σ w_k N(m_k; 0, (s² + s_k²)I)."""
    means = np.stack([np.full(d, -3.0), np.full(d, 3.0)])
    model, log_z = normal_prior_times_mixture(d, prior_sd, [0.3, 0.7], means, [0.5, 0.3])
    return model, log_z, 0.0, "closed form: Σ_k w_k N(m_k; 0, (s² + s_k²)I)"


def bimodal_square(n=10, prior_sd=2.0, seed=9):
    """y ~ N(θ², 1): θ and −θ fit equally, a symmetric bimodal posterior (modes near ±1.5)."""
    import pymc as pm

    y = np.random.default_rng(seed).normal(2.25, 1.0, size=n)
    with pm.Model() as model:
        th = pm.Normal("theta", 0.0, prior_sd)
        pm.Normal("y", th**2, 1.0, observed=y)

    def f(t):
        return stats.norm(0, prior_sd).logpdf(t) + stats.norm(t * t, 1.0).logpdf(y).sum()

    m = float(np.sqrt(max(y.mean(), 0.1)))
    log_z = quad_log(f, -30.0, 30.0, center=m, points=[-m, 0.0, m])
    return model, log_z, 0.0, "1-D quadrature over θ"


# ----------------------------------------------------------------------------- discrete


def coal_switchpoint():
    """Coal-mining disasters with a discrete switchpoint; exact by summing over the switchpoint
    (each regime's rate is Exponential(1) = Gamma(1, 1), conjugate to the Poisson counts)."""
    import pymc as pm

    counts, years = _data.COAL_DISASTERS, _data.COAL_YEARS
    keep = np.isfinite(counts)
    y, yrs = counts[keep].astype(int), years[keep]
    with pm.Model() as model:
        s = pm.DiscreteUniform("switchpoint", lower=years.min(), upper=years.max())
        early = pm.Exponential("early_rate", 1.0)
        late = pm.Exponential("late_rate", 1.0)
        rate = pm.math.switch(s >= yrs, early, late)
        pm.Poisson("disasters", rate, observed=y)
    terms = []
    for sp in years:
        e = yrs <= sp
        terms.append(gamma_poisson_logm(y[e], 1.0, 1.0) + gamma_poisson_logm(y[~e], 1.0, 1.0))
    log_z = special.logsumexp(terms) - np.log(years.size)
    return model, float(log_z), 0.0, "exact: sum over the switchpoint of Gamma-Poisson marginals"
