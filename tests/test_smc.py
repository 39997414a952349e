"""Tempered SMC (pmc.sample_smc) and the drop-in kernels for pm.sample_smc."""

import numpy as np
import pymc as pm
import pytest

import pymc_crais as pmc

from . import exact_models as em

QUICK = dict(chains=4, cores=1, progressbar=False)


_check = em.assert_evidence


@pytest.mark.parametrize("kernel", ["hmc", "imh", "mala", "rwmh"])
def test_smc_kernels_exact_evidence(kernel):
    case = em.normal_mean()
    idata = pmc.sample_smc(draws=1000, kernel=kernel, random_seed=21, model=case.model, **QUICK)
    _check(idata, case.log_z, 0.1)
    st = idata.sample_stats
    assert st.attrs["method"] == "smc" and st.attrs["kernel"] == kernel
    n = int(st["n_stages"].values[0])
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
    idata = pmc.sample_smc(draws=1000, threshold=0.6, random_seed=23, model=case.model, **{**QUICK, "chains": 1})
    st = idata.sample_stats
    n = int(st["n_stages"].values[0])
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


def test_waste_free_smc_exact_evidence():
    """waste_free=True: chains of P = 10 states from N/10 resampled particles per stage."""
    case = em.normal_mean()
    idata = pmc.sample_smc(draws=1000, waste_free=True, random_seed=25, model=case.model, **QUICK)
    _check(idata, case.log_z, 0.1)
    st = idata.sample_stats
    assert st.attrs["waste_free"] == 10
    n = int(st["n_stages"].values[0])
    np.testing.assert_array_equal(st["mcmc_steps"].values[0, : n - 1], 9)


def _pm_chain_log_z(idata):
    return np.array([np.asarray(v, dtype=float)[-1] for v in idata.sample_stats.log_marginal_likelihood.values])


@pytest.mark.parametrize("kernel,kwargs", [(pmc.CRSMC, {}), (pmc.BatchedSMC, {}), (pmc.BatchedSMC, {"mutation": "imh"})])
def test_drop_in_kernels_for_pm_sample_smc(kernel, kwargs):
    case = em.normal_mean()
    with case.model:
        idata = pm.sample_smc(
            draws=1000, kernel=kernel, chains=4, cores=1, random_seed=25, progressbar=False,
            compute_convergence_checks=False, **kwargs,
        )
    lz = _pm_chain_log_z(idata)
    value = np.log(np.mean(np.exp(lz - lz.max()))) + lz.max()
    se = np.std(lz, ddof=1) / np.sqrt(lz.size)
    assert np.isfinite(lz).all() and se < 0.1
    assert abs(value - case.log_z) <= 4 * se + 0.03, (lz, case.log_z)
    assert abs(idata.posterior["mu"].values.mean() - case.posterior_mean["mu"]) < 0.05


def test_drop_in_kernels_do_not_depend_on_cores():
    case = em.linear_regression()
    out = []
    for cores in (1, 2):
        with case.model:
            idata = pm.sample_smc(draws=300, kernel=pmc.CRSMC, chains=2, cores=cores, random_seed=26, progressbar=False, compute_convergence_checks=False)
        out.append((_pm_chain_log_z(idata), idata.posterior["beta"].values))
    np.testing.assert_array_equal(out[0][0], out[1][0])
    np.testing.assert_array_equal(out[0][1], out[1][1])
    assert out[0][0][0] != out[0][0][1]


def test_drop_in_gradient_kernel_refuses_discrete_model():
    with pm.Model():
        pm.Poisson("k", 3.0)
        pm.Normal("y", 0.0, 1.0, observed=[0.0])
        with pytest.raises(ValueError, match="mutation='rwmh'"):
            pm.sample_smc(
                draws=50, kernel=pmc.BatchedSMC, mutation="hmc", chains=1, progressbar=False
            )


def test_drop_in_default_mutation_runs_on_a_discrete_model():
    """mutation='auto' (the default) picks a gradient-free kernel when a variable is discrete."""
    with pm.Model():
        pm.Poisson("k", 3.0)
        pm.Normal("y", 0.0, 1.0, observed=[0.0])
        idata = pm.sample_smc(
            draws=50, kernel=pmc.BatchedSMC, chains=1, progressbar=False, random_seed=1
        )
    assert idata["posterior"]["k"].values.dtype.kind == "i"


def test_crais_kernel_for_pm_sample_smc_agrees_with_sample_crais():
    """``pm.sample_smc(kernel=pmc.CRAIS)`` (PyMC's driver, no resampling before β = 1) and
    ``pmc.sample_crais`` estimate the same evidence: their difference is within 4 combined
    MCSE, and each is within 4 MCSE (+ the 0.02 O(1/N) allowance of the other exact tests)
    of the exact value. The MCSEs combine each run's within-chain (final-weight) errors with
    the spread of its chains."""
    from pymc_crais.core.estimators import combine_chain_estimates

    case = em.normal_mean()
    with case.model:
        idata = pm.sample_smc(
            draws=1000, kernel=pmc.CRAIS, n_steps=100, chains=4, cores=1, random_seed=27,
            progressbar=False, compute_convergence_checks=False,
        )
    st = idata.sample_stats
    lz = _pm_chain_log_z(idata)
    within = np.array([np.asarray(v, dtype=float)[-1] for v in st.log_marginal_likelihood_mcse.values])
    assert np.isfinite(lz).all() and np.isfinite(within).all()
    pm_value, pm_mcse, _ = combine_chain_estimates(lz, within**2)
    ref = pmc.sample_crais(draws=1000, n_steps=100, random_seed=28, model=case.model, **QUICK)
    ref_value, ref_mcse = pmc.log_marginal_likelihood(ref)
    assert 0 < pm_mcse < 0.1 and 0 < ref_mcse < 0.1, (pm_mcse, ref_mcse)
    combined = np.hypot(pm_mcse, ref_mcse)
    assert abs(pm_value - ref_value) <= 4 * combined, (pm_value, ref_value, combined)
    assert abs(pm_value - case.log_z) <= 4 * pm_mcse + 0.02, (pm_value, case.log_z, pm_mcse)
    # one run per chain on a fixed tuned schedule of n_steps steps, moved by the replayed kernel
    betas = [np.asarray(v, dtype=float) for v in st.beta.values]
    assert all(b.size == 100 and b[-1] == 1.0 and np.all(np.diff(b) > 0) for b in betas)
    assert abs(idata.posterior["mu"].values.mean() - case.posterior_mean["mu"]) < 0.05


def test_crais_kernel_accumulates_weights_without_resampling():
    """Before β = 1 the kernel's resample step is the identity and the weights accumulate
    (log Ẑ is the AIS estimate ``log mean w``); at β = 1 it resamples once."""
    from pymc_crais.core.weights import log_mean_exp

    case = em.normal_mean()
    kernel = pmc.CRAIS(draws=200, n_steps=10, model=case.model, random_seed=0)
    kernel.initialize(None, np.random.default_rng(0))
    log_w = np.zeros(200)
    while kernel.beta < 1.0:
        before = kernel.tempered_posterior.copy()
        old_beta, ell = kernel.beta, kernel.likelihood_logp.copy()
        kernel.update_beta_and_weights()
        log_w += (kernel.beta - old_beta) * ell
        kernel.resample()
        if kernel.beta < 1.0:
            np.testing.assert_array_equal(kernel.tempered_posterior, before)
        kernel.tune()
        kernel.mutate()
    np.testing.assert_allclose(kernel.log_marginal_likelihood, log_mean_exp(log_w), rtol=0, atol=1e-9)
    assert kernel.iteration == 10
