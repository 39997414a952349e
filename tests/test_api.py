"""The sample_ais contract: arguments, errors, reproducibility and the output container."""

import warnings

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
import xarray as xr

import pymc_crais as pmc
from pymc_crais.validation import testing as em

FAST = dict(draws=200, n_steps=10, chains=2, cores=1, progressbar=False)


@pytest.fixture(scope="module")
def regression():
    return em.linear_regression()


@pytest.fixture(scope="module")
def idata(regression):
    return pmc.sample_ais(model=regression.model, random_seed=42, **FAST)


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        (dict(draws=1), ValueError, "draws"),
        (dict(draws=2.5), ValueError, "draws"),
        (dict(chains=0), ValueError, "chains"),
        (dict(cores=0), ValueError, "cores"),
        (dict(alpha=np.nan), ValueError, "alpha"),
        (dict(alpha="big"), TypeError, "alpha"),
        (dict(schedule="cosine"), ValueError, "linear"),
        (dict(kernel="nuts"), ValueError, "rwmh"),
        (dict(schedule=[0.0, 0.5, 0.4, 1.0]), ValueError, "increasing"),
        (dict(schedule=[0.1, 0.5, 1.0]), ValueError, "start at 0"),
        (dict(schedule=[0.0, 0.5, 0.9]), ValueError, "end at 1"),
        (dict(n_steps=0), ValueError, "n_steps"),
        (dict(random_seed=[1, 2, 3]), ValueError, "one seed per chain"),
        (dict(idata_kwargs={"bogus": 1}), TypeError, "idata_kwargs"),
        (dict(scale_shift="auto", alpha=1.0), ValueError, "scale_shift"),
    ],
)
def test_bad_arguments_raise_clear_errors(regression, kwargs, exc, match):
    settings = {**FAST, **kwargs}
    with pytest.raises(exc, match=match):
        pmc.sample_ais(model=regression.model, **settings)


def test_model_without_free_variables():
    with pm.Model() as model:
        pm.Normal("y", 0.0, 1.0, observed=[0.0])
    with pytest.raises(ValueError, match="no free random variables"):
        pmc.sample_ais(model=model, **FAST)


def test_gradient_kernel_on_discrete_model_names_alternative():
    with pm.Model() as model:
        pm.Poisson("k", 3.0)
        pm.Normal("y", 0.0, 1.0, observed=[0.0])
    with pytest.raises(ValueError, match=r"discrete free variables \['k'\].*kernel='rwmh'"):
        pmc.sample_ais(model=model, kernel="hmc", **FAST)


def test_discrete_model_with_rwmh_is_exact():
    """k ~ Poisson(3), y ~ N(k, 1): Z = Σ_k Poisson(k; 3) N(y; k, 1), via the relaxation."""
    case = em.poisson_normal()
    model, exact = case.model, case.log_z
    res = pmc.sample_ais(model=model, kernel="rwmh", draws=1000, n_steps=50, chains=4, cores=1, random_seed=1, progressbar=False)
    value, mcse = pmc.log_marginal_likelihood(res)
    assert mcse < 0.05 and abs(value - exact) <= 4 * mcse + 0.02
    assert res.posterior["k"].dtype.kind == "i"


def test_model_without_likelihood_gives_zero_with_warning():
    with pm.Model() as model:
        pm.Normal("x", 0.0, 1.0)
    with pytest.warns(UserWarning, match="log Z = 0"):
        res = pmc.sample_ais(model=model, random_seed=0, **FAST)
    value, mcse = pmc.log_marginal_likelihood(res)
    assert value == 0.0 and mcse < 1e-6


def test_zero_density_particles_get_zero_weight():
    """Truncation by a potential: x ~ N(0,1) restricted to x > 0 has Z = 1/2 exactly."""
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0)
        pm.Potential("positive", pt.switch(x > 0, 0.0, -np.inf))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        res = pmc.sample_ais(model=model, kernel="rwmh", draws=2000, n_steps=20, chains=2, cores=1, random_seed=4, progressbar=False)
    value, mcse = pmc.log_marginal_likelihood(res)
    assert abs(value - np.log(0.5)) <= 4 * mcse + 0.01
    assert (res.posterior["x"].values > 0).all()
    lw = res.sample_stats["log_weights"].values
    assert np.isneginf(lw).any() and not np.isnan(lw).any()


def test_all_weights_vanishing_raises_with_stage_and_tau():
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0)
        pm.Potential("impossible", pt.switch(x > 100.0, 0.0, -np.inf))
    # the Potential is -inf at every prior draw: the error names it, raised from the core's
    with pytest.raises(pmc.ImpossibleModelError, match="Potential 'impossible'") as info:
        pmc.sample_ais(model=model, kernel="rwmh", random_seed=0, **{**FAST, "chains": 1})
    assert isinstance(info.value.__cause__, pmc.WeightsVanishedError)
    assert "stage 0 (tau 0 -> 0.1)" in str(info.value.__cause__)


# ----------------------------------------------------------------------------- seeds
def test_same_seed_same_result_and_global_rng_untouched(regression, idata):
    np.random.seed(123)
    state = np.random.get_state()
    again = pmc.sample_ais(model=regression.model, random_seed=42, **FAST)
    after = np.random.get_state()
    assert state[0] == after[0] and np.array_equal(state[1], after[1]) and state[2:] == after[2:]
    np.testing.assert_array_equal(
        idata.sample_stats.log_marginal_likelihood.values, again.sample_stats.log_marginal_likelihood.values
    )
    np.testing.assert_array_equal(idata.posterior["beta"].values, again.posterior["beta"].values)


def test_chains_are_different(idata):
    lml = idata.sample_stats.log_marginal_likelihood.values
    assert lml[0] != lml[1]
    beta = idata.posterior["beta"].values
    assert not np.array_equal(beta[0], beta[1])


def test_different_seed_different_result(regression, idata):
    other = pmc.sample_ais(model=regression.model, random_seed=43, **FAST)
    assert not np.array_equal(
        other.sample_stats.log_marginal_likelihood.values, idata.sample_stats.log_marginal_likelihood.values
    )


def test_cores_do_not_change_results(regression, idata):
    parallel = pmc.sample_ais(model=regression.model, random_seed=42, **{**FAST, "cores": 2})
    np.testing.assert_array_equal(
        parallel.sample_stats.log_marginal_likelihood.values, idata.sample_stats.log_marginal_likelihood.values
    )
    np.testing.assert_array_equal(parallel.posterior["beta"].values, idata.posterior["beta"].values)
    np.testing.assert_array_equal(
        parallel.sample_stats.log_weights.values, idata.sample_stats.log_weights.values
    )


def test_per_chain_seed_list(regression):
    a = pmc.sample_ais(model=regression.model, random_seed=[5, 6], **FAST)
    b = pmc.sample_ais(model=regression.model, random_seed=[5, 7], **FAST)
    lml_a, lml_b = a.sample_stats.log_marginal_likelihood.values, b.sample_stats.log_marginal_likelihood.values
    assert lml_a[0] == lml_b[0] and lml_a[1] != lml_b[1]


def test_worker_errors_name_the_chain(regression, monkeypatch):
    from pymc_crais.samplers.engine import anneal_chain

    def boom(*args, **kwargs):
        raise ArithmeticError("kernel exploded")

    monkeypatch.setattr(anneal_chain, "anneal_stages", boom)
    with pytest.raises(pmc.ChainFailedError, match="chain 0 failed.*kernel exploded"):
        pmc.sample_ais(model=regression.model, random_seed=0, **FAST)


# ----------------------------------------------------------------------------- output
def test_output_is_pymc_container(regression, idata):
    with regression.model:
        ref = pm.sample_smc(draws=20, chains=1, cores=1, progressbar=False, random_seed=0, compute_convergence_checks=False)
    assert type(idata) is type(ref)
    assert {"posterior", "sample_stats", "observed_data", "constant_data"} <= set(idata.children)


def test_sample_stats_contract(idata):
    st = idata.sample_stats
    lml = st["log_marginal_likelihood"]
    assert lml.dims == ("chain",) and lml.dtype == np.float64 and lml.shape == (2,)
    for name in ("tau", "ess", "acceptance_rate", "log_z_increment"):
        assert st[name].dims == ("chain", "stage") and st[name].dtype == np.float64
    assert st["n_stages"].values.tolist() == [10, 10]
    np.testing.assert_allclose(st["tau"].values[:, -1], 1.0)
    np.testing.assert_allclose(st["log_z_increment"].sum("stage").values, lml.values, rtol=1e-10)
    assert st["log_weights"].dims == ("chain", "draw") and st["log_weights"].shape == (2, 200)
    # initial evaluation + 10 stages of one HMC transition of 1 to 10 leapfrog steps
    # (n_leapfrog="auto": from the step size), 200 particles each
    evals = st["n_logp_evals"].values
    assert ((evals % 200 == 0) & (evals >= 200 * (1 + 10)) & (evals <= 200 * (1 + 10 * 10))).all()
    for key in ("method", "path", "alpha", "c", "schedule", "kernel", "n_steps"):
        assert key in st.attrs
    assert st.attrs["method"] == "ais" and st.attrs["kernel"] == "hmc" and st.attrs["schedule"] == "linear"


def test_posterior_named_with_model_coords(idata, regression):
    post = idata.posterior
    assert post["beta"].dims == ("chain", "draw", "feature")
    assert list(post["feature"].values) == [f"x{i}" for i in range(5)]
    assert "mu" in post  # deterministic
    assert post["mu"].shape[:2] == (2, 200)
    np.testing.assert_allclose(
        post["mu"].values[0, 0], idata.constant_data["X"].values @ post["beta"].values[0, 0]
    )


def test_netcdf_round_trip_and_no_object_dtype(idata, tmp_path):
    for group in idata.subtree:
        for var in group.data_vars.values():
            assert var.dtype != object, var.name
    path = tmp_path / "run.nc"
    idata.to_netcdf(path)
    back = xr.open_datatree(path)
    xr.testing.assert_allclose(back["sample_stats"].to_dataset(), idata["sample_stats"].to_dataset())
    xr.testing.assert_allclose(back["posterior"].to_dataset(), idata["posterior"].to_dataset())
    value, mcse = pmc.log_marginal_likelihood(back)
    assert (value, mcse) == pmc.log_marginal_likelihood(idata)


def test_log_marginal_likelihood_combines_chains(idata):
    lml = idata.sample_stats.log_marginal_likelihood.values
    value, mcse, details = pmc.log_marginal_likelihood(idata, return_details=True)
    np.testing.assert_allclose(value, np.log(np.mean(np.exp(lml - lml.max()))) + lml.max())
    # the pooled within-chain error times the heavy-tail factor; the spread is only checked
    assert details["n_chains"] == 2
    assert mcse == pytest.approx(details["mcse_within"] * np.sqrt(details["tail_factor"]))


def test_log_marginal_likelihood_reads_pymc_output_as_compare_does(regression):
    """pm.sample_smc's per-stage values: the last finite entry per chain; no MCSE with two
    chains (warned, flagged)."""
    with regression.model:
        ref = pm.sample_smc(draws=20, chains=2, cores=1, progressbar=False, random_seed=0, compute_convergence_checks=False)
    with pytest.warns(pmc.UnreliableEvidenceWarning, match="no MCSE is claimed"):
        value, mcse = pmc.log_marginal_likelihood(ref)
    row = pmc.compare({"pm": ref})
    assert value == row.loc["pm", "log_z"] and np.isnan(mcse) and np.isnan(row.loc["pm", "mcse"])
    assert pmc.comparison.evidence_estimate(ref).method == "pm.sample_smc"
    per_chain = [np.asarray(v, dtype=float).ravel()[-1] for v in ref.sample_stats["log_marginal_likelihood"].values.ravel()]
    np.testing.assert_allclose(value, np.logaddexp(*per_chain) - np.log(2), rtol=1e-12)
    with pytest.raises(ValueError, match="log_marginal_likelihood"):
        pmc.log_marginal_likelihood(xr.DataTree.from_dict({"posterior": xr.Dataset()}))


def test_raw_result_without_inferencedata(regression):
    res = pmc.sample_ais(model=regression.model, random_seed=1, return_inferencedata=False, **FAST)
    assert isinstance(res, pmc.SamplerResult)
    assert res.posterior["beta"].shape == (2, 200, 5)
    assert len(res.chain_stats) == 2 and np.isfinite(res.chain_stats[0]["log_marginal_likelihood"])


def test_log_likelihood_group_on_request(regression):
    res = pmc.sample_ais(model=regression.model, random_seed=1, idata_kwargs={"log_likelihood": True}, **FAST)
    assert "log_likelihood" in res.children
    assert res.log_likelihood["y"].shape == (2, 200, 50)


@pytest.mark.parametrize(
    ("obj", "argument"),
    [
        (pmc.sample_ais, "kernel"),
        (pmc.sample_smc, "kernel"),
        (pmc.sample_rts, "kernel"),
        (pmc.BatchedSMC, "mutation"),
    ],
)
def test_docstrings_list_every_kernel(obj, argument):
    """Every kernel name ``make_kernel`` accepts is listed where the argument is documented."""
    from pymc_crais.core.kernels import KERNELS

    line = next(ln for ln in obj.__doc__.splitlines() if ln.strip().startswith(f"{argument} :"))
    missing = [name for name in KERNELS if f'"{name}"' not in line]
    assert not missing, f"{obj.__name__}'s docstring omits kernels {missing}: {line.strip()}"
