"""The cases of the evidence validation suite: PyMC models with a reference ``log Z``.

Each :class:`Case` carries its tags (family, modality, reference type, dimension ``d`` of
the continuous parameter space, number of observations ``n``) and a factory; ``case.build()``
returns a :class:`CaseInstance` with a fresh ``pymc.Model``, the reference ``log Z``, its
MCSE (0 when exact) and how it was obtained.

Reference types:

* ``exact``: closed form, or a 1-D/2-D quadrature of a conjugate marginal (relative tolerance
  ~1e-10, reported as MCSE 0). PyMC's transforms carry their Jacobians, so ``log Z`` does not
  depend on the parameterization (centred and non-centred models share theirs).
* ``reference``: no closed form; two independent long computations that agree (importance
  sampling from a Student-t at the Laplace mode with Pareto k̂ < 0.5, and bridge sampling on
  NUTS draws) are stored in ``pymc_crais/data/validation_references.json`` by
  ``benchmarks/references/compute_references.py``; the reference is their
  inverse-variance-weighted mean and its MCSE the larger of that mean's standard error and
  half their difference.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

import numpy as np
from scipy import integrate, special, stats

from . import data as _data
from .numeric import quad_log

__all__ = ["CASES", "QUICK", "Case", "CaseInstance", "cases", "get_case"]


@dataclass
class CaseInstance:
    """A built case: the model and its reference evidence."""

    name: str
    model: object  # pymc.Model
    log_z: float
    log_z_mcse: float  # 0 for exact references
    method: str  # how the reference was obtained


@dataclass(frozen=True)
class Case:
    """A validation case: tags plus a factory returning ``(model, log_z, mcse, method)``."""

    name: str
    family: str
    modality: str  # "unimodal" | "multimodal"
    reference: str  # "exact" | "reference"
    d: int  # continuous parameters (unconstrained)
    n: int  # observations
    description: str
    factory: object = field(repr=False)
    discrete: bool = False

    @property
    def tags(self) -> tuple[str, ...]:
        extra = ("discrete",) if self.discrete else ()
        return (self.family, self.modality, self.reference, *extra)

    def build_model(self):
        """Only the ``pymc.Model`` (no reference: works before references are computed)."""
        return self.factory()[0]

    def build(self) -> CaseInstance:
        model, log_z, mcse, method = self.factory()
        if log_z is None:
            ref = load_references().get(self.name)
            if ref is None:
                raise KeyError(
                    f"no stored reference for case {self.name!r}; run "
                    "benchmarks/references/compute_references.py"
                )
            log_z, mcse, method = ref["log_z"], ref["mcse"], ref["method"]
        return CaseInstance(self.name, model, float(log_z), float(mcse), method)


@cache
def load_references() -> dict:
    """The stored references of the ``reference`` cases (``name -> dict``)."""
    path = resources.files("pymc_crais").joinpath("data", "validation_references.json")
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}


# ----------------------------------------------------------------------------- helpers


def _mvn_logpdf(y, cov) -> float:
    return float(stats.multivariate_normal(np.zeros(len(y)), cov, allow_singular=False).logpdf(y))


def _gamma_poisson_logm(y, a, b) -> float:
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


def _linreg_known(n, d, sigma=0.5, prior_sd=1.0, seed=0):
    import pymc as pm

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X @ rng.normal(0.0, prior_sd, size=d) + rng.normal(0.0, sigma, size=n)
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, prior_sd, shape=d)
        pm.Normal("y", pm.math.dot(X, beta), sigma, observed=y)
    log_z = _mvn_logpdf(y, sigma**2 * np.eye(n) + prior_sd**2 * X @ X.T)
    return model, log_z, 0.0, "closed form: y ~ N(0, σ²I + s²XXᵀ)"


def _linreg_nig(n, p, a0=3.0, b0=2.0, g=1.0, seed=0):
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


def _nonidentified(n=20, prior_sd=10.0, sigma=1.0, seed=3):
    """y ~ N(a + b, σ): only a + b is identified; the posterior is a long thin ridge."""
    import pymc as pm

    y = np.random.default_rng(seed).normal(1.0, sigma, size=n)
    with pm.Model() as model:
        a = pm.Normal("a", 0.0, prior_sd)
        b = pm.Normal("b", 0.0, prior_sd)
        pm.Normal("y", a + b, sigma, observed=y)
    log_z = _mvn_logpdf(y, sigma**2 * np.eye(n) + 2 * prior_sd**2 * np.ones((n, n)))
    return model, log_z, 0.0, "closed form: y ~ N(0, σ²I + 2s²11ᵀ)"


# ----------------------------------------------------------------------------- conjugate


def _beta_binomial(a=2.0, b=3.0, seed=2):
    import pymc as pm

    rng = np.random.default_rng(seed)
    n = np.array([10, 20, 15, 30])
    k = rng.binomial(n, 0.3)
    with pm.Model() as model:
        p = pm.Beta("p", a, b)
        pm.Binomial("k", n=n, p=p, observed=k)
    log_z = (
        np.sum(special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1))
        + special.betaln(a + k.sum(), b + (n - k).sum())
        - special.betaln(a, b)
    )
    return model, float(log_z), 0.0, "closed form (Beta-Binomial)"


def _gamma_poisson(a=0.5, b=1.0):
    """Few small counts and a shape-0.5 prior: a skewed posterior piled up near 0."""
    import pymc as pm

    y = np.array([0, 1, 0])
    with pm.Model() as model:
        lam = pm.Gamma("lam", alpha=a, beta=b)
        pm.Poisson("y", lam, observed=y)
    return model, _gamma_poisson_logm(y, a, b), 0.0, "closed form (Gamma-Poisson)"


def _dirichlet_multinomial(seed=4):
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


def _halfcauchy_scale(n=10, seed=6):
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


def _hier_marginal_cov(tau, sigma_obs, groups, mu_sd):
    n = groups.size
    Z = (groups[:, None] == np.unique(groups)[None, :]).astype(float)
    return (
        np.diag(np.broadcast_to(np.asarray(sigma_obs, float) ** 2, (n,)))
        + tau**2 * Z @ Z.T
        + mu_sd**2
    )


def _hier_log_z(y, sigma_obs, groups, mu_sd, log_prior_tau, upper=np.inf):
    """∫ p(τ) N(y; 0, diag(σ²) + τ² ZZᵀ + s_μ² 11ᵀ) dτ: θ and μ are integrated analytically."""

    def f(tau):
        return log_prior_tau(tau) + _mvn_logpdf(
            y, _hier_marginal_cov(tau, sigma_obs, groups, mu_sd)
        )

    grid = np.linspace(1e-6, 30.0, 601)
    vals = np.array([f(t) for t in grid])
    c = float(grid[np.argmax(vals)])
    fmax = f(c)
    opts = {"epsabs": 0.0, "epsrel": 1e-11, "limit": 500}
    v1, _ = integrate.quad(lambda t: np.exp(f(t) - fmax), 0.0, c, **opts) if c > 0 else (0.0, 0)
    v2, _ = integrate.quad(lambda t: np.exp(f(t) - fmax), c, upper, **opts)
    return float(fmax + np.log(v1 + v2))


def _hier_synthetic(centered: bool, J=8, per=3, sigma=1.0, mu_sd=5.0, tau_sd=2.5, seed=7):
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
    log_z = _hier_log_z(
        y, sigma, groups, mu_sd, lambda t: stats.halfnorm(scale=tau_sd).logpdf(t), upper=60.0
    )
    return model, log_z, 0.0, "1-D quadrature over τ of the Gaussian marginal (θ, μ integrated)"


def _eight_schools(centered: bool, mu_sd=5.0, tau_beta=5.0):
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
    log_z = _hier_log_z(
        y, s, np.arange(J), mu_sd, lambda t: stats.halfcauchy(scale=tau_beta).logpdf(t)
    )
    return model, log_z, 0.0, "1-D quadrature over τ of the Gaussian marginal (θ, μ integrated)"


# ----------------------------------------------------------------------------- heavy tails


_T_LOC_Y = np.array([-1.2, -0.4, 0.1, 0.3, 0.9, 1.4, 7.5, 8.2])


def _student_t_location(nu=3.0, prior_sd=10.0):
    """Outliers under a t_3 likelihood: a skewed, heavy-tailed posterior for the location."""
    import pymc as pm

    y = _T_LOC_Y
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, prior_sd)
        pm.StudentT("y", nu=nu, mu=mu, sigma=1.0, observed=y)

    def f(m):
        m = np.asarray(m, dtype=float)
        return stats.norm(0, prior_sd).logpdf(m) + stats.t(nu).logpdf(y - m[..., None]).sum(-1)

    log_z = quad_log(f, -150.0, 150.0, points=[float(np.median(y)), 7.8])
    return model, log_z, 0.0, "1-D quadrature over μ"


def _student_t_loc_scale(nu=4.0, prior_sd=10.0, scale_sd=5.0, n=15, seed=8):
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


def _mixture_normalized(d=10, prior_sd=5.0):
    """The joint density is a normalized 3-component Gaussian mixture: log Z = 0 exactly.

    ``x ~ N(0, prior_sd²)`` plus ``Potential(log mixture(x) − log N(x; 0, prior_sd²))``.
    """
    import pymc as pm
    import pytensor.tensor as pt

    w = np.array([0.5, 0.3, 0.2])
    alt = np.where(np.arange(d) % 2 == 0, 2.0, -2.0)
    means = np.stack([np.full(d, 2.0), np.full(d, -2.0), alt])
    sds = np.array([0.5, 0.8, 1.0])
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, prior_sd, shape=d)
        comps = [
            np.log(w[k]) + pm.logp(pm.Normal.dist(means[k], sds[k]), x).sum() for k in range(3)
        ]
        prior = pm.logp(pm.Normal.dist(0.0, prior_sd), x).sum()
        pm.Potential("mixture", pt.logsumexp(pt.stack(comps)) - prior)
    return model, 0.0, 0.0, "exact: the joint density is a normalized mixture (log Z = 0)"


def _mixture_prior_times(d=2, prior_sd=3.0):
    """x ~ N(0, s²I) times a normalized 2-component mixture: Z = Σ w_k N(m_k; 0, (s² + s_k²)I)."""
    import pymc as pm
    import pytensor.tensor as pt

    w = np.array([0.3, 0.7])
    means = np.stack([np.full(d, -3.0), np.full(d, 3.0)])
    sds = np.array([0.5, 0.3])
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, prior_sd, shape=d)
        comps = [
            np.log(w[k]) + pm.logp(pm.Normal.dist(means[k], sds[k]), x).sum() for k in range(2)
        ]
        pm.Potential("mixture", pt.logsumexp(pt.stack(comps)))
    log_z = special.logsumexp(
        [
            np.log(w[k]) + _mvn_logpdf(means[k], (prior_sd**2 + sds[k] ** 2) * np.eye(d))
            for k in range(2)
        ]
    )
    return model, float(log_z), 0.0, "closed form: Σ_k w_k N(m_k; 0, (s² + s_k²)I)"


def _bimodal_square(n=10, prior_sd=2.0, seed=9):
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


def _coal_switchpoint():
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
        terms.append(_gamma_poisson_logm(y[e], 1.0, 1.0) + _gamma_poisson_logm(y[~e], 1.0, 1.0))
    log_z = special.logsumexp(terms) - np.log(years.size)
    return model, float(log_z), 0.0, "exact: sum over the switchpoint of Gamma-Poisson marginals"


# ----------------------------------------------------------------------------- GLMs


def _glm(X, y, family, prior_sd, intercept_sd=None, trials=None):
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


def _logistic_synthetic(n, p, prior_sd, intercept_sd=None, seed=10):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    beta = rng.normal(0.0, 1.0, size=p)
    eta = X @ beta + (0.5 if intercept_sd is not None else 0.0)
    y = rng.binomial(1, special.expit(eta))
    return _glm(X, y, "bernoulli", prior_sd, intercept_sd), None, None, None


def _poisson_synthetic(n, p, prior_sd, intercept_sd=None, seed=11):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)) / np.sqrt(p)
    beta = rng.normal(0.0, 0.7, size=p)
    y = rng.poisson(np.exp(X @ beta + (1.0 if intercept_sd is not None else 0.0)))
    return _glm(X, y, "poisson", prior_sd, intercept_sd), None, None, None


def _pima(prior_sd=5.0, intercept_sd=None):
    from ..datasets import load_pima

    ds = load_pima()
    return _glm(ds.X, ds.y, "bernoulli", prior_sd, intercept_sd), None, None, None


def _sonar(prior_sd=5.0, intercept_sd=None):
    from ..datasets import load_sonar

    ds = load_sonar()
    return _glm(ds.X, ds.y, "bernoulli", prior_sd, intercept_sd), None, None, None


def _challenger(prior_sd=2.5):
    t = _data.CHALLENGER[:, 0]
    X = ((t - t.mean()) / t.std())[:, None]
    return (
        _glm(X, _data.CHALLENGER[:, 1].astype(int), "bernoulli", prior_sd, prior_sd),
        None,
        None,
        None,
    )


def _beetles(prior_sd=10.0):
    dose, n, k = _data.BEETLES.T
    X = ((dose - dose.mean()) / dose.std())[:, None]
    return (
        _glm(X, k.astype(int), "binomial", prior_sd, prior_sd, trials=n.astype(int)),
        None, None, None,
    )  # fmt: skip


def _coal_trend(prior_sd=1.0):
    """Poisson log-linear trend (intercept, year, year²) on the coal-mining counts."""
    counts, years = _data.COAL_DISASTERS, _data.COAL_YEARS
    keep = np.isfinite(counts)
    t = (years[keep] - years[keep].mean()) / years[keep].std()
    X = np.stack([t, t**2], axis=1)
    return _glm(X, counts[keep].astype(int), "poisson", prior_sd, prior_sd), None, None, None


# ----------------------------------------------------------------------------- registry


def _c(name, family, modality, reference, d, n, description, factory, discrete=False):
    return Case(name, family, modality, reference, d, n, description, factory, discrete)


_LIST = [
    # Gaussian linear regression, known noise (exact)
    _c("linreg_d2", "gaussian-regression", "unimodal", "exact", 2, 20,
       "linear regression, known noise, β ~ N(0, 1)", lambda: _linreg_known(20, 2, seed=20)),
    _c("linreg_d10", "gaussian-regression", "unimodal", "exact", 10, 50,
       "linear regression, known noise, β ~ N(0, 1)", lambda: _linreg_known(50, 10, seed=21)),
    _c("linreg_d50", "gaussian-regression", "unimodal", "exact", 50, 120,
       "linear regression, known noise, β ~ N(0, 1)", lambda: _linreg_known(120, 50, seed=22)),
    _c("linreg_d120", "gaussian-regression", "unimodal", "exact", 120, 200,
       "linear regression, known noise, β ~ N(0, 1)", lambda: _linreg_known(200, 120, seed=23)),
    # unknown noise (exact)
    _c("nig_d6", "gaussian-regression", "unimodal", "exact", 6, 30,
       "Normal-Inverse-Gamma regression: 5 coefficients + σ²",
       lambda: _linreg_nig(30, 5, seed=24)),
    _c("nig_d31", "gaussian-regression", "unimodal", "exact", 31, 100,
       "Normal-Inverse-Gamma regression: 30 coefficients + σ²",
       lambda: _linreg_nig(100, 30, seed=25)),
    _c("nonidentified_ab", "gaussian-regression", "unimodal", "exact", 2, 20,
       "y ~ N(a + b, 1), a, b ~ N(0, 10²): only a + b identified", _nonidentified),
    # conjugate, constrained parameters
    _c("beta_binomial", "conjugate", "unimodal", "exact", 1, 4,
       "bounded parameter: p ~ Beta(2, 3), 4 binomial counts", _beta_binomial),
    _c("gamma_poisson_skewed", "conjugate", "unimodal", "exact", 1, 3,
       "positive, skewed: λ ~ Gamma(0.5, 1), counts (0, 1, 0)", _gamma_poisson),
    _c("dirichlet_multinomial", "conjugate", "unimodal", "exact", 4, 3,
       "simplex parameter: p ~ Dirichlet(5 categories), 3 multinomial rows",
       _dirichlet_multinomial),
    _c("halfcauchy_scale", "conjugate", "unimodal", "exact", 1, 10,
       "positive scale with heavy-tailed prior: σ ~ HalfCauchy(1), y ~ N(0, σ)",
       _halfcauchy_scale),
    # hierarchical
    _c("hier_centered", "hierarchical", "unimodal", "exact", 10, 24,
       "hierarchical normal, 8 groups × 3 obs, small τ (funnel), centred",
       lambda: _hier_synthetic(True)),
    _c("hier_noncentered", "hierarchical", "unimodal", "exact", 10, 24,
       "same model and data, non-centred", lambda: _hier_synthetic(False)),
    _c("eight_schools_centered", "hierarchical", "unimodal", "exact", 10, 8,
       "eight schools (real data), τ ~ HalfCauchy(5), centred",
       lambda: _eight_schools(True)),
    _c("eight_schools_noncentered", "hierarchical", "unimodal", "exact", 10, 8,
       "eight schools (real data), non-centred", lambda: _eight_schools(False)),
    # heavy tails
    _c("student_t_location", "heavy-tailed", "unimodal", "exact", 1, 8,
       "t_3 likelihood with two outliers, location only", _student_t_location),
    _c("student_t_loc_scale", "heavy-tailed", "unimodal", "exact", 2, 15,
       "t_4 likelihood, location and scale", _student_t_loc_scale),
    # multimodal
    _c("mixture3_d10", "mixture", "multimodal", "exact", 10, 0,
       "normalized 3-component Gaussian mixture in 10-d as a Potential (log Z = 0)",
       _mixture_normalized),
    _c("mixture2_d2", "mixture", "multimodal", "exact", 2, 0,
       "N(0, 3²) prior times a separated 2-component mixture Potential",
       _mixture_prior_times),
    _c("bimodal_square", "mixture", "multimodal", "exact", 1, 10,
       "y ~ N(θ², 1): symmetric modes at ±θ", _bimodal_square),
    # discrete
    _c("coal_switchpoint", "discrete", "multimodal", "exact", 2, 109,
       "coal-mining disasters (real data), discrete switchpoint + 2 rates",
       _coal_switchpoint, discrete=True),
    # GLMs, references
    _c("logistic_n50_d3", "logistic", "unimodal", "reference", 3, 50,
       "synthetic logistic, 2 predictors + intercept, prior N(0, 2.5²)",
       lambda: _logistic_synthetic(50, 2, 2.5, 2.5, seed=30)),
    _c("logistic_n200_d10", "logistic", "unimodal", "reference", 10, 200,
       "synthetic logistic, 10 predictors, no intercept, prior N(0, 1)",
       lambda: _logistic_synthetic(200, 10, 1.0, seed=31)),
    _c("logistic_n1000_d5", "logistic", "unimodal", "reference", 5, 1000,
       "synthetic logistic, 4 predictors + intercept, prior N(0, 10²)",
       lambda: _logistic_synthetic(1000, 4, 10.0, 10.0, seed=32)),
    _c("poisson_n100_d4", "poisson", "unimodal", "reference", 4, 100,
       "synthetic Poisson log-linear, 3 predictors + intercept, prior N(0, 1)",
       lambda: _poisson_synthetic(100, 3, 1.0, 1.0, seed=33)),
    _c("poisson_n500_d8", "poisson", "unimodal", "reference", 8, 500,
       "synthetic Poisson log-linear, 8 predictors, no intercept, prior N(0, 0.5²)",
       lambda: _poisson_synthetic(500, 8, 0.5, seed=34)),
    _c("pima_sd5", "logistic", "unimodal", "reference", 8, 768,
       "Pima (real), standard set-up: no intercept, prior N(0, 5²)", lambda: _pima(5.0)),
    _c("pima_int_sd1", "logistic", "unimodal", "reference", 9, 768,
       "Pima (real), intercept, prior N(0, 1)", lambda: _pima(1.0, 1.0)),
    _c("sonar_sd5", "logistic", "unimodal", "reference", 60, 208,
       "Sonar (real), standard set-up: no intercept, prior N(0, 5²)", lambda: _sonar(5.0)),
    _c("sonar_int_sd1", "logistic", "unimodal", "reference", 61, 208,
       "Sonar (real), intercept, prior N(0, 1)", lambda: _sonar(1.0, 1.0)),
    _c("challenger", "logistic", "unimodal", "reference", 2, 23,
       "Challenger O-rings (real): intercept + temperature, prior N(0, 2.5²)", _challenger),
    _c("beetles_binomial", "logistic", "unimodal", "reference", 2, 8,
       "Bliss beetles (real): binomial logit, intercept + dose, prior N(0, 10²)", _beetles),
    _c("coal_poisson_trend", "poisson", "unimodal", "reference", 3, 109,
       "coal-mining disasters (real): Poisson, intercept + year + year², prior N(0, 1)",
       _coal_trend),
]  # fmt: skip

#: name -> Case, in suite order
CASES: dict[str, Case] = {c.name: c for c in _LIST}

#: a small subset of easy cases for --quick runs and CI
QUICK = ("linreg_d2", "beta_binomial", "gamma_poisson_skewed", "eight_schools_noncentered",
         "mixture2_d2", "logistic_n50_d3")  # fmt: skip


def cases(*tags: str, reference: str | None = None) -> list[Case]:
    """The suite's cases, optionally only those carrying every tag in ``tags`` (family,
    modality, ``"exact"``/``"reference"``, ``"discrete"``)."""
    out = [c for c in _LIST if all(t in c.tags for t in tags)]
    if reference is not None:
        out = [c for c in out if c.reference == reference]
    return out


def get_case(name: str) -> Case:
    """The case called ``name`` (see :data:`CASES`)."""
    try:
        return CASES[name]
    except KeyError:
        raise KeyError(f"unknown case {name!r}; known: {', '.join(CASES)}") from None
