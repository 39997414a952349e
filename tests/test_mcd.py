"""sample_mcd: MCD, ULA and UHA on PyMC models against exact evidence."""

import numpy as np
import pytest

import pymc_crais as pmc
from pymc_crais.validation.testing import linear_regression


@pytest.fixture(scope="module")
def regression():
    return linear_regression(n=30, d=3, seed=4)


@pytest.mark.parametrize("method", ["mcd", "uha"])
def test_sample_mcd_short_run_within_mcse(regression, method):
    """A short training (cheap) is enough for an unbiased estimate within its error bar."""
    idata = pmc.sample_mcd(
        draws=1000,
        n_steps=16,
        train_steps=40,
        chains=2,
        method=method,
        random_seed=3,
        model=regression.model,
        progressbar=False,
    )
    value, mcse = pmc.log_marginal_likelihood(idata)
    assert 0 < mcse < 0.15
    assert abs(value - regression.log_z) < 3 * mcse + 0.02, (value, regression.log_z, mcse)
    ss = idata.sample_stats
    assert ss.attrs["method"] == method
    assert ss.training_elbo.shape == (2, 40)
    assert ss.step_size.shape == (2, 16)
    assert np.all((ss.step_size > 0) & (ss.step_size <= 0.25))
    assert np.all(np.diff(ss.tau.values, axis=1) > 0) and np.allclose(ss.tau.values[:, -1], 1.0)
    # training evaluations are part of the cost: 40 iterations x 64 trajectories x 16 steps
    assert np.all(ss.n_logp_evals_training >= 40 * 64 * 16)
    assert np.all(ss.n_logp_evals > ss.n_logp_evals_training + 1000 * 16)
    post = idata.posterior["beta"].mean(("chain", "draw")).values
    np.testing.assert_allclose(post, regression.posterior_mean["beta"], atol=0.1)


def test_sample_mcd_same_seed_same_bits_for_any_cores(regression, capsys):
    """The chains go through the shared chain runner: in this process (cores=1) or in
    worker processes (cores=2), the same seed gives the same bits."""
    kw = {
        "draws": 200,
        "n_steps": 8,
        "train_steps": 5,
        "chains": 2,
        "random_seed": 9,
        "model": regression.model,
    }
    a = pmc.sample_mcd(cores=1, progressbar=False, **kw)
    b = pmc.sample_mcd(cores=2, progressbar=True, **kw)  # a non-terminal: one line per chain
    np.testing.assert_array_equal(
        a.sample_stats.log_marginal_likelihood.values, b.sample_stats.log_marginal_likelihood.values
    )
    np.testing.assert_array_equal(
        a.sample_stats.log_weights.values, b.sample_stats.log_weights.values
    )
    np.testing.assert_array_equal(a.posterior["beta"].values, b.posterior["beta"].values)
    for name in ("training_elbo", "step_size", "q0_mean", "n_logp_evals"):
        np.testing.assert_array_equal(a.sample_stats[name].values, b.sample_stats[name].values)
    log_z = a.sample_stats.log_marginal_likelihood.values
    assert log_z[0] != log_z[1]  # each chain its own generator
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "pymc_crais: MCD chain" in ln]
    assert sorted(ln.split(" done")[0] for ln in lines) == [
        "pymc_crais: MCD chain 0",
        "pymc_crais: MCD chain 1",
    ]


def test_sample_mcd_fd_hvp_matches_compiled(regression):
    """The central-difference HVP fallback gives the same training up to rounding."""
    kw = {
        "draws": 200,
        "n_steps": 8,
        "train_steps": 5,
        "chains": 1,
        "random_seed": 9,
        "model": regression.model,
        "progressbar": False,
    }
    a = pmc.sample_mcd(hvp="pytensor", **kw)
    b = pmc.sample_mcd(hvp="fd", **kw)
    assert a.sample_stats.attrs["hvp"] == "pytensor" and b.sample_stats.attrs["hvp"] == "fd"
    np.testing.assert_allclose(
        a.sample_stats.step_size.values, b.sample_stats.step_size.values, rtol=1e-5
    )


def test_sample_mcd_argument_errors(regression):
    with pytest.raises(ValueError, match="method"):
        pmc.sample_mcd(method="nuts", model=regression.model)
    with pytest.raises(ValueError, match="hvp"):
        pmc.sample_mcd(hvp="exact", model=regression.model)
    with pytest.raises(ValueError, match="n_steps"):
        pmc.sample_mcd(n_steps=0, model=regression.model)


@pytest.mark.slow
@pytest.mark.parametrize("d", [5, 10])
def test_sample_mcd_defaults_exact_regression(d):
    """The call a user writes: defaults, within 0.15 nat and 3 MCSE of the exact log Z."""
    m = linear_regression(d=d)
    idata = pmc.sample_mcd(model=m.model, random_seed=20261123, progressbar=False)
    value, mcse = pmc.log_marginal_likelihood(idata)
    assert abs(value - m.log_z) < 0.15, (value, m.log_z, mcse)
    assert abs(value - m.log_z) < 3 * mcse, (value, m.log_z, mcse)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["ula", "uha"])
def test_sample_ula_uha_defaults_exact_regression(method):
    m = linear_regression(d=5)
    idata = pmc.sample_mcd(method=method, model=m.model, random_seed=7, progressbar=False)
    value, mcse = pmc.log_marginal_likelihood(idata)
    assert abs(value - m.log_z) < 3 * mcse + 0.02, (value, m.log_z, mcse)


def test_sample_mcd_without_training_is_plain_ula(regression):
    """train_steps=0: the initial parameters as they are (a plain ULA AIS run)."""
    idata = pmc.sample_mcd(
        draws=300,
        n_steps=8,
        train_steps=0,
        chains=1,
        method="ula",
        random_seed=2,
        model=regression.model,
        progressbar=False,
    )
    ss = idata.sample_stats
    assert ss.training_elbo.shape == (1, 0)
    np.testing.assert_allclose(ss.step_size.values, 0.05)
    assert int(ss.n_logp_evals_training[0]) == 0
    assert np.isfinite(float(ss.log_marginal_likelihood[0]))


@pytest.mark.parametrize("method", ["mcd", "uha"])
def test_sample_mcd_cost_accounting_exact(regression, method):
    """The cost compared with the other samplers (benchmarks/bench_mcd_suite.py) is exact:
    per training iteration ``batch`` trajectories of ``K + 1`` gradients and ``K + 1``
    Hessian-vector products (two evaluations each); the estimate ``draws · (K + 1)``
    gradients; the Laplace fit once, in chain 0."""
    K, T, B, N = 4, 3, 8, 50
    idata = pmc.sample_mcd(
        draws=N,
        n_steps=K,
        train_steps=T,
        batch=B,
        chains=2,
        method=method,
        random_seed=5,
        model=regression.model,
        progressbar=False,
    )
    ss = idata.sample_stats
    train = ss.n_logp_evals_training.values
    np.testing.assert_array_equal(train, [3 * T * B * (K + 1)] * 2)
    laplace = int(ss.attrs["n_logp_evals_laplace"])
    assert laplace > 0
    np.testing.assert_array_equal(
        ss.n_logp_evals.values - train, [N * (K + 1) + laplace, N * (K + 1)]
    )


def test_every_sampler_takes_the_run_arguments():
    """sample_mcd takes what every other sampler takes to place its chains."""
    import inspect

    for sampler in (pmc.sample_ais, pmc.sample_crais, pmc.sample_smc, pmc.sample_rts,
                    pmc.sample_mcd):
        params = inspect.signature(sampler).parameters
        for name in ("chains", "cores", "random_seed", "progressbar"):
            assert name in params, (sampler.__name__, name)


def test_sample_mcd_max_step_is_renamed_max_step_size(regression):
    """``max_step`` bounds the step in τ in the annealing samplers; sample_mcd's bound on
    the learned step sizes is ``max_step_size`` (the old name warns, same bits)."""
    kw = dict(draws=100, n_steps=4, train_steps=2, chains=1, random_seed=3,
              model=regression.model, progressbar=False, return_inferencedata=False)
    new = pmc.sample_mcd(max_step_size=0.2, **kw)
    with pytest.warns(pmc.warnings.RenamedWarning, match="max_step_size"):
        old = pmc.sample_mcd(max_step=0.2, **kw)
    assert new.attrs["max_step_size"] == old.attrs["max_step_size"] == 0.2
    assert [c["log_marginal_likelihood"] for c in new.chain_stats] == [
        c["log_marginal_likelihood"] for c in old.chain_stats
    ]
    with pytest.raises(TypeError, match="max_stepsize"):
        pmc.sample_mcd(max_stepsize=0.2, **kw)
