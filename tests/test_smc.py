"""Tempered SMC (pmc.sample_smc); the pm.sample_smc kernels are in test_smc_kernels.py."""

import numpy as np
import pytest

import pymc_crais as pmc
from pymc_crais.validation import testing as em

QUICK = dict(chains=4, cores=1, progressbar=False)


_check = em.assert_evidence


@pytest.mark.parametrize("kernel", ["hmc", "imh", "mala", "rwmh"])
def test_smc_kernels_exact_evidence(kernel):
    case = em.normal_mean()
    # from the prior: the kernels under tempering, not one stage from the Laplace start
    idata = pmc.sample_smc(draws=1000, kernel=kernel, random_seed=21, model=case.model,
                           init="prior", **QUICK)
    _check(idata, case.log_z, 0.1)
    st = idata.sample_stats
    assert st.attrs["method"] == "smc" and st.attrs["kernel"] == kernel
    n = int(st["n_stages"].values[0])
    assert n > 1
    assert st["resampled"].values[0, : n - 1].all()  # "always" resamples before every move
    assert (st["mcmc_steps"].values[0, :n] >= 1).all()


@pytest.mark.parametrize(
    "schedule",
    # constant_rate (CR-SMC) is slow here; its fast test is test_cr_smc_resamples_below_kappa
    ["ess", pytest.param("constant_rate", marks=pytest.mark.slow), "linear"],
)
def test_smc_schedules_on_a_bimodal_target(schedule):
    case = em.gaussian_mixture_potential()
    idata = pmc.sample_smc(draws=1000, schedule=schedule, n_steps=20, random_seed=22, model=case.model, **QUICK)
    _check(idata, case.log_z, 0.15)


def test_smc_ess_rule_hits_threshold():
    case = em.linear_regression()
    idata = pmc.sample_smc(draws=1000, threshold=0.6, random_seed=23, model=case.model,
                           init="prior", **{**QUICK, "chains": 1})  # tempered from the prior
    st = idata.sample_stats
    n = int(st["n_stages"].values[0])
    assert n > 2
    ess = st["ess"].values[0, : n - 1]  # the last stage stops at tau = 1
    np.testing.assert_allclose(ess / 1000, 0.6, atol=2e-3)


def test_cr_smc_resamples_below_kappa():
    case = em.normal_mean()
    idata = pmc.sample_smc(draws=500, schedule="constant_rate", n_steps=40, random_seed=24, model=case.model, init="prior", **{**QUICK, "chains": 1})
    st = idata.sample_stats
    assert st.attrs["resample"] == "ess" and st.attrs["resample_threshold"] == 0.9
    n = int(st["n_stages"].values[0])
    res = st["resampled"].values[0, :n]
    ess = st["ess"].values[0, :n]
    assert res.any() and not res.all()
    assert np.all(ess[:-1][res[:-1]] < 0.9 * 500) and np.all(ess[:-1][~res[:-1]] >= 0.9 * 500)
    assert 10 <= n <= 200
    # resample-move: a stage before tau = 1 that kept its weights makes one transition
    assert st.attrs["idle_mcmc_steps"] == "1"
    steps = st["mcmc_steps"].values[0, :n]
    np.testing.assert_array_equal(steps[:-1][~res[:-1]], 1)


def test_smc_rejects_start_and_bad_options():
    case = em.normal_mean()
    with pytest.raises(ValueError, match="start="):
        pmc.sample_smc(draws=100, start={"mu": 0.0}, model=case.model, **QUICK)
    with pytest.raises(ValueError, match="rho"):
        pmc.sample_smc(draws=100, threshold=1.5, model=case.model, **QUICK)
    with pytest.raises(ValueError, match="resample"):
        pmc.sample_smc(draws=100, resample="sometimes", model=case.model, **QUICK)
    with pytest.raises(TypeError, match="unexpected"):
        pmc.sample_smc(draws=100, frobnicate=1, model=case.model, **QUICK)
    with pytest.raises(ValueError, match="waste_free"):
        pmc.sample_smc(draws=100, waste_free=1, model=case.model, **QUICK)
    with pytest.raises(ValueError, match="n_mcmc_steps"):
        pmc.sample_smc(draws=100, n_mcmc_steps="often", model=case.model, **QUICK)
    with pytest.raises(ValueError, match="idle_mcmc_steps"):
        pmc.sample_smc(draws=100, idle_mcmc_steps=-1, model=case.model, **QUICK)


def test_waste_free_smc_exact_evidence():
    """waste_free=True: chains of P = 10 states from N/10 resampled particles per stage."""
    case = em.normal_mean()
    idata = pmc.sample_smc(draws=1000, waste_free=True, random_seed=25, model=case.model,
                           init="prior", **QUICK)  # tempered, not one stage
    _check(idata, case.log_z, 0.1)
    st = idata.sample_stats
    assert st.attrs["waste_free"] == 10
    n = int(st["n_stages"].values[0])
    assert n > 1
    np.testing.assert_array_equal(st["mcmc_steps"].values[0, : n - 1], 9)




def test_cr_smc_default_is_one_stage_when_the_start_meets_the_target():
    """CR-SMC with n_steps and delta not given: a Laplace start whose importance weights
    meet target_mcse is one stage (no pilot); a tighter target runs the rate rule."""
    case = em.linear_regression()
    kw = dict(draws=500, schedule="constant_rate", random_seed=25, model=case.model, **QUICK)
    idata = pmc.sample_smc(**kw)
    a = idata.sample_stats.attrs
    assert a["schedule"] == "one_step" and int(idata.sample_stats.n_stages[0]) == 1
    assert a["predicted_mcse"] <= a["target_mcse"] == 0.02
    assert a["n_logp_evals_pilot"] == a["n_logp_evals_start"] > 0
    _check(idata, case.log_z, 0.03)
    tight = pmc.sample_smc(target_mcse=a["predicted_mcse"] / 2, **kw).sample_stats
    assert tight.attrs["schedule"] == "constant_rate" and int(tight.n_stages[0]) > 1
    with pytest.raises(TypeError, match="target_mcse"):
        pmc.sample_smc(target_mcse=0.01, schedule="linear", model=case.model, **QUICK)


def test_ess_default_is_one_stage_when_the_start_meets_the_target():
    """The default ESS rule: a start whose importance weights predict a pooled MCSE within
    target_mcse is one stage, with one move at τ = 1 (its draws are distinct: the final weights,
    not the moves, make the posterior draws); a tighter target tempers."""
    case = em.linear_regression()
    kw = dict(draws=500, random_seed=26, model=case.model, **QUICK)
    idata = pmc.sample_smc(**kw)
    a = idata.sample_stats.attrs
    assert a["schedule"] == "one_step" and int(idata.sample_stats.n_stages[0]) == 1
    assert a["predicted_mcse"] <= a["target_mcse"] == 0.02
    assert a["mcmc_steps_at_target"] == 1 and a["max_mcmc_steps"] == 20
    assert int(idata.sample_stats["mcmc_steps"].values.max()) == 1
    assert a["refit_restarted"] == 0  # its refit check flags, never restarts
    # a threshold the user chose is kept: no one-stage test
    chosen = pmc.sample_smc(threshold=0.6, **kw).sample_stats.attrs
    assert chosen["schedule"] != "one_step" and "predicted_mcse" not in chosen
    _check(idata, case.log_z, 0.03)
    tight = pmc.sample_smc(target_mcse=a["predicted_mcse"] / 2, **kw).sample_stats
    assert tight.attrs["schedule"] != "one_step" and tight.attrs["max_mcmc_steps"] == 20
    # its particles are distinct at τ = 1 as well: one move there
    assert tight["mcmc_steps"].values[0, int(tight["n_stages"][0]) - 1] == 1
    # the start is measured the same way: only the stages differ
    assert tight.attrs["start_relative_variance"] == a["start_relative_variance"]
