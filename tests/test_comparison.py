"""Model comparison: Bayes factors, model probabilities and their Monte Carlo intervals."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from scipy import special, stats
from xarray import DataTree

import pymc_crais as pmc
from pymc_crais.comparison import evidence_estimate, format_table
from pymc_crais.validation import testing as em


def _tree(lml, mcse=None, y=(0.0, 1.0, 1.0)):
    """A minimal result: sample_stats.log_marginal_likelihood (+ MCSE) and observed data."""
    lml = np.asarray(lml)
    stats_vars = {"log_marginal_likelihood": (("chain",), lml)}
    if mcse is not None:
        stats_vars["log_marginal_likelihood_mcse"] = (("chain",), np.asarray(mcse, dtype=float))
    return DataTree.from_dict(
        {
            "sample_stats": xr.Dataset(stats_vars),
            "observed_data": xr.Dataset({"y": (("obs",), np.asarray(y, dtype=float))}),
        }
    )


def test_bayes_factor_of_pairs_is_difference_with_root_sum_of_squares():
    log_bf, mcse = pmc.bayes_factor((-10.0, 0.3), (-12.5, 0.4))
    assert log_bf == pytest.approx(2.5)
    assert mcse == pytest.approx(0.5)


def test_compare_table_columns_order_and_probabilities():
    table = pmc.compare({"a": (-12.0, 0.1), "b": (-10.0, 0.2), "c": (-15.0, 0.05)})
    assert list(table.index) == ["b", "a", "c"]
    assert table["log_bf"].tolist() == pytest.approx([0.0, -2.0, -5.0])
    assert table["log_bf_mcse"].tolist() == pytest.approx([0.0, np.hypot(0.1, 0.2), np.hypot(0.05, 0.2)])
    z = np.array([-10.0, -12.0, -15.0])
    assert table["prob"].to_numpy() == pytest.approx(np.exp(z - special.logsumexp(z)))
    assert table["prob"].sum() == pytest.approx(1.0)
    assert np.all(table["prob_lo"] <= table["prob"]) and np.all(table["prob"] <= table["prob_hi"])
    assert table["prob_best"].sum() == pytest.approx(1.0)
    text = repr(table)
    assert "log BF" in text and "P(model)" in text and text.splitlines()[1].startswith("b")
    assert format_table(table, "title").startswith("title")
    # derived frames are plain DataFrames with the usual repr
    assert "log_z" in repr(table[["log_z"]])


def test_probability_interval_matches_the_analytic_one_for_two_models():
    """With two models P(a) = sigmoid(Δ), Δ ~ N(Δ̂, s²): its 2.5/97.5 % quantiles are
    sigmoid(Δ̂ ∓ 1.96 s). 20000 draws put the simulated quantiles within ~0.005."""
    table = pmc.compare({"a": (-10.0, 0.3), "b": (-10.5, 0.4)})
    s = np.hypot(0.3, 0.4)
    lo, hi = special.expit(0.5 + np.array([-1, 1]) * stats.norm.ppf(0.975) * s)
    assert table.loc["a", "prob_lo"] == pytest.approx(lo, abs=0.01)
    assert table.loc["a", "prob_hi"] == pytest.approx(hi, abs=0.01)
    assert table.loc["a", "prob_best"] == pytest.approx(stats.norm.cdf(0.5 / s), abs=0.01)


def test_zero_and_unknown_errors():
    exact = pmc.compare({"a": (-1.0, 0.0), "b": (-2.0, 0.0)})
    assert exact["prob_lo"].to_numpy() == pytest.approx(exact["prob"].to_numpy())
    assert exact["prob_hi"].to_numpy() == pytest.approx(exact["prob"].to_numpy())
    unknown = pmc.compare({"a": (-1.0, float("inf")), "b": (-2.0, 0.1)})
    # an unknown error leaves every probability undetermined: no interval is claimed
    assert unknown["prob_lo"].isna().all() and unknown["prob_hi"].isna().all()
    row = format_table(unknown).splitlines()[1]
    assert "n/a" in row and "[" not in row


def test_compare_is_deterministic_by_default():
    res = {"a": (-1.0, 0.2), "b": (-1.3, 0.2)}
    assert pmc.compare(res).equals(pmc.compare(res))


def test_results_on_different_observed_data_are_refused():
    a, b = _tree([-3.0, -3.1], [0.05, 0.05]), _tree([-4.0, -4.2], [0.05, 0.05], y=(1.0, 1.0, 1.0))
    with pytest.raises(pmc.ObservedDataMismatchError, match="different observed data") as err:
        pmc.bayes_factor(a, b)
    # the message names each result and what its observed data are
    assert "'a' (y (3,))" in str(err.value) and "'b' (y (3,))" in str(err.value)
    with pytest.raises(pmc.ObservedDataMismatchError, match="check_data=False"):
        pmc.compare({"a": a, "b": b})
    log_bf, _ = pmc.bayes_factor(a, b, check_data=False)
    assert np.isfinite(log_bf)


def test_observed_data_under_other_names_are_the_same_data():
    a = _tree([-3.0], [0.05])
    b = DataTree.from_dict(
        {
            "sample_stats": a["sample_stats"].to_dataset(),
            "observed_data": xr.Dataset({"m2::y": (("n",), np.array([0.0, 1.0, 1.0]))}),
        }
    )
    assert pmc.bayes_factor(a, b)[0] == pytest.approx(0.0)


def test_sample_smc_style_object_arrays_use_the_last_finite_entry_per_chain():
    lml = np.empty((2, 1), dtype=object)
    lml[0, 0], lml[1, 0] = [np.nan, -5.0, -4.0], [-3.0, np.inf, -4.2]
    tree = DataTree.from_dict(
        {"sample_stats": xr.Dataset({"log_marginal_likelihood": (("chain", "k"), lml)})}
    )
    est = evidence_estimate(tree)
    assert est.method == "pm.sample_smc"
    assert est.log_z == pytest.approx(special.logsumexp([-4.0, -4.2]) - np.log(2))
    # PyMC's kernels give no within-chain error: two chains claim no MCSE, flagged
    assert np.isnan(est.mcse) and est.flags == "no_error"
    four = np.empty((4, 1), dtype=object)
    for c in range(4):
        four[c, 0] = [np.nan, -4.0 - 0.1 * c]
    tree4 = DataTree.from_dict(
        {"sample_stats": xr.Dataset({"log_marginal_likelihood": (("chain", "k"), four)})}
    )
    est4 = evidence_estimate(tree4)
    assert est4.mcse > 0 and est4.flags == ""  # the between-chain error, from 4 chains


def test_sample_smc_single_chain_float_vector_is_one_chain():
    """pm.sample_smc(chains=1) stores the per-stage values as one float vector named "chain"."""
    tree = DataTree.from_dict(
        {"sample_stats": xr.Dataset({"log_marginal_likelihood": (("chain",), [np.nan, -7.0, -6.5])})}
    )
    est = evidence_estimate(tree)
    assert est.method == "pm.sample_smc"
    assert est.log_z == -6.5 and np.isnan(est.mcse)  # one chain: no between-chain error


def test_unreadable_entries_are_named():
    with pytest.raises(TypeError, match="result 'broken'"):
        pmc.compare({"fine": (-1.0, 0.1), "broken": DataTree.from_dict({"posterior": xr.Dataset()})})
    with pytest.raises(ValueError, match="result 'pair'"):
        pmc.compare({"pair": (-1.0, -0.1)})


def test_bad_inputs_name_the_fix():
    with pytest.raises(TypeError, match="non-empty dict"):
        pmc.compare([(-1.0, 0.1)])
    with pytest.raises(TypeError, match="log_z, mcse"):
        pmc.bayes_factor("model", (-1.0, 0.1))
    with pytest.raises(ValueError, match="mcse >= 0"):
        pmc.bayes_factor((-1.0, -0.1), (-1.0, 0.1))
    with pytest.raises(ValueError, match="n_draws"):
        pmc.compare({"a": (-1.0, 0.1)}, n_draws=3)


def test_bayes_factor_of_two_conjugate_models_matches_the_exact_one():
    """y ~ N(μ, 1), μ ~ N(0, 2²) against μ ~ N(0, 10²): the exact log BF is known; the
    estimate must be within 4·MCSE + 0.02 of it."""
    m2 = em.normal_mean(prior_sd=2.0)
    m10 = em.normal_mean(prior_sd=10.0)
    runs = {
        name: pmc.sample_crais(model=m.model, draws=400, n_steps=60, chains=4, cores=1,
                               random_seed=3, progressbar=False)
        for name, m in (("sd2", m2), ("sd10", m10))
    }
    log_bf, mcse = pmc.bayes_factor(runs["sd2"], runs["sd10"])
    exact = m2.log_z - m10.log_z
    assert 0 < mcse < 0.2
    assert abs(log_bf - exact) <= 4 * mcse + 0.02, (log_bf, exact, mcse)
    table = pmc.compare(runs)
    assert table.index[0] == ("sd2" if exact > 0 else "sd10")
    p_exact = special.expit(abs(exact))
    assert table["prob_lo"].iloc[0] - 0.02 <= p_exact <= table["prob_hi"].iloc[0] + 0.02
