"""path="moment_averaging" in sample_smc and sample_ais (samplers/engine/path_option.py)."""

import numpy as np
import pymc as pm
import pytest

import pymc_crais as pmc
from pymc_crais.validation import testing as em

QUICK = dict(chains=2, cores=1, progressbar=False)


def test_smc_moment_averaging_from_the_prior_exact_evidence():
    case = em.linear_regression()
    idata = pmc.sample_smc(800, model=case.model, init="prior", path="moment_averaging", random_seed=3, **QUICK)
    em.assert_evidence(idata, case.log_z, 0.15)
    at = idata.sample_stats.attrs
    assert at["path"] == "moment_averaging" and "path_fallback_reason" not in at
    assert at["n_logp_evals_laplace"] == at["path_n_logp_evals_fit"] > 0


def test_ais_moment_averaging_exact_evidence_and_same_bits():
    case = em.normal_mean()
    kw = dict(model=case.model, init="prior", path="moment_averaging", n_steps=60, random_seed=4, **QUICK)
    a = pmc.sample_ais(500, **kw)
    em.assert_evidence(a, case.log_z, 0.1)
    b = pmc.sample_ais(500, **kw)
    np.testing.assert_array_equal(
        a.sample_stats["log_marginal_likelihood"].values, b.sample_stats["log_marginal_likelihood"].values
    )
    assert a.sample_stats.attrs["path_description"] == "moment_averaging(breaks=(0.333333, 0.666667))"


def test_moment_averaging_falls_back_on_a_bimodal_posterior():
    """A Gaussian at one of two separated modes would lose the other (measured on the suite's
    mixture2_d2: −1.2 nats, silently); the mode search sees both and the run is geometric."""
    case = em.gaussian_mixture_potential()
    with pytest.warns(pmc.warnings.PathFallbackWarning, match="several modes"):
        idata = pmc.sample_smc(600, model=case.model, init="prior", path="moment_averaging", random_seed=7, **QUICK)
    at = idata.sample_stats.attrs
    assert at["path"] == "geometric" and "modes" in at["path_fallback_reason"]
    em.assert_evidence(idata, case.log_z, 0.15)


def test_path_argument_errors():
    case = em.normal_mean()
    with pytest.raises(ValueError, match="path must be one of"):
        pmc.sample_smc(100, model=case.model, path="ma", **QUICK)
    with pytest.raises(ValueError, match="alpha=0"):
        pmc.sample_smc(100, model=case.model, path="moment_averaging", alpha=0.5, **QUICK)
    with pytest.raises(ValueError, match="constant_rate"):
        pmc.sample_smc(100, model=case.model, path="moment_averaging", schedule="constant_rate", **QUICK)
    with pytest.raises(ValueError, match="constant_rate"):
        pmc.sample_ais(100, model=case.model, path="moment_averaging", schedule="constant_rate", **QUICK)
    with pytest.raises(ValueError, match="breaks"):
        pmc.sample_ais(100, model=case.model, path="moment_averaging", path_kwargs={"breaks": (0.7, 0.2)}, n_steps=5, **QUICK)
    with pytest.raises(TypeError, match="path_kwargs"):
        pmc.sample_ais(100, model=case.model, path_kwargs={"breaks": (0.2, 0.7)}, **QUICK)
    with pytest.raises(TypeError, match="path"):
        pmc.sample_rts(100, model=case.model, path="moment_averaging", **QUICK)
    with pm.Model() as discrete:
        k = pm.Poisson("k", 3.0)
        pm.Normal("y", k, 1.0, observed=[2.0, 3.0])
    with pytest.raises(ValueError, match="path='moment_averaging' needs a Laplace fit"):
        pmc.sample_smc(100, model=discrete, path="moment_averaging", **QUICK)


def test_ais_thermodynamic_schedule():
    """schedule="thermodynamic": equal-length steps from the pilot's metric, exact evidence;
    from a wide prior the metric Var_τ(Δ) is largest near τ = 0, so the steps start small."""
    case = em.normal_mean()
    idata = pmc.sample_ais(500, schedule="thermodynamic", n_steps=60, model=case.model, init="prior", random_seed=6, **QUICK)
    em.assert_evidence(idata, case.log_z, 0.1)
    st = idata.sample_stats
    assert st.attrs["schedule"] == "thermodynamic" and st.attrs["n_logp_evals_pilot"] > 0
    taus = st["tau"].values[0]
    taus = taus[np.isfinite(taus)]
    assert taus.size == 60 and taus[-1] == 1.0 and np.all(np.diff(taus) > 0)  # τ_1 … τ_K
    assert taus[0] < 0.1 / 60 and np.diff(taus)[-1] > 1.0 / 60
    with pytest.raises(ValueError, match="thermodynamic"):
        pmc.sample_ais(100, schedule="thermodynamic", path="moment_averaging", model=case.model, **QUICK)
