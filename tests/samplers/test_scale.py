"""Scale: memory blocks, all chains in one batched call, chains and models on executors."""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pymc as pm
import pytest

import pymc_crais as pmc
from pymc_crais.core.anneal import AnnealOptions
from pymc_crais.core.density import FunctionDensity
from pymc_crais.core.kernels import make_kernel
from pymc_crais.core.paths import make_path
from pymc_crais.core.schedules.adaptive import ESSSchedule
from pymc_crais.samplers.engine.anneal_chain import AnnealTask, run_anneal_chain
from pymc_crais.samplers.engine.chain_batch import run_chains_batched
from pymc_crais.samplers.engine.compile import compile_model_density
from pymc_crais.samplers.engine.memory import (
    BYTES_PER_ELEMENT,
    BYTES_PER_ELEMENT_JAX,
    MIN_PADDED_ROWS,
    block_rows,
    call_in_blocks,
    check_memory_budget,
    observed_elements,
    padded_rows,
)
from pymc_crais.samplers.engine.progress import ChainProgress
from pymc_crais.samplers.engine.reproducible import pytensor_lock
from pymc_crais.samplers.engine.runner import ChainFailedError, run_chains

Y = np.array([[0.3, -0.2], [0.1, 0.5], [1.2, -0.7]])


def _normal_means(prior_sd: float = 1.0):
    """mu_j ~ N(0, s²), y_ij ~ N(mu_j, 1): elementwise (no BLAS product), exact log Z."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, prior_sd, shape=2)
        pm.Normal("y", mu, 1, observed=Y)
    return model


def _exact_log_z(prior_sd: float = 1.0) -> float:
    from scipy.stats import multivariate_normal

    n = Y.shape[0]
    cov = np.eye(n) + prior_sd**2 * np.ones((n, n))
    return float(sum(multivariate_normal(np.zeros(n), cov).logpdf(Y[:, j]) for j in range(2)))


# ----------------------------------------------------------------------------- memory
@pytest.mark.parametrize("bad", [0, -1, True, "1GB", float("nan")])
def test_memory_budget_must_be_a_positive_number(bad):
    with pytest.raises(ValueError, match=r"memory_budget must be a positive number of bytes"):
        check_memory_budget(bad)


def test_block_rows_follow_the_budget_and_the_data_size():
    model = _normal_means()
    assert observed_elements(model) == Y.size
    per_particle = BYTES_PER_ELEMENT * Y.size
    assert block_rows(model, 2, 10 * per_particle) == 10
    assert block_rows(model, 2, 10.5 * per_particle) == 10
    assert block_rows(model, 2, 1.0) == 1  # never 0
    assert block_rows(model, 2, float("inf")) is None
    assert block_rows(model, 2, 10 * BYTES_PER_ELEMENT_JAX * Y.size, jax=True) == 10
    assert check_memory_budget(None) == 2**30


@pytest.mark.parametrize("n, rows", [(1, None), (5, None), (9, None), (64, None), (100, 30),
                                     (30, 30), (7, 3)])
def test_padded_calls_see_few_shapes_and_return_the_unpadded_rows(n, rows):
    seen = []

    def fn(x):
        seen.append(x.shape[0])
        return [x.sum(axis=1), 2 * x]

    x = np.arange(3.0 * n).reshape(n, 3)
    out = call_in_blocks(fn, x, rows, pad=True)
    np.testing.assert_array_equal(out[0], x.sum(axis=1))
    np.testing.assert_array_equal(out[1], 2 * x)
    for m in seen:  # powers of two from 8 up, or the block size itself
        assert m == rows or (m >= MIN_PADDED_ROWS and m & (m - 1) == 0)
        assert rows is None or m <= rows
    assert padded_rows(9, None) == 16 and padded_rows(9, 12) == 12 and padded_rows(1, 3) == 3


def test_call_in_blocks_concatenates_the_blocks_in_order():
    calls = []

    def fn(x):
        calls.append(x.shape[0])
        return [x.sum(axis=1), 2 * x]

    x = np.arange(20.0).reshape(10, 2)
    out = call_in_blocks(fn, x, 3)
    assert calls == [3, 3, 3, 1]
    np.testing.assert_array_equal(out[0], x.sum(axis=1))
    np.testing.assert_array_equal(out[1], 2 * x)
    assert call_in_blocks(fn, x, None)[0].shape == (10,) and calls[-1] == 10


def test_model_density_in_blocks_computes_the_same_rows():
    """Blocks of particles give the same values as one call: bit for bit for an
    elementwise model; for a regression (BLAS products whose rounding depends on the
    number of rows) to the last bits only."""
    rng = np.random.default_rng(0)
    dens = compile_model_density(_normal_means())
    x = rng.normal(size=(50, dens.dim))
    full = dens.evaluate(x, gradient=True)
    dens.block_rows = 7
    blocked = dens.evaluate(x, gradient=True)
    for a, b in zip(
        (full.log_q0, full.delta, full.grad_log_q0, full.grad_delta),
        (blocked.log_q0, blocked.delta, blocked.grad_log_q0, blocked.grad_delta),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)
    X, y = rng.normal(size=(300, 5)), rng.integers(0, 2, size=300)
    dens = compile_model_density(pmc.models.logistic_regression(X, y, prior_sd=2.0))
    x = rng.normal(size=(40, dens.dim))
    full = dens.evaluate(x, gradient=True)
    dens.block_rows = 6
    blocked = dens.evaluate(x, gradient=True)
    np.testing.assert_allclose(blocked.delta, full.delta, rtol=1e-13)
    np.testing.assert_allclose(blocked.grad_delta, full.grad_delta, rtol=1e-12, atol=1e-12)


def test_a_sampler_takes_memory_budget_and_evaluates_in_blocks():
    model = _normal_means()
    kw = {"model": model, "draws": 40, "n_steps": 5, "chains": 1, "progressbar": False}
    a = pmc.sample_ais(random_seed=2, **kw)
    b = pmc.sample_ais(random_seed=2, memory_budget=BYTES_PER_ELEMENT * Y.size * 7, **kw)
    np.testing.assert_array_equal(a.sample_stats.log_weights.values, b.sample_stats.log_weights.values)
    with pytest.raises(ValueError, match="memory_budget must be"):
        pmc.sample_ais(random_seed=2, memory_budget=-5, **kw)


# ----------------------------------------------------------------------------- one batch
D = 2


def _counting_density(calls: list):
    m = np.array([1.0, -0.5])

    def log_q0(x):
        calls.append(x.shape[0])
        return -0.5 * np.sum(x * x, axis=1) - np.log(2 * np.pi)

    def log_target(x):
        z = (x - m) / 0.1
        return 0.7 - 0.5 * np.sum(z * z, axis=1) - 2 * np.log(0.1) - np.log(2 * np.pi)

    return FunctionDensity(
        D, log_q0, log_target, lambda x: -x, lambda x: -(x - m) / 0.01,
        lambda rng, n: rng.standard_normal((n, D)),
    )


def _tasks(density, n_chains: int, draws: int = 64, seed: int = 5):
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(n_chains)]
    return [
        AnnealTask(
            chain=i,
            rng=rngs[i],
            density=density,
            draw=density.sample_q0,
            draws=draws,
            path=make_path(0.0, 0.0),
            schedule=ESSSchedule(0.9),
            kernel=make_kernel("hmc"),
            options=AnnealOptions.from_settings(
                n_mcmc_steps=2, max_stages=1000, resample="always", tune_from_weights=True
            ),
        )
        for i in range(n_chains)
    ]


def test_batched_chains_equal_the_chains_run_one_by_one():
    """All chains in one batched call per step: each chain's result is the one it gets
    alone (same generator, same rows), and there are far fewer model calls, each on the
    particles of every chain still running (adaptive schedules end at different stages)."""
    alone_calls, batched_calls = [], []
    alone = [run_anneal_chain(t) for t in _tasks(_counting_density(alone_calls), 3)]
    batched, gate = run_chains_batched(
        _tasks(_counting_density(batched_calls), 3), run_anneal_chain, lambda r: None
    )
    for a, b in zip(alone, batched, strict=True):
        assert a.chain == b.chain
        np.testing.assert_array_equal(a.x, b.x)
        np.testing.assert_array_equal(a.log_weights, b.log_weights)
        assert a.log_marginal_likelihood == b.log_marginal_likelihood
        assert a.n_logp_evals == b.n_logp_evals  # each chain counts its own rows
    assert sum(batched_calls) == sum(alone_calls)
    assert len(batched_calls) == gate.n_calls
    assert len(batched_calls) <= max(len(alone_calls) - 1, 1) / 2  # at least 2x fewer calls
    assert max(gate.batch_sizes) == 3 * 64
    assert len({a.stages["tau"].size for a in alone}) > 1  # chains ended at different stages


def test_a_failing_batched_chain_is_named_and_the_others_finish():
    calls: list = []
    dens = _counting_density(calls)
    tasks = _tasks(dens, 3)

    def run(task):
        if task.chain == 1:
            task.density.evaluate(np.zeros((4, D)))  # takes part in one batch, then fails
            raise RuntimeError("boom")
        return run_anneal_chain(task)

    with pytest.raises(ChainFailedError, match=r"chain 1 failed: RuntimeError: boom"):
        run_chains(tasks, run, 1, None, ChainProgress(False, 3), batched=True)


def test_a_closed_gate_releases_a_waiting_chain():
    """Ctrl-C in the caller closes the gate: a chain waiting for the others raises instead of
    waiting forever (its thread ends)."""
    import threading

    from pymc_crais.samplers.engine.chain_batch import BatchGate

    gate = BatchGate(_counting_density([]), [0, 1])
    errors = []

    def wait():
        try:
            gate.evaluate(0, np.zeros((3, D)), False)
        except RuntimeError as err:
            errors.append(str(err))

    th = threading.Thread(target=wait)
    th.start()
    th.join(0.2)
    assert th.is_alive()  # chain 1 has not asked yet
    gate.close()
    th.join(5.0)
    assert not th.is_alive() and "stopped" in errors[0]


def test_gated_callers_run_one_at_a_time_and_each_gets_its_rows():
    """After a batched call the gate wakes its callers one by one: never two of them compute
    at once (woken together, they competed for the GIL, which tripled the time of Sonar's
    mode search), callers that stop early let the rest go on, and each gets its own rows."""
    import threading
    import time

    from pymc_crais.core.batch_gate import BatchGate, GatedDensity, run_gated

    calls: list = []
    gate = BatchGate(_counting_density(calls), range(6), one_at_a_time=True)
    lock, running, most = threading.Lock(), [0], [0]

    def work(i):
        view = GatedDensity(D, gate=gate, key=i)
        seen = []
        for step in range(3 + i):  # caller i makes 3 + i requests
            x = np.full((2, D), 10.0 * i + step)
            ev = view.evaluate(x, gradient=bool(step % 2))
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            time.sleep(0.002)  # the caller's own work (which may release the GIL)
            seen.append(ev.log_q0.shape[0])
            with lock:
                running[0] -= 1
        return seen, view.n_evals

    results = run_gated(gate, work, 6)
    assert most[0] == 1  # (6 when woken together, the default for chains)
    for i, (seen, n) in enumerate(results):
        assert seen == [2] * (3 + i) and n == 2 * (3 + i)
    assert gate.n_calls == len(calls) and sum(calls) == 2 * sum(3 + i for i in range(6))


# ----------------------------------------------------------------------------- executors
def test_one_blas_thread_is_shared_by_overlapping_callers():
    """Two samplers in threads: A enters, B enters, A leaves (B still runs with one BLAS
    thread), B leaves (the original limits are back). Separate threadpool_limits contexts
    would have restored A's original limits under B, then left 1 thread set for good."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from pymc_crais.samplers.engine.runner import one_blas_thread

    def threads():
        return [i["num_threads"] for i in threadpool_info()]

    # the test session runs with one BLAS thread (tests/conftest.py): start from two, so
    # that a limit left behind shows
    with threadpool_limits(limits=2):
        before = threads()
        assert any(n > 1 for n in before)
        a, b = one_blas_thread(), one_blas_thread()
        a.__enter__()
        b.__enter__()
        a.__exit__(None, None, None)
        assert all(n == 1 for n in threads())
        b.__exit__(None, None, None)
        assert threads() == before



def test_chains_on_a_thread_pool_equal_local_chains():
    model = _normal_means()
    kw = {"model": model, "draws": 48, "n_steps": 6, "chains": 3, "progressbar": False}
    local = pmc.sample_ais(cores=1, random_seed=11, **kw)
    with cf.ThreadPoolExecutor(2) as ex:
        remote = pmc.sample_ais(executor=ex, random_seed=11, **kw)
    np.testing.assert_array_equal(
        local.sample_stats.log_weights.values, remote.sample_stats.log_weights.values
    )
    np.testing.assert_array_equal(local.posterior.mu.values, remote.posterior.mu.values)
    with pytest.raises(TypeError, match="executor must be a concurrent.futures.Executor"):
        pmc.sample_ais(executor="dask", random_seed=11, **kw)


_FLAGS = ("mode", "linker", "cxx", "traceback__limit", "optdb__max_use_ratio", "numba__fastmath")


def _pytensor_flags() -> dict:
    import pytensor

    return {f: getattr(pytensor.config, f) for f in _FLAGS}


def test_samplers_in_threads_leave_pytensor_flags_as_they_were():
    """Regression (issue 17): models fitted at once in threads. PyTensor sets process-wide
    flags for the duration of every compilation (mode, traceback__limit) and of shape
    inference (cxx, optdb__max_use_ratio); two threads doing it at once restored each other's
    values out of order and left ``mode`` at PyMC's FAST_COMPILE initial-point mode, so
    every later compilation of the process ran PyTensor's Python implementations (a CR-AIS
    test: 8.5 s alone, > 150 s after a threaded Dask cluster). Before the fix this failed on
    every try; the results must also be the bits of the runs one after the other."""
    before = _pytensor_flags()
    models = {"narrow": _normal_means(1.0), "wide": _normal_means(3.0)}
    kw = {"draws": 32, "n_steps": 4, "chains": 1, "progressbar": False}
    with cf.ThreadPoolExecutor(2) as ex:  # sampler calls in threads, then fit_many's tasks
        list(ex.map(lambda m: pmc.sample_ais(model=m, random_seed=2, **kw), models.values()))
        assert _pytensor_flags() == before
        many = pmc.fit_many(models, "ais", executor=ex, random_seed=9, **kw)
    assert _pytensor_flags() == before
    local = pmc.fit_many(models, "ais", random_seed=9, **kw)
    for name in models:
        np.testing.assert_array_equal(many[name].sample_stats.log_weights.values,
                                      local[name].sample_stats.log_weights.values)


def _lock_free_in_child(queue) -> None:
    got = threading.Event()

    def take():
        with pytensor_lock():
            got.set()

    threading.Thread(target=take, daemon=True).start()
    queue.put(got.wait(5.0))


def test_a_forked_process_does_not_inherit_a_held_pytensor_lock():
    """A process forked while another thread compiles (holds the lock) gets a free lock:
    its own first compilation must not wait for a thread that does not exist there."""
    held, release = threading.Event(), threading.Event()

    def hold():
        with pytensor_lock():
            held.set()
            release.wait(30.0)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10.0)
        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        child = ctx.Process(target=_lock_free_in_child, args=(queue,))
        child.start()
        assert queue.get(timeout=20.0) is True
        child.join(10.0)
    finally:
        release.set()
        holder.join()


def test_fit_many_on_a_process_pool_equals_local_runs_and_feeds_compare():
    models = {"narrow": _normal_means(1.0), "wide": _normal_means(3.0)}
    kw = {"draws": 64, "n_steps": 8, "chains": 2}
    local = pmc.fit_many(models, "ais", random_seed=4, **kw)
    with cf.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as ex:
        remote = pmc.fit_many(models, "ais", executor=ex, random_seed=4, **kw)
    assert list(remote) == ["narrow", "wide"]
    for name in models:
        np.testing.assert_array_equal(
            local[name].sample_stats.log_weights.values, remote[name].sample_stats.log_weights.values
        )
    table = pmc.compare(remote)
    assert set(table.index) == {"narrow", "wide"}
    with pytest.raises(ValueError, match="sampler='nuts' is unknown"):
        pmc.fit_many(models, "nuts")
    with pytest.raises(ValueError, match="models is empty"):
        pmc.fit_many({})
    mcd = pmc.fit_many({"narrow": models["narrow"]}, "mcd", random_seed=4, draws=32, n_steps=4,
                       train_steps=2, chains=1)  # a sampler without cores=
    assert mcd["narrow"].posterior.sizes["chain"] == 1


@pytest.mark.parametrize(
    "processes", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["threads", "processes"]
)
def test_fit_many_on_a_local_dask_cluster_equals_local_runs(processes):
    """The issue's done-when: a multi-model comparison on a Dask cluster with results
    identical to local runs; a sampler's chains on the cluster too. The tasks are cloudpickle
    bytes either way; with worker processes (slow: ~20-50 s to start them and compile there)
    they also cross a process boundary. With worker threads the process's PyTensor flags
    must be left as they were (the issue 17 defect: later runs at Python speed)."""
    distributed = pytest.importorskip("distributed")
    before = _pytensor_flags()
    models = {"narrow": _normal_means(1.0), "wide": _normal_means(3.0)}
    kw = {"draws": 64, "n_steps": 8, "chains": 2}
    local = pmc.fit_many(models, "ais", random_seed=9, **kw)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=processes, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        remote = pmc.fit_many(models, "ais", executor=client.get_executor(), random_seed=9, **kw)
        chains = pmc.sample_smc(
            model=models["wide"], draws=64, chains=2, random_seed=3, progressbar=False,
            executor=client.get_executor(),
        )
    alone = pmc.sample_smc(model=models["wide"], draws=64, chains=2, random_seed=3, cores=1,
                           progressbar=False)
    np.testing.assert_array_equal(
        chains.sample_stats.log_weights.values, alone.sample_stats.log_weights.values
    )
    for name in models:
        np.testing.assert_array_equal(
            local[name].sample_stats.log_weights.values, remote[name].sample_stats.log_weights.values
        )
    assert pmc.compare(remote).index[0] == pmc.compare(local).index[0]
    assert _pytensor_flags() == before


# ----------------------------------------------------------------------------- JAX
def _run_jax(code: str) -> str:
    """Run ``code`` in a fresh interpreter (a JAX runtime in the test process would make
    later forking tests unsafe)."""
    pytest.importorskip("jax")
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]
    return out.stdout


def test_jax_runs_every_sampler_with_several_chains_in_one_process():
    """backend="jax": chains in one process, one batched call; per chain the same bits
    as that chain alone on the elementwise model; log Z within 4 MCSE of the exact value."""
    _run_jax(
        f"""
        import warnings
        import numpy as np, pymc as pm
        import pymc_crais as pmc
        warnings.simplefilter("ignore")
        Y = np.array({Y.tolist()})
        with pm.Model() as model:
            mu = pm.Normal("mu", 0, 1, shape=2)
            pm.Normal("y", mu, 1, observed=Y)
        exact = {_exact_log_z(1.0)!r}
        kw = dict(model=model, draws=128, progressbar=False, backend="jax")
        a = pmc.sample_ais(n_steps=10, chains=3, cores=2, random_seed=[1, 2, 3], **kw)
        for i, s in enumerate((1, 2, 3)):
            one = pmc.sample_ais(n_steps=10, chains=1, random_seed=[s], **kw)
            np.testing.assert_array_equal(
                a.sample_stats.log_weights.values[i], one.sample_stats.log_weights.values[0]
            )
        runs = {{
            "ais": a,
            "crais": pmc.sample_crais(n_steps=20, chains=3, random_seed=4, **kw),
            "smc": pmc.sample_smc(chains=3, random_seed=5, **kw),
            "rts": pmc.sample_rts(n_temperatures=8, n_sweeps=40, chains=3, random_seed=6, **kw),
            "mcd": pmc.sample_mcd(n_steps=8, train_steps=10, chains=3, random_seed=7, **kw),
        }}
        for name, r in runs.items():
            assert r.posterior.sizes["chain"] == 3, name
            value, mcse = pmc.log_marginal_likelihood(r)
            assert abs(value - exact) < 4 * mcse + 0.02, (name, value, mcse, exact)
        again = pmc.sample_smc(chains=3, random_seed=5, **kw)
        np.testing.assert_array_equal(
            again.sample_stats.log_weights.values, runs["smc"].sample_stats.log_weights.values
        )
        print("ok")
        """
    )


@pytest.mark.slow
def test_jax_batched_chains_agree_with_numba_chains_on_a_regression():
    """Where BLAS products round differently in a bigger batch (a regression), a batched
    run is not the same bits as the chains alone: it is the same estimator, so its log Z
    agrees with the Numba backend's chains within their Monte Carlo errors."""
    _run_jax(
        """
        import warnings
        import numpy as np
        import pymc_crais as pmc
        warnings.simplefilter("ignore")
        rng = np.random.default_rng(0)
        X, y = rng.normal(size=(200, 3)), rng.integers(0, 2, size=200)
        model = pmc.models.logistic_regression(X, y, prior_sd=2.0)
        kw = dict(model=model, draws=256, n_steps=40, chains=4, progressbar=False)
        jx = pmc.sample_crais(backend="jax", random_seed=1, **kw)
        nb = pmc.sample_crais(cores=1, random_seed=1, **kw)
        (a, sa), (b, sb) = pmc.log_marginal_likelihood(jx), pmc.log_marginal_likelihood(nb)
        assert abs(a - b) < 4 * np.hypot(sa, sb), (a, sa, b, sb)
        print("ok")
        """
    )
