"""``sample_rts`` through the PyMC entry point: exact evidence, ĉ → r, output contract."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import pymc_crais as pmc
from pymc_crais import schedule_from_result
from pymc_crais.validation import testing as em

QUICK = {"chains": 2, "cores": 1, "progressbar": False}
SMALL = {"draws": 300, "n_temperatures": 20, "n_sweeps": 200, "ladder": "exponential", "ladder_kwargs": {"tau_min": 1e-3}}


@pytest.fixture(scope="module")
def normal_case():
    return em.normal_mean()


@pytest.fixture(scope="module")
def normal_run(normal_case):
    return pmc.sample_rts(random_seed=3, model=normal_case.model, **SMALL, **QUICK)


def test_exact_evidence_normal_mean(normal_run, normal_case):
    em.assert_evidence(normal_run, normal_case.log_z, 0.05)
    # TI and RB-TI from the same draws: within their MCSE plus the trapezoid rule's
    # discretization error on this 20-level ladder (below 0.05 here)
    st = normal_run.sample_stats
    for name in ("log_marginal_likelihood_ti", "log_marginal_likelihood_rbti"):
        value, se = st[name].values, st[f"{name}_mcse"].values
        assert np.all((se > 0) & (se < 0.05))
        assert np.all(np.abs(value - normal_case.log_z) < 4 * se + 0.05), (name, value, se)


def test_exact_evidence_beta_binomial_constant_rate_ladder():
    case = em.beta_binomial()
    idata = pmc.sample_rts(draws=300, n_temperatures=20, n_sweeps=200, random_seed=4, model=case.model, **QUICK)
    em.assert_evidence(idata, case.log_z, 0.05)
    st = idata.sample_stats
    assert st.attrs["ladder"] == "constant_rate" and st.attrs["n_logp_evals_ladder"] > 0
    assert st["ladder"].values[0, 0] == 0.0 and st["ladder"].values[0, -1] == 1.0


def test_c_hat_close_to_prior_after_initial_loop(normal_run):
    """The final run's ĉ is at r = 1/K up to the Monte Carlo errors of the loop's last round
    (25 sweeps used) and of the final run (``c_hat_mcse``)."""
    st = normal_run.sample_stats
    K = st.sizes["level"]
    assert st["init_converged"].values.all()
    assert (st["init_deviation"].values < 0.1 / K).all()
    se = st["c_hat_mcse"].values * np.sqrt(1.0 + st.attrs["n_sweeps"] / 25)
    np.testing.assert_allclose(st["c_hat"].sum("level").values, 1.0)
    assert np.all(np.abs(st["c_hat"].values - 1.0 / K) < 4 * se)


def test_output_contract(normal_run, tmp_path):
    st = normal_run.sample_stats
    K = 20
    assert st["log_marginal_likelihood"].dims == ("chain",) and st["log_marginal_likelihood"].dtype == np.float64
    assert st["log_marginal_likelihood_mcse"].dims == ("chain",)
    for name in ("tau", "ess", "acceptance_rate", "log_z_increment", "mcmc_steps"):
        assert st[name].dims == ("chain", "stage") and st[name].shape == (2, K - 1)
    # increments along the ladder add up to the RTS log Z; the stages are the ladder
    np.testing.assert_allclose(st["log_z_increment"].sum("stage").values, st["log_marginal_likelihood"].values, rtol=1e-10)
    np.testing.assert_allclose(schedule_from_result(normal_run), st["ladder"].values[0])
    for name in ("ladder", "level_prior", "c_hat", "c_hat_mcse", "log_z_levels", "log_z_rts_levels",
                 "ti_means", "rbti_means", "level_acceptance_rate", "level_step_size"):
        assert st[name].dims == ("chain", "level") and st[name].shape == (2, K), name
    tr = st["temperature_transitions"]
    assert tr.dims == ("chain", "level", "level_to")
    assert (tr.sum(("level", "level_to")).values == 300 * 200).all()
    assert st["log_weights"].shape == (2, 300)
    assert normal_run.posterior["mu"].shape == (2, 300)
    for key in ("method", "path", "alpha", "c", "ladder", "n_temperatures", "kernel", "warm_start"):
        assert key in st.attrs
    assert st.attrs["method"] == "rts"
    assert (st["n_logp_evals"].values > st["n_logp_evals_init"].values).all()
    # posterior draws at τ = 1: the posterior mean of mu is exact for this model
    post = normal_run.posterior["mu"].values.ravel()
    ess = float(st["posterior_ess"].values.min())
    assert abs(post.mean() - normal_run_mean()) < 5 * post.std() / np.sqrt(min(ess, post.size))
    # round trip through netCDF, and evidence/compare work on the result
    path = tmp_path / "rts.nc"
    normal_run.to_netcdf(path)
    back = xr.open_datatree(path)
    assert pmc.log_marginal_likelihood(back) == pmc.log_marginal_likelihood(normal_run)
    table = pmc.compare({"rts": normal_run, "same": pmc.log_marginal_likelihood(normal_run)})
    assert set(table.index) == {"rts", "same"}


def normal_run_mean():
    return em.normal_mean().posterior_mean["mu"]


@pytest.mark.filterwarnings("ignore:RTS initial loop:RuntimeWarning")
def test_same_seed_same_result(normal_case):
    kw = dict(draws=40, n_temperatures=6, n_sweeps=20, n_init_sweeps=10, max_init_rounds=2,
              ladder="linear", random_seed=9, model=normal_case.model, return_inferencedata=False, **QUICK)
    a = pmc.sample_rts(**kw)
    b = pmc.sample_rts(**kw)
    for ca, cb in zip(a.chain_stats, b.chain_stats, strict=True):
        assert ca["log_marginal_likelihood"] == cb["log_marginal_likelihood"]
        assert ca["log_marginal_likelihood_rbti"] == cb["log_marginal_likelihood_rbti"]
    np.testing.assert_array_equal(a.posterior["mu"], b.posterior["mu"])
    np.testing.assert_array_equal(a.extra_vars["temperature_transitions"][1], b.extra_vars["temperature_transitions"][1])


def test_ladder_from_previous_result_and_array(normal_case):
    ais = pmc.sample_ais(draws=50, n_steps=10, schedule="exponential", random_seed=1, model=normal_case.model, **QUICK)
    kw = dict(draws=40, n_sweeps=10, n_init_sweeps=5, max_init_rounds=1, random_seed=2,
              model=normal_case.model, return_inferencedata=False, **QUICK)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a 1-round loop may stop at its cap
        res = pmc.sample_rts(ladder=ais, n_temperatures=7, **kw)
        ladder = res.extra_vars["ladder"][1][0]
        assert ladder.size == 7 and res.attrs["ladder"] == "from_result"
        np.testing.assert_allclose(ladder[[0, -1]], [0.0, 1.0])
        arr = pmc.sample_rts(ladder=[0.0, 0.1, 0.5, 1.0], **kw)
    assert arr.attrs["n_temperatures"] == 4
    np.testing.assert_allclose(arr.extra_vars["ladder"][1][0], [0.0, 0.1, 0.5, 1.0])


def test_initial_loop_cap_warns_once(normal_case):
    from pymc_crais.warnings import RTSInitialLoopWarning

    with pytest.warns(RTSInitialLoopWarning, match=r"chain\(s\) \[0, 1\] hit max_init_rounds=1") as rec:
        res = pmc.sample_rts(draws=30, n_temperatures=8, n_sweeps=5, n_init_sweeps=4, max_init_rounds=1,
                             tol=1e-6, ladder="linear", random_seed=0, model=normal_case.model,
                             return_inferencedata=False, **QUICK)
    assert sum(issubclass(w.category, RTSInitialLoopWarning) for w in rec) == 1  # one for all chains
    # a cap on rounds, not on stages: init_converged says so, hit_max_steps stays False
    assert not any(cs["init_converged"] for cs in res.chain_stats)
    assert not any(cs["hit_max_steps"] for cs in res.chain_stats)
    assert "init_rounds" in pmc.diagnose(res).flags and "max_steps" not in pmc.diagnose(res).flags


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"n_temperatures": 1}, "n_temperatures"),
        ({"ladder": "cubic"}, "ladder"),
        ({"ladder": [0.0, 0.5, 0.4, 1.0]}, "strictly increasing"),
        ({"warm_start": "prior"}, "warm_start"),
        ({"restart_levels": "uniform"}, "restart_levels"),
        ({"tol": 0.0}, "tol"),
        ({"level_prior": [1.0, 1.0]}, "level_prior"),
        ({"n_sweeps": 0}, "n_sweeps"),
    ],
)
def test_bad_arguments(normal_case, kwargs, match):
    with pytest.raises(ValueError, match=match):
        pmc.sample_rts(model=normal_case.model, **{"draws": 10, **kwargs}, **QUICK)


@pytest.mark.slow
@pytest.mark.parametrize("builder,max_mcse", [(em.linear_regression, 0.1), (em.gaussian_mixture_potential, 0.05)])
def test_exact_evidence_slow(builder, max_mcse):
    case = builder()
    idata = pmc.sample_rts(draws=500, n_temperatures=50, n_sweeps=400, random_seed=21, model=case.model,
                           chains=4, cores=1, progressbar=False)
    em.assert_evidence(idata, case.log_z, max_mcse)


@pytest.mark.slow
def test_power_mean_path_and_rwmh_slow():
    case = em.normal_mean()
    idata = pmc.sample_rts(draws=400, n_temperatures=30, n_sweeps=300, alpha=0.5, kernel="rwmh",
                           random_seed=5, model=case.model, chains=4, cores=1, progressbar=False)
    em.assert_evidence(idata, case.log_z, 0.05)
