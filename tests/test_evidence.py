"""End-to-end: sample_ais recovers exact log evidences.

Tolerance: ``|log Ẑ − log Z| ≤ 4·MCSE + 0.02`` where MCSE is the run's own reported Monte
Carlo error (the larger of the within- and between-chain estimates) and 0.02 covers the
small downward bias of ``log Ẑ`` (≈ Var/2). Each run must also be *precise* (MCSE below a
bound), so a test cannot pass on a huge error bar.
"""

import numpy as np
import pytest

import pymc_crais as pmc

from . import exact_models as em

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
    value, mcse = pmc.log_marginal_likelihood(idata)
    assert 0 < mcse < max_mcse
    assert abs(value - case.log_z) <= 4 * mcse + 0.02, (value, case.log_z, mcse)
    # the posterior draws are right too (resampled from the final weighted particles)
    for name, mean in (case.posterior_mean or {}).items():
        draws = idata.posterior[name].values.reshape(-1, *np.shape(mean))
        sd = draws.std(axis=0)
        assert np.all(np.abs(draws.mean(axis=0) - mean) < 5 * sd / np.sqrt(draws.shape[0] / 10))


def test_extremely_peaked_likelihood_no_overflow():
    case = em.peaked_normal_mean()
    assert case.log_z < -2e4
    idata = pmc.sample_ais(
        draws=1000,
        chains=2,
        cores=1,
        schedule="exponential",
        n_steps=100,
        schedule_kwargs={"tau_min": 1e-4},
        random_seed=3,
        model=case.model,
        progressbar=False,
    )
    value, mcse = pmc.log_marginal_likelihood(idata)
    assert np.isfinite(value) and 0 < mcse < 0.2
    assert abs(value - case.log_z) <= 4 * mcse + 0.02


def test_power_mean_path_with_pilot_scale_shift():
    """α ≠ 0: c comes from a geometric pilot run, is recorded, and added back to log Z."""
    case = em.normal_mean()
    idata = pmc.sample_ais(
        draws=1000,
        chains=4,
        cores=1,
        alpha=0.5,
        schedule="exponential",
        n_steps=100,
        schedule_kwargs={"tau_min": 1e-3},
        random_seed=5,
        model=case.model,
        progressbar=False,
    )
    attrs = idata.sample_stats.attrs
    assert attrs["path"] == "power_mean" and attrs["alpha"] == 0.5
    assert attrs["n_logp_evals_pilot"] > 0 and abs(attrs["c"] - case.log_z) < 1.0
    value, mcse = pmc.log_marginal_likelihood(idata)
    assert 0 < mcse < 0.1
    assert abs(value - case.log_z) <= 4 * mcse + 0.02
