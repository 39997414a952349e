"""Our results work with the ArviZ and PyMC functions users call on pm.sample_smc output."""

from __future__ import annotations

import arviz as az
import numpy as np
import pymc as pm
import pytest
from scipy import special, stats

import pymc_crais as pmc
from pymc_crais.validation import testing as em


@pytest.fixture(scope="module")
def case():
    reg = em.linear_regression()
    idata = pmc.sample_crais(model=reg.model, draws=300, n_steps=40, chains=2, cores=1,
                             random_seed=11, progressbar=False)
    return reg, idata


def test_az_summary_on_the_posterior(case):
    reg, idata = case
    summary = az.summary(idata, var_names=["beta"])
    assert len(summary) == 5
    means = np.asarray(summary["mean"], dtype=float)
    post_sd = idata.posterior["beta"].std(("chain", "draw")).values
    # the draws are resampled from weighted particles: the error of their mean is about
    # sd·sqrt(1/ESS + 1/n_draws), with ESS the effective size of the final weights
    lw = idata.sample_stats["log_weights"].values
    ess = sum(1.0 / np.exp(special.logsumexp(2 * (row - special.logsumexp(row)))) for row in lw)
    tol = 4 * post_sd * np.sqrt(1 / ess + 1 / lw.size) + 0.01
    assert np.all(np.abs(means - reg.posterior_mean["beta"]) < tol), (means, reg.posterior_mean["beta"], tol)


def test_sample_posterior_predictive(case):
    reg, idata = case
    pp = pm.sample_posterior_predictive(idata, model=reg.model, random_seed=1, progressbar=False)
    y = pp["posterior_predictive"]["y"]
    assert y.shape[:2] == (2, 300)
    obs = idata.observed_data["y"].values
    assert y.shape[2:] == obs.shape
    # replicated data centred on the fitted values
    resid = (y.mean(("chain", "draw")).values - obs)
    assert np.sqrt(np.mean(resid**2)) < 1.0


def test_compute_log_likelihood_matches_the_model(case):
    reg, idata = case
    ll = pm.compute_log_likelihood(idata, model=reg.model, extend_inferencedata=False, progressbar=False)
    values = ll["y"]  # extend_inferencedata=False returns the log_likelihood group
    assert values.shape[:2] == (2, 300)
    beta = idata.posterior["beta"].values[0, 0]
    X = idata.constant_data["X"].values
    expected = stats.norm(X @ beta, 0.5).logpdf(idata.observed_data["y"].values)
    np.testing.assert_allclose(values.values[0, 0], expected, rtol=1e-7)


def test_log_likelihood_through_idata_kwargs():
    reg = em.normal_mean()
    idata = pmc.sample_ais(model=reg.model, draws=100, n_steps=10, chains=1, cores=1,
                           random_seed=1, progressbar=False, idata_kwargs={"log_likelihood": True})
    assert idata["log_likelihood"]["y"].shape == (1, 100, 20)


def test_netcdf_round_trip_with_arviz(case, tmp_path):
    _, idata = case
    path = tmp_path / "crais.nc"
    idata.to_netcdf(path)
    back = az.from_netcdf(path)
    assert set(back.children) >= {"posterior", "sample_stats", "observed_data", "constant_data"}
    np.testing.assert_array_equal(back.posterior["beta"].values, idata.posterior["beta"].values)
    np.testing.assert_array_equal(back.sample_stats["tune_tau"].values, idata.sample_stats["tune_tau"].values)
    assert pmc.log_marginal_likelihood(back) == pmc.log_marginal_likelihood(idata)
    assert pmc.compare({"a": back, "b": idata})["log_bf"].iloc[1] == 0.0


def test_compare_reads_pm_sample_smc_results(case):
    reg, idata = case
    with reg.model:
        ref = pm.sample_smc(draws=300, chains=2, cores=1, progressbar=False, random_seed=2,
                            compute_convergence_checks=False)
    table = pmc.compare({"crais": idata, "pm.sample_smc": ref})
    assert set(table["method"]) == {"crais", "pm.sample_smc"}
    raw = ref.sample_stats["log_marginal_likelihood"].values  # object (chain, k)
    per_chain = []
    for row in raw.reshape(raw.shape[0], -1):
        flat = np.concatenate([np.ravel(np.asarray(v, dtype=float)) for v in row])
        per_chain.append(flat[np.isfinite(flat)][-1])
    assert table.loc["pm.sample_smc", "log_z"] == pytest.approx(special.logsumexp(per_chain) - np.log(2))
    # two chains of PyMC's own kernel: no MCSE claimed, the entry flagged with the reason
    assert np.isnan(table.loc["pm.sample_smc", "mcse"])
    assert table.loc["pm.sample_smc", "unreliable"] == "no_error"
    assert "n/a" in repr(table)
    crais, mcse = table.loc["crais", "log_z"], table.loc["crais", "mcse"]
    assert abs(crais - reg.log_z) <= 4 * mcse + 0.02
