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

The applied tier (``tier="applied"``, names ``applied_*``; :mod:`.applied_models`): models as
users write them, with references computed two independent ways without SMC or AIS by
``benchmarks/references/compute_applied.py``, stored in
``pymc_crais/data/applied_references.json``; ``cases()`` lists the core suite only unless
``tier`` says otherwise.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from .applied_models import APPLIED_SPECS
from .exact_models import (
    beta_binomial,
    bimodal_square,
    coal_switchpoint,
    dirichlet_multinomial,
    eight_schools,
    gamma_poisson,
    halfcauchy_scale,
    hier_synthetic,
    linreg_known,
    linreg_nig,
    mixture_normalized,
    mixture_prior_times,
    nonidentified,
    student_t_loc_scale,
    student_t_location,
)
from .glm_models import (
    beetles,
    challenger,
    coal_trend,
    logistic_synthetic,
    pima,
    poisson_synthetic,
    sonar,
)

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
    tier: str = "core"  # "core" | "applied"

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
    out = {}
    for fname in ("validation_references.json", "applied_references.json"):
        path = resources.files("pymc_crais").joinpath("data", fname)
        try:
            out.update(json.loads(path.read_text()))
        except FileNotFoundError:
            pass
    return out


# ----------------------------------------------------------------------------- registry


def _c(name, family, modality, reference, d, n, description, factory, discrete=False):
    return Case(name, family, modality, reference, d, n, description, factory, discrete)


_LIST = [
    # Gaussian linear regression, known noise (exact)
    _c("linreg_d2", "gaussian-regression", "unimodal", "exact", 2, 20,
       "linear regression, known noise, β ~ N(0, 1)", lambda: linreg_known(20, 2, seed=20)),
    _c("linreg_d10", "gaussian-regression", "unimodal", "exact", 10, 50,
       "linear regression, known noise, β ~ N(0, 1)", lambda: linreg_known(50, 10, seed=21)),
    _c("linreg_d50", "gaussian-regression", "unimodal", "exact", 50, 120,
       "linear regression, known noise, β ~ N(0, 1)", lambda: linreg_known(120, 50, seed=22)),
    _c("linreg_d120", "gaussian-regression", "unimodal", "exact", 120, 200,
       "linear regression, known noise, β ~ N(0, 1)", lambda: linreg_known(200, 120, seed=23)),
    # unknown noise (exact)
    _c("nig_d6", "gaussian-regression", "unimodal", "exact", 6, 30,
       "Normal-Inverse-Gamma regression: 5 coefficients + σ²",
       lambda: linreg_nig(30, 5, seed=24)),
    _c("nig_d31", "gaussian-regression", "unimodal", "exact", 31, 100,
       "Normal-Inverse-Gamma regression: 30 coefficients + σ²",
       lambda: linreg_nig(100, 30, seed=25)),
    _c("nonidentified_ab", "gaussian-regression", "unimodal", "exact", 2, 20,
       "y ~ N(a + b, 1), a, b ~ N(0, 10²): only a + b identified", nonidentified),
    # conjugate, constrained parameters
    _c("beta_binomial", "conjugate", "unimodal", "exact", 1, 4,
       "bounded parameter: p ~ Beta(2, 3), 4 binomial counts", beta_binomial),
    _c("gamma_poisson_skewed", "conjugate", "unimodal", "exact", 1, 3,
       "positive, skewed: λ ~ Gamma(0.5, 1), counts (0, 1, 0)", gamma_poisson),
    _c("dirichlet_multinomial", "conjugate", "unimodal", "exact", 4, 3,
       "simplex parameter: p ~ Dirichlet(5 categories), 3 multinomial rows",
       dirichlet_multinomial),
    _c("halfcauchy_scale", "conjugate", "unimodal", "exact", 1, 10,
       "positive scale with heavy-tailed prior: σ ~ HalfCauchy(1), y ~ N(0, σ)",
       halfcauchy_scale),
    # hierarchical
    _c("hier_centered", "hierarchical", "unimodal", "exact", 10, 24,
       "hierarchical normal, 8 groups × 3 obs, small τ (funnel), centred",
       lambda: hier_synthetic(True)),
    _c("hier_noncentered", "hierarchical", "unimodal", "exact", 10, 24,
       "same model and data, non-centred", lambda: hier_synthetic(False)),
    _c("eight_schools_centered", "hierarchical", "unimodal", "exact", 10, 8,
       "eight schools (real data), τ ~ HalfCauchy(5), centred",
       lambda: eight_schools(True)),
    _c("eight_schools_noncentered", "hierarchical", "unimodal", "exact", 10, 8,
       "eight schools (real data), non-centred", lambda: eight_schools(False)),
    # heavy tails
    _c("student_t_location", "heavy-tailed", "unimodal", "exact", 1, 8,
       "t_3 likelihood with two outliers, location only", student_t_location),
    _c("student_t_loc_scale", "heavy-tailed", "unimodal", "exact", 2, 15,
       "t_4 likelihood, location and scale", student_t_loc_scale),
    # multimodal
    _c("mixture3_d10", "mixture", "multimodal", "exact", 10, 0,
       "normalized 3-component Gaussian mixture in 10-d as a Potential (log Z = 0)",
       mixture_normalized),
    _c("mixture2_d2", "mixture", "multimodal", "exact", 2, 0,
       "N(0, 3²) prior times a separated 2-component mixture Potential",
       mixture_prior_times),
    _c("bimodal_square", "mixture", "multimodal", "exact", 1, 10,
       "y ~ N(θ², 1): symmetric modes at ±θ", bimodal_square),
    # discrete
    _c("coal_switchpoint", "discrete", "multimodal", "exact", 2, 109,
       "coal-mining disasters (real data), discrete switchpoint + 2 rates",
       coal_switchpoint, discrete=True),
    # GLMs, references
    _c("logistic_n50_d3", "logistic", "unimodal", "reference", 3, 50,
       "synthetic logistic, 2 predictors + intercept, prior N(0, 2.5²)",
       lambda: logistic_synthetic(50, 2, 2.5, 2.5, seed=30)),
    _c("logistic_n200_d10", "logistic", "unimodal", "reference", 10, 200,
       "synthetic logistic, 10 predictors, no intercept, prior N(0, 1)",
       lambda: logistic_synthetic(200, 10, 1.0, seed=31)),
    _c("logistic_n1000_d5", "logistic", "unimodal", "reference", 5, 1000,
       "synthetic logistic, 4 predictors + intercept, prior N(0, 10²)",
       lambda: logistic_synthetic(1000, 4, 10.0, 10.0, seed=32)),
    _c("poisson_n100_d4", "poisson", "unimodal", "reference", 4, 100,
       "synthetic Poisson log-linear, 3 predictors + intercept, prior N(0, 1)",
       lambda: poisson_synthetic(100, 3, 1.0, 1.0, seed=33)),
    _c("poisson_n500_d8", "poisson", "unimodal", "reference", 8, 500,
       "synthetic Poisson log-linear, 8 predictors, no intercept, prior N(0, 0.5²)",
       lambda: poisson_synthetic(500, 8, 0.5, seed=34)),
    _c("pima_sd5", "logistic", "unimodal", "reference", 8, 768,
       "Pima (real), standard set-up: no intercept, prior N(0, 5²)", lambda: pima(5.0)),
    _c("pima_int_sd1", "logistic", "unimodal", "reference", 9, 768,
       "Pima (real), intercept, prior N(0, 1)", lambda: pima(1.0, 1.0)),
    _c("sonar_sd5", "logistic", "unimodal", "reference", 60, 208,
       "Sonar (real), standard set-up: no intercept, prior N(0, 5²)", lambda: sonar(5.0)),
    _c("sonar_int_sd1", "logistic", "unimodal", "reference", 61, 208,
       "Sonar (real), intercept, prior N(0, 1)", lambda: sonar(1.0, 1.0)),
    _c("challenger", "logistic", "unimodal", "reference", 2, 23,
       "Challenger O-rings (real): intercept + temperature, prior N(0, 2.5²)", challenger),
    _c("beetles_binomial", "logistic", "unimodal", "reference", 2, 8,
       "Bliss beetles (real): binomial logit, intercept + dose, prior N(0, 10²)", beetles),
    _c("coal_poisson_trend", "poisson", "unimodal", "reference", 3, 109,
       "coal-mining disasters (real): Poisson, intercept + year + year², prior N(0, 1)",
       coal_trend),
]  # fmt: skip


def _a(name, family, modality, reference, d, n, description, discrete=False):
    spec = APPLIED_SPECS[name]
    return Case(name, family, modality, reference, d, n, description,
                lambda: (spec.model(), None, None, None), discrete, tier="applied")  # fmt: skip


#: the applied tier (``applied_models``): models as users write them, two-way references
_APPLIED = [
    _a("applied_hier60_centred", "hierarchical", "unimodal", "exact", 63, 387,
       "varying intercepts, 60 groups, coords/dims + pm.Data, centred"),
    _a("applied_hier60_noncentred", "hierarchical", "unimodal", "exact", 63, 387,
       "same model and data, non-centred"),
    _a("applied_random_slopes", "hierarchical", "unimodal", "exact", 45, 200,
       "varying intercepts and slopes, 20 groups, centred"),
    _a("applied_local_level", "state-space", "unimodal", "exact", 152, 150,
       "local level: pm.GaussianRandomWalk, 150 latent states"),
    _a("applied_ar1", "state-space", "unimodal", "exact", 123, 120,
       "latent AR(1) (pm.AR), 120 states, observed with noise"),
    _a("applied_gp_latent", "gp", "unimodal", "exact", 43, 40,
       "pm.gp.Latent, ExpQuad kernel, 40 points, Gaussian noise"),
    _a("applied_wide_d302", "gaussian-regression", "unimodal", "exact", 302, 360,
       "300 coefficients with a shared HalfNormal scale (d = 302)"),
    _a("applied_bugs_oneway", "hierarchical", "unimodal", "exact", 13, 60,
       "one-way random effects, BUGS priors: precisions ~ Gamma(0.001, 0.001)"),
    _a("applied_bugs_normal", "conjugate", "unimodal", "exact", 2, 30,
       "normal sample, BUGS priors: τ ~ Gamma(0.001, 0.001), μ ~ N(0, prec 1e-6)"),
    _a("applied_uniform_scale", "conjugate", "unimodal", "exact", 2, 25,
       "normal sample, vague flat scale: σ ~ Uniform(0, 1e6), μ ~ N(0, 1000²)"),
    _a("applied_multilevel_logistic", "logistic", "unimodal", "reference", 33, 360,
       "varying-intercept logistic regression, 30 groups, centred"),
    _a("applied_ordinal", "ordinal", "unimodal", "reference", 7, 200,
       "ordinal logistic regression, 5 categories, ordered cutpoints"),
    _a("applied_robust_t", "heavy-tailed", "unimodal", "reference", 4, 80,
       "robust regression, Student-t likelihood with unknown ν ~ Gamma(2, 0.1)"),
    _a("applied_zip", "poisson", "unimodal", "reference", 4, 200,
       "zero-inflated Poisson regression"),
    _a("applied_censored", "gaussian-regression", "unimodal", "exact", 3, 100,
       "right-censored normal regression (pm.Censored)"),
    _a("applied_truncnormal_prior", "gaussian-regression", "unimodal", "exact", 3, 30,
       "regression with a TruncatedNormal(0.5, 1, lower=0) slope prior"),
    _a("applied_mixture_label_switching", "mixture", "multimodal", "reference", 4, 120,
       "2-component normal mixture, exchangeable labels: log Z counts both relabellings"),
]  # fmt: skip

#: name -> Case, in suite order (the core suite, then the applied tier)
CASES: dict[str, Case] = {c.name: c for c in _LIST + _APPLIED}

#: a small subset of easy cases for --quick runs and CI
QUICK = ("linreg_d2", "beta_binomial", "gamma_poisson_skewed", "eight_schools_noncentered",
         "mixture2_d2", "logistic_n50_d3")  # fmt: skip


def cases(*tags: str, reference: str | None = None, tier: str = "core") -> list[Case]:
    """The suite's cases, optionally only those carrying every tag in ``tags`` (family,
    modality, ``"exact"``/``"reference"``, ``"discrete"``), of one ``tier``: ``"core"``
    (the default), ``"applied"`` (models as users write them, ``applied_models``) or
    ``"all"``."""
    pool = {"core": _LIST, "applied": _APPLIED, "all": _LIST + _APPLIED}[tier]
    out = [c for c in pool if all(t in c.tags for t in tags)]
    if reference is not None:
        out = [c for c in out if c.reference == reference]
    return out


def get_case(name: str) -> Case:
    """The case called ``name`` (see :data:`CASES`)."""
    try:
        return CASES[name]
    except KeyError:
        raise KeyError(f"unknown case {name!r}; known: {', '.join(CASES)}") from None
