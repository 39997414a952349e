"""``pmc.sample_smc(persistent=True)``: persistent sampling through the public sampler
(the core's recursion and ESS rule are tested in tests/core/test_persistent.py)."""

import warnings

import numpy as np
import pytest

import pymc_crais as pmc

from pymc_crais.validation import testing as em

QUICK = {"cores": 1, "progressbar": False, "init": "prior"}


def test_persistent_smc_exact_evidence():
    """Four chains from the prior on the conjugate normal mean: the estimate is within
    3 MCSE (from the chains' spread, the only error persistent sampling reports) plus 0.02
    of the exact log Z; every stage resampled from the pool."""
    case = em.normal_mean()
    idata = pmc.sample_smc(draws=1000, persistent=True, random_seed=31, model=case.model, chains=4, **QUICK)
    value, mcse, details = pmc.log_marginal_likelihood(idata, return_details=True)
    assert np.isnan(details["mcse_within"]) and details["mcse_between"] > 0
    # the chains' spread with t_{0.975, 3} / z_{0.975}, before pooling with the refit check
    chains_mcse = details["mcse_chains_pooled"]
    assert chains_mcse == pytest.approx(1.6237 * details["mcse_between"], rel=1e-4)
    assert mcse == chains_mcse or (details["refit_pooled"] and mcse < chains_mcse)
    assert abs(value - case.log_z) <= 3 * mcse + 0.02, (value, case.log_z, mcse)
    st = idata.sample_stats
    assert st.attrs["persistent"] == "all"
    n = int(st["n_stages"].values[0])
    assert n >= 2 and st["resampled"].values[0, :n].all()
    assert np.isnan(st["log_marginal_likelihood_mcse"].values).all()


def test_persistent_smc_with_few_chains_claims_no_error():
    case = em.normal_mean()
    idata = pmc.sample_smc(draws=300, persistent=3, random_seed=32, model=case.model, chains=2, **QUICK)
    assert idata.sample_stats.attrs["persistent"] == 3
    with pytest.warns(pmc.UnreliableEvidenceWarning, match="persistent sampling"):
        value, mcse = pmc.log_marginal_likelihood(idata)
    assert np.isfinite(value) and np.isnan(mcse)


def test_persistent_false_is_the_default_run():
    """``persistent=False`` is today's code path: the same bits as without the option."""
    case = em.normal_mean()
    kw = dict(draws=200, random_seed=33, model=case.model, chains=1, **QUICK)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = pmc.sample_smc(persistent=False, **kw)
        b = pmc.sample_smc(**kw)
    assert "persistent" not in a.sample_stats.attrs
    np.testing.assert_array_equal(
        a.sample_stats["log_marginal_likelihood"].values, b.sample_stats["log_marginal_likelihood"].values
    )
    np.testing.assert_array_equal(a.posterior["mu"].values, b.posterior["mu"].values)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"persistent": 1}, "persistent must be"),
        ({"persistent": "yes"}, "persistent must be"),
        ({"persistent": True, "schedule": "cess"}, "schedule='ess'"),
        ({"persistent": True, "waste_free": True}, "waste_free"),
        ({"persistent": True, "path": "moment_averaging"}, "geometric"),
    ],
)
def test_persistent_option_errors(kwargs, match):
    case = em.normal_mean()
    with pytest.raises(ValueError, match=match):
        pmc.sample_smc(draws=100, model=case.model, chains=1, **QUICK, **kwargs)


@pytest.mark.slow
def test_persistent_smc_on_a_bimodal_target():
    case = em.gaussian_mixture_potential()
    idata = pmc.sample_smc(draws=1000, persistent=True, random_seed=34, model=case.model, chains=4, **QUICK)
    value, mcse = pmc.log_marginal_likelihood(idata)
    assert abs(value - case.log_z) <= 4 * mcse + 0.05, (value, case.log_z, mcse)
