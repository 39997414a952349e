"""End-to-end: sample_ais recovers exact log evidences.

Tolerance: ``|log Ẑ − log Z| ≤ 4·MCSE + 0.02`` where MCSE is the run's own reported Monte
Carlo error (the larger of the within- and between-chain estimates) and 0.02 covers the
small downward bias of ``log Ẑ`` (≈ Var/2). Each run must also be *precise* (MCSE below a
bound), so a test cannot pass on a huge error bar.
"""

import numpy as np
import pytest

import pymc_crais as pmc
from pymc_crais.validation import testing as em

CASES = [
    # (builder, sample_ais settings, largest acceptable mcse)
    (em.normal_mean, dict(kernel="hmc", n_steps=50), 0.05),
    (em.normal_mean, dict(kernel="rwmh", n_steps=100), 0.05),
    (
        em.linear_regression,
        dict(kernel="hmc", schedule="exponential", n_steps=200, schedule_kwargs={"tau_min": 1e-3}),
        0.12,
    ),
    (em.beta_binomial, dict(kernel="hmc", n_steps=50), 0.05),
    (em.beta_binomial, dict(kernel="rwmh", n_steps=50), 0.05),
    (em.gaussian_mixture_potential, dict(kernel="hmc", n_steps=100), 0.08),
    (em.gaussian_mixture_potential, dict(kernel="rwmh", n_steps=100), 0.08),
]


@pytest.mark.parametrize(
    "builder,settings,max_mcse",
    CASES,
    ids=[f"{c[0].__name__}-{c[1]['kernel']}" for c in CASES],
)
def test_exact_evidence(builder, settings, max_mcse):
    case = builder()
    idata = pmc.sample_ais(
        draws=1000, chains=4, cores=1, random_seed=2026, model=case.model, progressbar=False, **settings
    )
    em.assert_evidence(idata, case.log_z, max_mcse)
    # the posterior draws are right too (resampled from the final weighted particles)
    for name, mean in (case.posterior_mean or {}).items():
        draws = idata.posterior[name].values.reshape(-1, *np.shape(mean))
        sd = draws.std(axis=0)
        assert np.all(np.abs(draws.mean(axis=0) - mean) < 5 * sd / np.sqrt(draws.shape[0] / 10))


def _exponential_ais(case, chains, tau_min, seed, **kwargs):
    return pmc.sample_ais(
        draws=1000,
        chains=chains,
        cores=1,
        schedule="exponential",
        n_steps=100,
        schedule_kwargs={"tau_min": tau_min},
        random_seed=seed,
        model=case.model,
        progressbar=False,
        **kwargs,
    )


def test_extremely_peaked_likelihood_no_overflow():
    case = em.peaked_normal_mean()
    assert case.log_z < -2e4
    idata = _exponential_ais(case, chains=2, tau_min=1e-4, seed=3)
    value, _ = pmc.log_marginal_likelihood(idata)
    assert np.isfinite(value)
    em.assert_evidence(idata, case.log_z, 0.2)


def test_power_mean_path_with_pilot_scale_shift():
    """α ≠ 0: c comes from a geometric pilot run, is recorded, and added back to log Z."""
    case = em.normal_mean()
    idata = _exponential_ais(case, chains=4, tau_min=1e-3, seed=5, alpha=0.5)
    attrs = idata.sample_stats.attrs
    assert attrs["path"] == "power_mean" and attrs["alpha"] == 0.5
    assert attrs["n_logp_evals_pilot"] > 0 and abs(attrs["c"] - case.log_z) < 1.0
    em.assert_evidence(idata, case.log_z, 0.1)
