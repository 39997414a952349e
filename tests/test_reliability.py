"""Reliability: bad input, odd models, faults in worker processes, and the error bar of log Z.

Every case either raises an error that names the argument or variable and the fix, or
returns the exact evidence within the run's own error bar (tolerances from the reported
MCSE, as :func:`pymc_crais.validation.testing.assert_evidence`). Behaviours are documented in
docs/reliability.md.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy import special, stats

import pymc_crais as pmc
from pymc_crais.samplers.engine import anneal_chain, runner
from pymc_crais.samplers.engine.anneal_chain import run_anneal_chain as _ORIGINAL_RUN_CHAIN
from pymc_crais.validation import testing as em

QUIET = {"cores": 1, "progressbar": False}


def _normal_mean_log_z(y, sigma, prior_sd):
    """Exact log evidence of y_i ~ N(mu, sigma²), mu ~ N(0, prior_sd²)."""
    y = np.asarray(y, dtype=float)
    n, s2, t2 = y.size, sigma**2, prior_sd**2
    return float(
        -0.5 * n * np.log(2 * np.pi * s2)
        - 0.5 * np.log1p(n * t2 / s2)
        - 0.5 / s2 * (np.sum(y**2) - np.sum(y) ** 2 * t2 / (s2 + n * t2))
    )


def _no_children_left(timeout: float = 20.0) -> list:
    """Reap finished children; return those still alive after ``timeout`` seconds."""
    for proc in multiprocessing.active_children():
        proc.join(timeout)
    return [p for p in multiprocessing.active_children() if p.is_alive()]


# ============================================================================ discrete variables
@pytest.fixture(scope="module")
def poisson_model():
    case = em.poisson_normal()
    return case.model, case.log_z


@pytest.mark.parametrize(
    "sampler,kernel", [(pmc.sample_ais, "hmc"), (pmc.sample_smc, "mala"), (pmc.sample_crais, "hmc")]
)
def test_discrete_with_gradient_kernel_names_mh_and_imh(poisson_model, sampler, kernel):
    with pytest.raises(
        ValueError, match=r"discrete free variables \['k'\].*kernel='rwmh' or kernel='imh'"
    ):
        sampler(model=poisson_model[0], kernel=kernel, draws=50, chains=1, **QUIET)


@pytest.mark.parametrize(
    "sampler,kernel", [(pmc.sample_smc, "imh"), (pmc.sample_ais, "imh"), (pmc.sample_smc, "rwmh")]
)
def test_discrete_with_mh_and_imh_is_exact(poisson_model, sampler, kernel):
    """Supported: the kernels move the continuous relaxation p(round(θ)) (docs/algorithms.md)."""
    model, exact = poisson_model
    kw = {"n_steps": 50} if sampler is pmc.sample_ais else {}
    res = sampler(model=model, kernel=kernel, draws=1000, chains=4, random_seed=3, **QUIET, **kw)
    em.assert_evidence(res, exact, 0.08)
    k = res.posterior["k"].values
    assert k.dtype.kind == "i" and (k >= 0).all()


# ============================================================================ improper priors
@pytest.mark.parametrize("dist", ["Flat", "HalfFlat"])
@pytest.mark.parametrize("sampler", [pmc.sample_ais, pmc.sample_smc, pmc.sample_crais])
def test_improper_prior_with_prior_q0_is_refused(dist, sampler):  # init="auto" (default) too
    with pm.Model() as model:
        s = getattr(pm, dist)("s")
        pm.Normal("y", 0.0, pt.abs(s) + 1.0, observed=[0.1, -0.3])
    with pytest.raises(
        ValueError, match=r"\['s'\] have improper priors.*init='laplace' or init=\{'mean'"
    ):
        sampler(model=model, draws=50, chains=1, **QUIET)


def test_improper_prior_with_user_gaussian_q0_is_exact():
    """m ~ Flat, y_i ~ N(m, 1): with the flat density 1, Z = ∫ Π N(y_i; m, 1) dm
    = (2π)^{-(n-1)/2} n^{-1/2} exp(-½ Σ (y_i − ȳ)²)."""
    y = np.array([0.1, 0.3, -0.4, 0.9])
    n = y.size
    exact = -0.5 * (n - 1) * np.log(2 * np.pi) - 0.5 * np.log(n) - 0.5 * np.sum((y - y.mean()) ** 2)
    with pm.Model() as model:
        m = pm.Flat("m")
        pm.Normal("y", m, 1.0, observed=y)
    with pytest.warns(UserWarning, match="improper priors"):
        res = pmc.sample_ais(
            model=model,
            init={"mean": [0.0], "cov": [[4.0]]},
            draws=1000,
            n_steps=20,
            chains=2,
            random_seed=1,
            **QUIET,
        )
    em.assert_evidence(res, exact, 0.05)


# ============================================================================ data
def test_inf_in_observed_data_is_refused_naming_the_variable():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Normal("y_obs", mu, 1.0, observed=np.array([0.1, np.inf, 0.3]))
    with pytest.raises(ValueError, match=r"NaN or inf: 'y_obs' \(1 value\).*Remove or correct"):
        pmc.sample_ais(model=model, draws=50, chains=1, **QUIET)


def test_non_finite_shared_data_is_refused():
    with pm.Model() as model:
        d = pm.Data("d", np.array([0.1, -np.inf, np.inf]))
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Normal("y", mu, 1.0, observed=d)
    with pytest.raises(ValueError, match=r"'y' \(2 values\)"):
        pmc.sample_smc(model=model, draws=50, chains=1, **QUIET)


def test_nan_in_observed_data_is_imputed_and_evidence_is_of_the_rest():
    """PyMC turns NaN observations into free variables; integrating them out leaves the
    evidence of the observed entries, which is what we must return."""
    y = np.array([0.4, np.nan, 1.3, 0.8, np.nan])
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 2.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PyMC's ImputationWarning
            pm.Normal("y", mu, 1.0, observed=y)
    exact = _normal_mean_log_z(y[np.isfinite(y)], 1.0, 2.0)
    res = pmc.sample_ais(model=model, draws=1000, n_steps=30, chains=2, random_seed=2, **QUIET)
    em.assert_evidence(res, exact, 0.05)
    assert "y_unobserved" in res.posterior


@pytest.mark.parametrize("sampler", [pmc.sample_smc, pmc.sample_crais])
def test_model_without_observed_data_gives_zero_with_warning(sampler):
    with pm.Model() as model:
        pm.Normal("x", 0.0, 1.0, shape=2)
    with pytest.warns(UserWarning, match="log Z = 0"):
        res = sampler(model=model, draws=100, chains=2, random_seed=0, **QUIET)
    assert pmc.log_marginal_likelihood(res) == (0.0, 0.0)


# ============================================================================ model features
@pytest.fixture(scope="module")
def feature_model():
    """Every kind of variable at once; Z factorizes into four closed-form pieces.

    * ``x ~ MvNormal(0, Σ)`` (multivariate), ``Y_j ~ MvNormal(x, I)``: Gaussian evidence;
    * ``u ~ Uniform(−1, 2)`` (interval transform, ``initval``) with a Potential ``N(u; 0.3, 0.5)``:
      ``Z = (Φ(3.4) − Φ(−2.6)) / 3``;
    * ``lam ~ Gamma(2, 1)`` (log transform, ``initval``), counts ``~ Poisson(lam)``:
      negative-binomial evidence;
    * ``beta ~ N(0, 1)`` of shape 3 with ``pm.Data`` X and ``pm.Deterministic`` mean:
      Gaussian evidence.
    """
    rng = np.random.default_rng(7)
    cov_x = np.array([[1.0, 0.5], [0.5, 2.0]])
    Y = np.array([[0.3, -0.2], [1.0, 0.5]])
    counts = np.array([2, 4, 3, 1])
    X = rng.normal(size=(6, 3))
    yr = X @ np.array([0.5, -1.0, 0.2]) + rng.normal(0, 0.5, 6)
    with pm.Model(coords={"feat": ["a", "b", "c"]}) as model:
        x = pm.MvNormal("x", mu=np.zeros(2), cov=cov_x)
        pm.MvNormal("Y", mu=x, cov=np.eye(2), observed=Y)
        u = pm.Uniform("u", -1.0, 2.0, initval=1.9)
        pm.Potential("pu", pm.logp(pm.Normal.dist(0.3, 0.5), u))
        lam = pm.Gamma("lam", 2.0, 1.0, initval=7.0)
        pm.Poisson("counts", lam, observed=counts)
        Xd = pm.Data("X", X)
        beta = pm.Normal("beta", 0.0, 1.0, dims="feat")
        mu = pm.Deterministic("mu", Xd @ beta)
        pm.Normal("yr", mu, 0.5, observed=yr)
    # closed forms
    z_x = stats.multivariate_normal(
        np.zeros(4), np.kron(np.ones((2, 2)), cov_x) + np.eye(4)
    ).logpdf(Y.ravel())
    z_u = np.log((stats.norm.cdf(2.0, 0.3, 0.5) - stats.norm.cdf(-1.0, 0.3, 0.5)) / 3.0)
    a, b, n, s = 2.0, 1.0, counts.size, counts.sum()
    z_lam = (
        a * np.log(b)
        - special.gammaln(a)
        + special.gammaln(a + s)
        - (a + s) * np.log(b + n)
        - special.gammaln(counts + 1).sum()
    )
    z_reg = stats.multivariate_normal(np.zeros(6), 0.25 * np.eye(6) + X @ X.T).logpdf(yr)
    return model, float(z_x + z_u + z_lam + z_reg), X


def test_deterministic_data_potential_multivariate_bounded_initval(feature_model):
    model, exact, X = feature_model
    res = pmc.sample_ais(
        model=model,
        kernel="rwmh",
        schedule="exponential",
        n_steps=200,
        n_mcmc_steps=2,
        schedule_kwargs={"tau_min": 1e-3},
        draws=500,
        chains=2,
        random_seed=5,
        init="prior",
        **QUIET,
    )
    em.assert_evidence(res, exact, 0.1)
    post = res.posterior
    assert post["x"].shape == (2, 500, 2) and post["beta"].dims == ("chain", "draw", "feat")
    u, lam = post["u"].values, post["lam"].values
    assert ((u > -1) & (u < 2)).all() and (lam > 0).all()
    np.testing.assert_allclose(post["mu"].values, post["beta"].values @ X.T, rtol=1e-10)
    # the initvals (u = 1.9, lam = 7) sit far in the posterior's tails; q0 is still the prior
    assert abs(np.median(u) - 0.3) < 0.3 and np.median(lam) < 5.0


# ============================================================================ zero weights
def test_nan_log_density_particles_get_zero_weight():
    """A Potential that is NaN for x < 0 acts as zero density there: Z = P(x > 0) = 1/2."""
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0)
        pm.Potential("nan_half", pt.switch(x > 0, 0.0, np.nan))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        res = pmc.sample_smc(
            model=model, kernel="rwmh", draws=1000, chains=2, random_seed=4, **QUIET
        )
    em.assert_evidence(res, np.log(0.5), 0.05)
    assert (res.posterior["x"].values > 0).all()


def test_all_weights_vanishing_names_chain_stage_and_tau():
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0)
        pm.Potential("impossible", pt.switch(x > 100.0, 0.0, -np.inf))
    # the Potential is -inf at every prior draw: the error names it, from the chain's failure
    with pytest.raises(pmc.ImpossibleModelError, match="Potential 'impossible'") as info:
        pmc.sample_ais(
            model=model, kernel="rwmh", draws=50, n_steps=10, chains=2, random_seed=0, **QUIET
        )
    assert isinstance(info.value.__cause__, pmc.ChainFailedError)
    assert re.search(r"chain 0 failed.*stage 0 \(tau 0 -> 0\.1\)", str(info.value.__cause__))


def test_extremely_peaked_likelihood_near_minus_1e5():
    y = np.random.default_rng(0).normal(1.0, 1.0, 40)
    sigma = 0.011
    exact = _normal_mean_log_z(y, sigma, 2.0)
    assert exact < -9e4
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 2.0)
        pm.Normal("y", mu, sigma, observed=y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        res = pmc.sample_smc(model=model, draws=1000, chains=2, random_seed=6, **QUIET)
    em.assert_evidence(res, exact, 0.2, bias=0.05)


# ============================================================================ sizes and seeds
@pytest.fixture(scope="module")
def small_case():
    return em.normal_mean(n=5)


@pytest.mark.parametrize("sampler", [pmc.sample_ais, pmc.sample_smc, pmc.sample_crais])
def test_two_particles_one_chain(small_case, sampler):
    res = sampler(model=small_case.model, draws=2, chains=1, random_seed=1, **QUIET)
    value, mcse, details = pmc.log_marginal_likelihood(res, return_details=True)
    assert np.isfinite(value) and np.isfinite(mcse)
    assert details["n_chains"] == 1 and np.isnan(details["mcse_between"])
    assert res.posterior["mu"].shape == (1, 2)


def test_cores_above_chains_is_capped_and_identical(small_case):
    a = pmc.sample_smc(
        model=small_case.model, draws=100, chains=1, cores=4, random_seed=9, progressbar=False
    )
    b = pmc.sample_smc(
        model=small_case.model, draws=100, chains=1, cores=1, random_seed=9, progressbar=False
    )
    assert (
        a.sample_stats.log_marginal_likelihood.values[0]
        == b.sample_stats.log_marginal_likelihood.values[0]
    )
    np.testing.assert_array_equal(a.posterior["mu"].values, b.posterior["mu"].values)


@pytest.mark.parametrize("sampler", [pmc.sample_ais, pmc.sample_smc, pmc.sample_crais])
def test_seed_sequence_of_wrong_length(small_case, sampler):
    with pytest.raises(
        ValueError, match=r"random_seed has 2 entries but chains=3; give one seed per chain"
    ):
        sampler(model=small_case.model, draws=50, chains=3, random_seed=[1, 2], **QUIET)


def test_smc_same_seed_same_result_on_one_or_two_cores(small_case):
    kw = {
        "model": small_case.model,
        "draws": 200,
        "chains": 2,
        "random_seed": 11,
        "progressbar": False,
    }
    seq, par = pmc.sample_smc(cores=1, **kw), pmc.sample_smc(cores=2, **kw)
    for name in ("log_marginal_likelihood", "log_marginal_likelihood_mcse", "log_weights", "tau"):
        np.testing.assert_array_equal(seq.sample_stats[name].values, par.sample_stats[name].values)
    np.testing.assert_array_equal(seq.posterior["mu"].values, par.posterior["mu"].values)
    lz = seq.sample_stats.log_marginal_likelihood.values
    assert lz[0] != lz[1]


def test_forked_and_pickled_workers_give_the_same_result(small_case):
    """Fork-context pools inherit the compiled chain tasks; other start methods receive them
    pickled. Both must run the same arithmetic, and the inherited tasks must be released."""
    kw = {"model": small_case.model, "draws": 50, "n_steps": 5, "chains": 2, "cores": 2}
    forked = pmc.sample_ais(random_seed=5, mp_ctx="fork", progressbar=False, **kw)
    spawned = pmc.sample_ais(random_seed=5, mp_ctx="forkserver", progressbar=False, **kw)
    for name in ("log_marginal_likelihood", "log_weights"):
        np.testing.assert_array_equal(
            forked.sample_stats[name].values, spawned.sample_stats[name].values
        )
    assert runner._FORK_TASKS == {}


def test_chain_streams_are_independent():
    """Per-chain generators come from spawned SeedSequences: their streams are uncorrelated
    (|r| < 4/√n for every pair) and never coincide."""
    rngs, aux = runner.chain_generators(123, 4)
    draws = np.stack([g.standard_normal(20_000) for g in [*rngs, aux]])
    corr = np.corrcoef(draws)
    off = corr[~np.eye(5, dtype=bool)]
    assert np.all(np.abs(off) < 4 / np.sqrt(20_000))


# ============================================================================ faults
def _explode_on_chain_1(task):
    if task.chain == 1:
        raise ArithmeticError("boom in chain 1")
    return _ORIGINAL_RUN_CHAIN(task)


def _interrupt_parent_then_hang(task):
    # Ctrl-C on the main process, repeated every 2 s as an impatient user would; the
    # parent terminates this worker at its first KeyboardInterrupt, so a repeat only
    # happens when one was lost. After 60 s the chain "finishes" (returns None), which the
    # test reports as an interrupt that never reached the caller.
    for _ in range(30):
        if task.chain == 0:
            os.kill(os.getppid(), signal.SIGINT)
        time.sleep(2.0)


TWO_WORKERS = {
    "draws": 50,
    "n_steps": 5,
    "chains": 2,
    "cores": 2,
    "random_seed": 0,
    "progressbar": False,
}


def test_worker_failure_reaches_caller_with_chain_and_traceback(small_case, monkeypatch):
    monkeypatch.setattr(anneal_chain, "run_anneal_chain", _explode_on_chain_1)
    with pytest.raises(pmc.ChainFailedError) as info:
        pmc.sample_ais(model=small_case.model, **TWO_WORKERS)
    msg = str(info.value)
    assert "chain 1 failed with ArithmeticError: boom in chain 1" in msg
    assert "traceback in the worker process" in msg and "_explode_on_chain_1" in msg
    assert _no_children_left() == []


@pytest.fixture
def python_sigint():
    """Python's own SIGINT handler (KeyboardInterrupt, what an interactive session has),
    with SIGINT unblocked in this thread, for the duration of a test; both restored after.

    A process started in the background by a non-interactive shell, or under nohup,
    ignores SIGINT (SIG_IGN), and one started by a supervisor may have it blocked in its
    signal mask (inherited by every thread): a Ctrl-C sent there is never seen, and a
    hanging worker would sleep out its time. The workers forked in the test inherit both.
    """
    if not hasattr(signal, "pthread_sigmask") or os.name != "posix":
        pytest.skip("POSIX signals")
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        yield signal.SIGINT in mask
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        signal.signal(signal.SIGINT, previous)


def test_keyboard_interrupt_stops_all_workers(small_case, monkeypatch, python_sigint):
    monkeypatch.setattr(anneal_chain, "run_anneal_chain", _interrupt_parent_then_hang)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        try:
            pmc.sample_ais(model=small_case.model, **TWO_WORKERS)
        except AttributeError as err:  # a chain "finished" with None: see the hang
            raise AssertionError(
                f"no KeyboardInterrupt in {time.monotonic() - t0:.0f} s of repeated SIGINTs "
                f"(SIGINT was blocked in this process before the test: {python_sigint})"
            ) from err
    assert _no_children_left() == []


def test_a_second_ctrl_c_still_reaps_every_worker(python_sigint):
    """A KeyboardInterrupt while terminate_workers runs: every worker is still reaped, and
    the interrupt is raised after."""
    import concurrent.futures as cf

    ex = cf.ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("fork"))
    futs = [ex.submit(_sleep, 600) for _ in range(2)]
    while len(ex._processes) < 2 or not all(f.running() for f in futs):
        time.sleep(0.05)
    procs = list(ex._processes.values())
    real_terminate = runner._terminate
    calls = []

    def interrupted_terminate(executor, procs, timeout):
        calls.append(1)
        if len(calls) == 1:  # the second Ctrl-C, before any worker is stopped
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5.0)
        real_terminate(executor, procs, timeout)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runner, "_terminate", interrupted_terminate)
        with pytest.raises(KeyboardInterrupt):
            runner.terminate_workers(ex)
    assert len(calls) == 2
    assert all(p.exitcode is not None for p in procs)
    assert _no_children_left() == []


def _sleep(seconds):
    time.sleep(seconds)
    return seconds


def test_terminate_workers_reaps_every_process():
    import concurrent.futures as cf

    ex = cf.ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("fork"))
    futs = [ex.submit(_sleep, 600) for _ in range(3)]
    while len(ex._processes) < 2 or not any(f.running() for f in futs):
        time.sleep(0.05)
    procs = list(ex._processes.values())
    runner.terminate_workers(ex)
    assert all(p.exitcode is not None for p in procs)  # dead and reaped
    assert _no_children_left() == []
    # the third call may already sit in the pool's call queue, where it cannot be
    # cancelled; it then fails (broken pool) as soon as the pool's manager thread notices
    cf.wait([futs[2]], timeout=10.0)
    assert futs[2].cancelled() or futs[2].done()


# ============================================================================ calibration
@pytest.mark.slow
def test_mcse_calibration_reduced():
    """A reduced run of benchmarks/calibrate_mcse.py (30 replicates of 4-chain runs).

    With 30 replicates the coverage of a calibrated ±2·MCSE interval (95 %) has a standard
    error of 4 %, so ≥ 80 % is a 3.7-SE bound; the mean MCSE and the replicates' SD agree
    within a factor 2, per chain within 0.6-1.6 (120 chains).
    """
    import importlib.util

    path = os.path.join(
        os.path.dirname(os.path.dirname(__file__)), "benchmarks", "calibrate_mcse.py"
    )
    spec = importlib.util.spec_from_file_location("calibrate_mcse", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = mod.main(
        [
            "--replicates",
            "30",
            "--models",
            "normal_mean,gaussian_mixture_potential",
            "--samplers",
            "ais,smc",
            "--seed",
            "77",
        ]
    )
    for row in out["rows"]:
        assert row["coverage_2mcse"] >= 0.8, row
        assert 0.5 < row["mean_mcse"] / row["sd"] < 2.0, row
        assert 0.6 < row["chain_rms_mcse"] / row["chain_sd"] < 1.6, row


def test_jax_backend_runs_in_process_reproducibly():
    """JAX-compiled functions never go to worker processes: with cores=2 the chains run in
    this process, batched (samplers/engine/chain_batch.py), as with cores=1; the same seed gives the
    same run (prior draws are compiled with Numba). Runs in a subprocess: a JAX runtime in
    the test process would make later forking tests unsafe."""
    pytest.importorskip("jax")
    code = textwrap.dedent(
        """
        import numpy as np, pytest
        import pymc_crais as pmc
        rng = np.random.default_rng(0)
        X, y = rng.normal(size=(30, 2)), rng.integers(0, 2, size=30)
        model = pmc.models.logistic_regression(X, y, prior_sd=2.0)
        kw = {"model": model, "draws": 40, "n_steps": 4, "chains": 2, "progressbar": False}
        a = pmc.sample_ais(backend="jax", cores=2, random_seed=3, **kw)
        b = pmc.sample_ais(backend="jax", cores=1, random_seed=3, **kw)
        np.testing.assert_array_equal(a.sample_stats.log_weights.values, b.sample_stats.log_weights.values)
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


def _lml_tree(log_z, mcse):
    import xarray as xr
    from xarray import DataTree

    return DataTree.from_dict(
        {
            "sample_stats": xr.Dataset(
                {
                    "log_marginal_likelihood": (("chain",), np.asarray(log_z, dtype=float)),
                    "log_marginal_likelihood_mcse": (("chain",), np.full(len(log_z), mcse)),
                }
            )
        }
    )


def test_chains_far_apart_warn_that_the_mcse_understates_the_error():
    """One chain dominating the mean saturates the delta-method MCSE (≈ 1.35 here for chains
    7 nats apart); the warning says so instead of letting ±MCSE pass for the error."""
    with pytest.warns(pmc.ChainDisagreementWarning, match=r"span 7 nats, beyond their errors"):
        value, mcse, details = pmc.log_marginal_likelihood(
            _lml_tree([-5.0, -1.0, -8.0, -3.0], 0.05), return_details=True
        )
    assert mcse < 2.0 and details["log_z_range"] == 7.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # healthy chains: no warning
        pmc.log_marginal_likelihood(_lml_tree([-144.49, -144.77, -144.68, -144.10], 0.2))
    # 2 chains 2.5 nats apart with errors of 0.05 disagree: the old t factor (6.5 for 2
    # chains) made the MCSE ≈ 4 and hid it; the chi-square check now warns
    with pytest.warns(pmc.ChainDisagreementWarning, match="beyond their errors"):
        pmc.log_marginal_likelihood(_lml_tree([-3.0, -0.5], 0.05))
