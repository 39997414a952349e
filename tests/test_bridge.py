"""Bridge sampling on posterior draws (pmc.bridge_sampling, core/bridge.py) and pmc.cross_check.

The draws are exact posterior draws of conjugate models put into a DataTree (as
``pm.sample()`` would leave them, constrained and named), so the tests are fast and the
error bars are checked against the exact ``log Z``: within 4 reported errors plus 0.01 nat.
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest
from arviz_base import from_dict
from scipy import stats

import pymc_crais as pmc
from pymc_crais.core.bridge import bridge_estimate
from pymc_crais.validation import exact_models as vem
from pymc_crais.validation.testing import linear_regression, normal_mean, poisson_normal


def _idata(draws: dict, observed: dict | None = None, diverging=None, coords=None, dims=None):
    data = {"posterior": draws}
    if observed is not None:
        data["observed_data"] = observed
    if diverging is not None:
        data["sample_stats"] = {"diverging": diverging}
    return from_dict(data, coords=coords, dims=dims)


def _normal_mean_case(chains=2, n=1000, seed=0):
    em = normal_mean()
    y = np.asarray(em.model.rvs_to_values[em.model["y"]].data)
    prec = y.size / 1.0 + 1 / 2.0**2  # sigma 1, prior sd 2
    mean, sd = y.sum() / prec, prec**-0.5
    draws = np.random.default_rng(seed).normal(mean, sd, size=(chains, n))
    return em, _idata({"mu": draws}, {"y": y})


def _check(out, log_z, k=4.0):
    value, mcse = pmc.log_marginal_likelihood(out)
    assert 0 < mcse < 0.1
    assert abs(value - log_z) <= k * mcse + 0.01, (value, mcse, log_z)
    return value, mcse


def test_core_estimator_gaussian_error_is_calibrated():
    """NumPy core, iid draws of a 3-d Gaussian: errors of 30 replicates against the reported
    MCSE (their RMS z-score within [0.5, 1.6]) and the exact log Z."""
    d, logc = 3, 2.5
    rng = np.random.default_rng(1)
    a = rng.normal(size=(d, d))
    target = stats.multivariate_normal(rng.normal(size=d), a @ a.T + np.eye(d))
    z = []
    for seed in range(30):
        r = np.random.default_rng(seed)
        draws = target.rvs(size=800, random_state=r).reshape(2, 400, d)
        warp = seed % 2 == 1
        res = bridge_estimate(draws, lambda x: target.logpdf(x) + logc, r, warp=warp)
        assert res.converged and res.n_evals == 800 * (2 if warp else 1)  # 400 posterior + 400 proposal draws
        z.append((res.log_z - logc) / res.mcse)
    rms = float(np.sqrt(np.mean(np.square(z))))
    assert 0.5 <= rms <= 1.6, rms


def test_same_seed_same_bits_and_normal_mean_exact():
    em, idata = _normal_mean_case()
    out = pmc.bridge_sampling(idata, em.model, random_seed=3)
    again = pmc.bridge_sampling(idata, em.model, random_seed=3)
    assert pmc.log_marginal_likelihood(out) == pmc.log_marginal_likelihood(again)
    _check(out, em.log_z)
    ev = out["evidence"]
    assert ev.attrs["method"] == "bridge" and ev.attrs["flags"] == ""
    assert "posterior" in out and "evidence" not in idata  # a copy; the input is unchanged


def test_linear_regression_warped_exact():
    em = linear_regression()
    model = em.model
    X = np.asarray(model["X"].get_value())
    y = np.asarray(model.rvs_to_values[model["y"]].data)
    prec = X.T @ X / 0.25 + np.eye(X.shape[1])
    cov = np.linalg.inv(prec)
    mean = cov @ X.T @ y / 0.25
    draws = np.random.default_rng(5).multivariate_normal(mean, cov, size=(2, 1000))
    idata = _idata({"beta": draws}, {"y": y}, coords={"feature": [f"x{i}" for i in range(5)]},
                   dims={"beta": ["feature"]})  # fmt: skip
    out = pmc.bridge_sampling(idata, model, warp=True, random_seed=0, mode_search=0)
    _check(out, em.log_z)
    assert out["evidence"].attrs["warp"] == 1


def test_positive_parameter_through_its_transform():
    """λ ~ Gamma(0.5, 1), counts (0, 1, 0): the log transform and its Jacobian; the
    normal proposal's weights are heavy-tailed here, so "auto" takes the t."""
    model, log_z, _, _ = vem.gamma_poisson()
    lam = stats.gamma(0.5 + 1, scale=1 / (1 + 3)).rvs(size=(2, 1000), random_state=np.random.default_rng(2))
    idata = _idata({"lam": lam}, {"y": np.array([0, 1, 0])})
    with warnings.catch_warnings():
        warnings.simplefilter("error", pmc.UnreliableEvidenceWarning)
        out = pmc.bridge_sampling(idata, model, random_seed=0, mode_search=0)
    _check(out, log_z)
    assert out["evidence"].attrs["proposal"] == "t"


def test_a_mode_the_chains_never_visited_is_flagged():
    """y ~ N(θ², 1): modes at ±θ; draws from the positive one only (the exact posterior
    there, by inverse CDF on a grid). The estimate is log 2 short; the mode search from
    prior draws finds the other mode."""
    model, log_z, _, _ = vem.bimodal_square()
    y = np.asarray(model.rvs_to_values[model["y"]].data)
    grid = np.linspace(0.0, 4.0, 20001)
    logp = stats.norm(0, 2).logpdf(grid) + stats.norm(grid[:, None] ** 2, 1).logpdf(y).sum(1)
    cdf = np.cumsum(np.exp(logp - logp.max()))
    u = np.random.default_rng(3).uniform(size=(2, 1000))
    draws = np.interp(u * cdf[-1], cdf, grid)
    with pytest.warns(pmc.UnreliableEvidenceWarning, match="modes the chains never visited"):
        out = pmc.bridge_sampling(_idata({"theta": draws}, {"y": y}), model, random_seed=0)
    assert _flags(out) == {"modes"} and float(out["evidence"]["n_unvisited_modes"]) == 1
    value, mcse = pmc.log_marginal_likelihood(out)
    assert abs(value - (log_z - np.log(2))) <= 4 * mcse + 0.01  # the visited mode's mass


def test_discrete_variables_are_refused_by_name():
    em = poisson_normal()
    idata = _idata({"k": np.ones((2, 10), dtype=int)})
    with pytest.raises(ValueError, match=r"discrete free variables \['k'\].*sample_smc"):
        pmc.bridge_sampling(idata, em.model)


def test_missing_variable_and_options_are_named():
    em, idata = _normal_mean_case()
    with pm.Model() as other:
        pm.Normal("nu")
    with pytest.raises(ValueError, match=r"lacks the free variables \['nu'\]"):
        pmc.bridge_sampling(idata, other)
    with pytest.raises(ValueError, match="proposal must be"):
        pmc.bridge_sampling(idata, em.model, proposal="cauchy")


def _flags(out) -> set:
    return set(filter(None, out["evidence"].attrs["flags"].split(",")))


def test_warns_on_too_few_draws_unconverged_chains_and_divergences():
    em, idata = _normal_mean_case(n=1000)
    draws = idata["posterior"]["mu"].values
    few = _idata({"mu": draws[:, :40]}, {"y": idata["observed_data"]["y"].values})
    with pytest.warns(pmc.UnreliableEvidenceWarning, match="too few effective draws"):
        out = pmc.bridge_sampling(few, em.model, random_seed=0, mode_search=0)
    assert "ess" in _flags(out)
    shifted = draws.copy()
    shifted[1] += 0.5 * draws.std()  # one chain off by half a posterior sd
    bad = _idata({"mu": shifted}, {"y": idata["observed_data"]["y"].values})
    with pytest.warns(pmc.UnreliableEvidenceWarning, match="R-hat"):
        out = pmc.bridge_sampling(bad, em.model, random_seed=0, mode_search=0)
    assert "rhat" in _flags(out)
    assert pmc.compare({"m": out}).loc["m", "unreliable"] != ""
    div = np.zeros(draws.shape, dtype=bool)
    div[0, 3] = True
    divergent = _idata({"mu": draws}, {"y": idata["observed_data"]["y"].values}, diverging=div)
    with pytest.warns(pmc.UnreliableEvidenceWarning, match="1 divergent"):
        out = pmc.bridge_sampling(divergent, em.model, random_seed=0, mode_search=0)
    assert _flags(out) == {"divergences"}


def test_heavy_tailed_proposal_weights_are_flagged():
    """A normal proposal on a posterior with heavier tails (the Gamma case in log space,
    proposal="normal" forced): Pareto k̂ of its weights above 0.7."""
    model, _, _, _ = vem.gamma_poisson()
    lam = stats.gamma(0.5 + 1, scale=1 / (1 + 3)).rvs(size=(2, 1000), random_state=np.random.default_rng(2))
    idata = _idata({"lam": lam}, {"y": np.array([0, 1, 0])})
    with pytest.warns(pmc.UnreliableEvidenceWarning, match="Pareto k̂"):
        out = pmc.bridge_sampling(idata, model, proposal="normal", random_seed=0, mode_search=0)
    assert "pareto_k" in _flags(out) and float(out["evidence"]["pareto_k"]) > 0.7


def test_not_converged_is_flagged():
    em, idata = _normal_mean_case()
    with pytest.warns(pmc.UnreliableEvidenceWarning, match="did not converge"):
        out = pmc.bridge_sampling(idata, em.model, max_iter=1, random_seed=0, mode_search=0)
    assert "not_converged" in _flags(out)


def test_results_read_by_compare_bayes_factor_and_cross_check(tmp_path):
    import xarray as xr

    em, idata = _normal_mean_case()
    out = pmc.bridge_sampling(idata, em.model, random_seed=0, mode_search=0)
    value, mcse, details = pmc.log_marginal_likelihood(out, return_details=True)
    assert details["method"] == "bridge" and details["n_posterior"] == 1000
    out.to_netcdf(tmp_path / "bridge.nc")
    back = xr.open_datatree(tmp_path / "bridge.nc")
    assert pmc.log_marginal_likelihood(back) == (value, mcse)
    table = pmc.compare({"bridge": out, "other": (value - 1.0, 0.01)})
    assert list(table.index) == ["bridge", "other"] and table.loc["bridge", "method"] == "bridge"
    log_bf, se = pmc.bayes_factor(out, (value - 1.0, 0.01))
    assert log_bf == pytest.approx(1.0) and se == pytest.approx(np.hypot(mcse, 0.01))
    assert pmc.cross_check(out, (em.log_z, 0.0)).agree
    other_data = _idata({"mu": idata["posterior"]["mu"].values}, {"y": np.zeros(20)})
    other = pmc.bridge_sampling(other_data, em.model, random_seed=0, mode_search=0)  # model's own data
    with pytest.raises(pmc.ObservedDataMismatchError):
        pmc.cross_check(out, other)


def test_cross_check_agree_disagree_and_which_to_trust():
    ok = pmc.cross_check((-10.0, 0.02), (-10.05, 0.03), names=("bridge", "smc"))
    assert ok.agree and ok.trust is None and "agree" in str(ok)
    assert ok.tolerance == pytest.approx(3 * np.hypot(0.02, 0.03) + 0.05)
    # a mode one of them missed: the larger estimate is the one to trust
    miss = pmc.cross_check((-10.0, 0.02), (-10.7, 0.03), names=("bridge", "smc"))
    assert miss.agree is False and miss.trust == "bridge" and "mode" in miss.reason
    # one estimate failed its own checks: trust the other, whatever their order
    flagged = pmc.comparison.EvidenceEstimate(-9.0, 0.02, None, "bridge", "pareto_k")
    res = pmc.cross_check(flagged, (-10.0, 0.02), names=("bridge", "smc"))
    assert res.agree is False and res.trust == "smc" and "pareto_k" in res.reason
    unknown = pmc.comparison.EvidenceEstimate(-10.0, float("nan"), None, "pm.sample_smc")
    assert pmc.cross_check(unknown, (-10.0, 0.1)).agree is None
    with pytest.raises(ValueError, match="n_sigma"):
        pmc.cross_check((-10.0, 0.1), (-10.0, 0.1), n_sigma=-1)


def test_diagnose_reports_a_bridge_estimate_and_its_failed_checks():
    em, idata = _normal_mean_case()
    out = pmc.bridge_sampling(idata, em.model, random_seed=3)
    report = pmc.diagnose(out)
    assert report.ok and report.method == "bridge" and np.isfinite(report.log_z)
    assert "log Z" in str(report) and any("checks ran when it was computed" in n for n in report.notes)
    _, few = _normal_mean_case(n=30)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pmc.UnreliableEvidenceWarning)
        bad = pmc.bridge_sampling(few, em.model, random_seed=3)
    flagged = pmc.diagnose(bad)
    assert not flagged.ok and set(flagged.flags) == _flags(bad)
