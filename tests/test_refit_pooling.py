"""Pooling a run's log Ẑ with the posterior refit check's importance estimate
(core/refit.pool_with_refit, applied by pmc.log_marginal_likelihood): two independent
estimates of Z averaged by inverse variance, only where the importance weights have a
finite variance and the two agree; synthetic inputs, no sampling."""

import numpy as np
import pytest
import xarray as xr
from xarray import DataTree

import pymc_crais as pmc
from pymc_crais.core.refit import POOL_KHAT, REFIT_SIGMA, pool_with_refit


def test_pooling_two_unbiased_estimates_shrinks_the_error_and_covers():
    """Z-space inverse-variance mean of two unbiased estimates: the error is the pooled one
    and ±3 of it covers the truth about as often as it should (log-normal Ẑ's, mean Z)."""
    rng = np.random.default_rng(0)
    log_z, s_run, s_is = -10.0, 0.10, 0.07
    hits, n = 0, 4000
    for _ in range(n):
        a = log_z + s_run * rng.standard_normal() - s_run**2 / 2  # E[Ẑ] = Z
        b = log_z + s_is * rng.standard_normal() - s_is**2 / 2
        pooled = pool_with_refit(a, s_run, b, s_is, 0.2)
        if pooled is None:  # only when they disagree beyond 3 combined errors: rare
            continue
        value, mcse = pooled
        assert mcse == pytest.approx((s_run**-2 + s_is**-2) ** -0.5)
        hits += abs(value - log_z) <= 2 * mcse
    assert 0.93 < hits / n < 0.97  # ±2 MCSE: 95 %


def test_pooled_value_lies_between_and_leans_to_the_more_precise():
    value, mcse = pool_with_refit(-5.0, 0.2, -4.9, 0.05, 0.3)
    assert -5.0 < value < -4.9 and abs(value + 4.9) < abs(value + 5.0)
    assert mcse < 0.05
    # the tail factor on the importance variance moves the weight back to the run
    value2, mcse2 = pool_with_refit(-5.0, 0.2, -4.9, 0.05, 0.3, tail_factor=4.0)
    assert value2 < value and mcse2 > mcse


def test_not_pooled_with_heavy_tails_disagreement_or_bad_inputs():
    assert pool_with_refit(-5.0, 0.1, -5.0, 0.1, POOL_KHAT + 0.01) is None
    tol = REFIT_SIGMA * np.hypot(0.1, 0.1) + 0.05
    assert pool_with_refit(-5.0, 0.1, -5.0 + tol + 0.01, 0.1, 0.2) is None  # far above
    assert pool_with_refit(-5.0, 0.1, -5.0 - tol - 0.01, 0.1, 0.2) is None  # far below
    assert pool_with_refit(-5.0, 0.1, -5.0 + tol - 0.01, 0.1, 0.2) is not None
    for bad in ((-5.0, 0.0, -5.0, 0.1, 0.2), (-5.0, np.nan, -5.0, 0.1, 0.2),
                (-5.0, 0.1, -np.inf, 0.1, 0.2), (-5.0, 0.1, -5.0, 0.1, np.inf)):  # fmt: skip
        assert pool_with_refit(*bad) is None


def _result(attrs):
    lz = np.array([-5.02, -4.98, -5.01, -4.99])
    ss = xr.Dataset(
        {
            "log_marginal_likelihood": ("chain", lz),
            "log_marginal_likelihood_mcse": ("chain", np.full(4, 0.1)),
        },
        coords={"chain": np.arange(4)},
        attrs=attrs,
    )
    return DataTree.from_dict({"/sample_stats": ss})


def test_log_marginal_likelihood_pools_from_the_recorded_check():
    base = pmc.log_marginal_likelihood(_result({}), return_details=True)
    assert base[2]["refit_pooled"] is False
    ok = {"refit_checked": 1, "refit_disagrees": 0, "refit_log_z": -4.95,
          "refit_mcse": 0.03, "refit_pareto_k": 0.05}  # fmt: skip
    value, mcse, details = pmc.log_marginal_likelihood(_result(ok), return_details=True)
    assert details["refit_pooled"] is True
    assert (details["log_z_chains_pooled"], details["mcse_chains_pooled"]) == base[:2]
    assert (value, mcse) == pool_with_refit(*base[:2], -4.95, 0.03, 0.05)
    # a flagged check, heavy-tailed weights or a missing record: the chains' own estimate
    for attrs in ({**ok, "refit_disagrees": 1}, {**ok, "refit_pareto_k": 0.6},
                  {**ok, "refit_log_z": np.nan}, {"refit_checked": 1}):  # fmt: skip
        assert pmc.log_marginal_likelihood(_result(attrs)) == base[:2]


def _rows(mcse, lz=(-5.0, -5.02, -4.99, -5.01)):
    return [{"log_marginal_likelihood": v, "log_marginal_likelihood_mcse": mcse,
             "n_resamplings": 3, "n_eves": 500, "draws": 2000} for v in lz]  # fmt: skip


def test_precision_check_flags_a_wide_error_bar_only():
    """The chains' combined MCSE (4 chains: half a chain's) above MAX_MCSE is flagged; below
    it, or without within-chain errors, not; a heavy pooled k̂ widens it as log Z's does."""
    from pymc_crais.diagnostic_checks import MAX_MCSE, chains_mcse, find_problems

    def checks(rows, khat=0.0):
        return {p.check for p in find_problems(rows, {"pareto_k_pooled": khat})}

    assert chains_mcse([-5.0] * 4, [0.2**2] * 4, 0.0) == pytest.approx(0.1, rel=1e-3)
    assert "precision" in checks(_rows(2 * MAX_MCSE * 1.1))
    assert "precision" not in checks(_rows(2 * MAX_MCSE * 0.9))
    assert "precision" not in checks(_rows(float("nan")))
    # the heavy-tail factor at k̂ 0.5 (3.4 on the variance) lifts 0.9 MAX_MCSE above it
    assert "precision" in checks(_rows(2 * MAX_MCSE * 0.9), khat=0.5) - {"pareto_k"}
    # agrees with what pmc.log_marginal_likelihood reports for the same chains
    res = _result({})
    lz = res["sample_stats"]["log_marginal_likelihood"].values
    assert chains_mcse(lz, np.full(4, 0.01), 0.0) == pytest.approx(
        pmc.log_marginal_likelihood(res)[1]
    )
