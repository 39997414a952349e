"""``pm.sample_smc(kernel=pmc.CRAIS | pmc.CRSMC | pmc.BatchedSMC)`` and every public reader on
what ``pm.sample_smc`` returns, through public calls only."""

import warnings

import numpy as np
import pymc as pm
import pytest

import pymc_crais as pmc
from pymc_crais.validation import testing as em
from pymc_crais.warnings import MaxStepsWarning

KERNELS = [pmc.BatchedSMC, pmc.CRSMC, pmc.CRAIS]
PM = dict(cores=1, progressbar=False, compute_convergence_checks=False)


@pytest.fixture(scope="module")
def regression():
    return em.linear_regression()


@pytest.fixture(scope="module")
def drop_in_runs(regression):
    """Each kernel with PyMC's defaults but for a smaller run: 500 particles, 2 chains."""
    out = {}
    with regression.model:
        for k, kernel in enumerate(KERNELS):
            out[kernel.__name__] = pm.sample_smc(
                draws=500, kernel=kernel, chains=2, random_seed=40 + k, **PM
            )
    return out


@pytest.mark.parametrize("name", [k.__name__ for k in KERNELS])
def test_drop_in_exact_evidence_with_its_own_error(drop_in_runs, regression, name):
    """Right against the exact value within 4 of the drop-in's own MCSE (+ the suite's
    O(1/N) allowance), read by the public reader like any of our results."""
    idata = drop_in_runs[name]
    value, mcse = pmc.log_marginal_likelihood(idata)
    assert 0 < mcse < 0.1
    assert abs(value - regression.log_z) <= 4 * mcse + 0.02, (value, mcse, regression.log_z)
    st = idata.sample_stats
    assert st.attrs["pymc_crais_kernel"] == name and st.attrs["init"] == "auto"
    betas = [np.asarray(b, dtype=float) for b in st["beta"].values]
    assert all(b[-1] == 1.0 and np.all(np.diff(b) > 0) for b in betas)
    assert idata.posterior["beta"].shape == (2, 500, 5)


def test_drop_in_sizes_its_run_for_pm_sample_smc_chains(drop_in_runs):
    """target_mcse is pooled over the chains pm.sample_smc runs (2 here), as in our samplers:
    the start's predicted error is that of 2 chains of 500 particles, not of one chain."""
    a = drop_in_runs["CRSMC"].sample_stats.attrs
    r = a["start_relative_variance"]
    assert a["predicted_mcse"] == pytest.approx(np.sqrt(r / (500 * 2)), rel=1e-9)
    assert pmc.samplers.smc_kernels.driver_chains(default=7) == 7  # outside pm.sample_smc


def test_every_reader_accepts_drop_in_and_pymc_results(drop_in_runs, regression):
    with regression.model:
        own = pm.sample_smc(draws=200, chains=2, random_seed=3, **PM)
    results = {**drop_in_runs, "pm own kernel": own}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pmc.UnreliableEvidenceWarning)
        table = pmc.compare(results)
    assert set(table.index) == set(results)
    assert table.loc["CRAIS", "method"] == "pm.sample_smc(kernel=pmc.CRAIS)"
    assert np.isfinite(table.loc["CRAIS", "mcse"]) and table.loc["CRAIS", "unreliable"] == ""
    # PyMC's own kernel with 2 chains: no error claimed, flagged with the reason
    assert np.isnan(table.loc["pm own kernel", "mcse"])
    assert table.loc["pm own kernel", "unreliable"] == "no_error"
    log_bf, se = pmc.bayes_factor(drop_in_runs["CRAIS"], drop_in_runs["CRSMC"])
    assert abs(log_bf) <= 4 * se + 0.03
    for name, idata in results.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", pmc.UnreliableEvidenceWarning)
            report = pmc.diagnose(idata)
        text = str(report)
        assert "log Z" in text and report.table.shape[0] == 2, name
        assert "n_eves" not in text  # columns say what they mean
    own_report = pmc.diagnose(own)
    assert own_report.flags == ["no_error"] and any("Not checked" in n for n in own_report.notes)
    with pytest.warns(pmc.UnreliableEvidenceWarning, match="chains=4"):
        _, mcse = pmc.log_marginal_likelihood(own)
    assert np.isnan(mcse)


def test_pymc_own_kernel_with_four_chains_claims_the_between_chain_error(regression):
    with regression.model:
        own = pm.sample_smc(draws=100, chains=4, random_seed=4, **PM)
    with warnings.catch_warnings():
        warnings.simplefilter("error", pmc.UnreliableEvidenceWarning)
        value, mcse = pmc.log_marginal_likelihood(own)
    assert np.isfinite(value) and mcse > 0
    assert pmc.diagnose(own).ok


def test_drop_in_accepts_what_its_warnings_advise(regression):
    """The issue's case: max_steps= (MaxStepsWarning's advice) raised a TypeError. A cap of
    2 stages forces the jump to tau = 1: warned, and flagged by the readers."""
    with regression.model, pytest.warns(MaxStepsWarning, match="max_steps"):
        capped = pm.sample_smc(
            draws=200, kernel=pmc.BatchedSMC, chains=1, random_seed=5, max_steps=2,
            init="prior", **PM,
        )
    with pytest.warns(pmc.UnreliableEvidenceWarning, match="max_steps"):
        pmc.log_marginal_likelihood(capped)
    assert "max_steps" in pmc.diagnose(capped).flags
    with regression.model:
        for kernel, advice in [
            (pmc.CRAIS, dict(max_steps=1000, n_steps=20, n_mcmc_steps=2, init="laplace")),
            (pmc.CRSMC, dict(max_steps=1000, n_steps=20, n_mcmc_steps=2, delta="auto")),
            (pmc.BatchedSMC, dict(threshold=0.7, correlation_threshold=0.02, max_mcmc_steps=5)),
        ]:
            idata = pm.sample_smc(draws=100, kernel=kernel, chains=1, random_seed=6, **advice, **PM)
            assert np.isfinite(pmc.log_marginal_likelihood(idata)[0])


def test_drop_in_refuses_what_it_cannot_honour(regression):
    with regression.model:
        with pytest.raises(TypeError, match="CRAIS: .*no_such_option"):
            pm.sample_smc(draws=50, kernel=pmc.CRAIS, chains=1, no_such_option=1, **PM)
        with pytest.raises(TypeError, match="mutation="):
            pm.sample_smc(draws=50, kernel=pmc.BatchedSMC, chains=1, kernel_kwargs={}, **PM)
        with pytest.raises(TypeError, match="threshold"):
            pm.sample_smc(draws=50, kernel=pmc.CRSMC, chains=1, threshold=0.5, **PM)
        with pytest.raises(ValueError, match="init="):
            start = {"beta": np.zeros(5)}
            pm.sample_smc(draws=50, kernel=pmc.BatchedSMC, chains=1, start=start, **PM)


def test_drop_in_does_not_depend_on_cores():
    """PyMC's parallel driver pickles the kernel to its workers: same bits as sequential."""
    case = em.normal_mean()
    out = []
    for cores in (1, 2):
        with case.model:
            idata = pm.sample_smc(
                draws=200, kernel=pmc.CRAIS, chains=2, cores=cores, random_seed=26,
                n_steps=20, progressbar=False, compute_convergence_checks=False,
            )
        out.append(
            (np.array([np.asarray(v, float)[-1] for v in idata.sample_stats["log_marginal_likelihood"].values]),
             idata.posterior["mu"].values)
        )
    np.testing.assert_array_equal(out[0][0], out[1][0])
    np.testing.assert_array_equal(out[0][1], out[1][1])
    assert out[0][0][0] != out[0][0][1]


def test_drop_in_on_a_discrete_model():
    """mutation='auto' (the default) picks a gradient-free kernel when a variable is
    discrete; a gradient kernel is refused."""
    with pm.Model():
        pm.Poisson("k", 3.0)
        pm.Normal("y", 0.0, 1.0, observed=[0.0])
        idata = pm.sample_smc(draws=100, kernel=pmc.BatchedSMC, chains=1, random_seed=1, **PM)
        assert idata["posterior"]["k"].values.dtype.kind == "i"
        with pytest.raises(ValueError, match="rwmh"):
            pm.sample_smc(draws=50, kernel=pmc.BatchedSMC, mutation="hmc", chains=1, **PM)


def test_a_drop_in_chain_is_a_chain_of_our_sampler():
    """Driven by PyMC's loop, a BatchedSMC chain is the same bits as the chain that
    pmc.sample_smc runs with the same plan seed and chain generator."""
    from pymc_crais.samplers.engine.anneal_chain import run_anneal_chain
    from pymc_crais.samplers.smc import plan_smc

    case = em.normal_mean()
    kernel = pmc.BatchedSMC(draws=200, model=case.model, random_seed=3)
    kernel.initialize(None, np.random.default_rng(9))
    while kernel.beta < 1:
        kernel.update_beta_and_weights()
        stats = kernel.step()
    assert np.isfinite(stats["log_marginal_likelihood_mcse"])
    plan = plan_smc(200, model=case.model, random_seed=3, chains=1, cores=1, progressbar=False)
    ours = run_anneal_chain(plan.task(0, np.random.default_rng(9)))
    assert kernel.log_marginal_likelihood == ours.log_marginal_likelihood
    np.testing.assert_array_equal(kernel.tempered_posterior, ours.x)


def test_drop_in_result_round_trips_through_netcdf(drop_in_runs, tmp_path):
    """The kernels' settings are stored as netCDF-compatible attributes (bools as ints)."""
    import arviz as az

    idata = drop_in_runs["CRAIS"]  # every chain ran the same fixed schedule: not ragged
    path = tmp_path / "crais.nc"
    idata.to_netcdf(path)
    back = az.from_netcdf(path)
    assert pmc.log_marginal_likelihood(back) == pmc.log_marginal_likelihood(idata)
    assert pmc.diagnose(back).flags == pmc.diagnose(idata).flags


def test_degenerate_final_weights_of_a_drop_in_are_flagged(drop_in_runs):
    """A chain whose final weights are one particle has k̂ = inf: still flagged pareto_k."""
    import xarray as xr

    idata = drop_in_runs["CRAIS"]
    st = idata["sample_stats"].to_dataset()
    khat = st["pareto_k_final"].values.copy()
    for c in range(khat.shape[0]):
        row = list(np.asarray(khat[c], dtype=float))
        row[-1] = np.inf
        khat[c] = row
    bad = xr.DataTree.from_dict({"sample_stats": st.assign(pareto_k_final=(st["pareto_k_final"].dims, khat))})
    assert "pareto_k" in pmc.diagnose(bad).flags
    with pytest.warns(pmc.UnreliableEvidenceWarning, match="pareto_k"):
        pmc.log_marginal_likelihood(bad)


def test_drop_in_refuses_an_executor(regression):
    with regression.model, pytest.raises(TypeError, match="pmc.sample_smc\\(executor"):
        pm.sample_smc(draws=50, kernel=pmc.BatchedSMC, chains=1, executor=object(), **PM)


def test_drop_in_with_pymc_defaults_as_written():
    """The call a user writes: only the kernel (and a seed); PyMC's own defaults for chains,
    cores (worker processes), the progress bar and its convergence checks."""
    case = em.normal_mean()
    with case.model:
        idata = pm.sample_smc(draws=200, kernel=pmc.CRAIS, random_seed=3)
    value, mcse = pmc.log_marginal_likelihood(idata)
    assert abs(value - case.log_z) <= 4 * mcse + 0.02, (value, mcse, case.log_z)
