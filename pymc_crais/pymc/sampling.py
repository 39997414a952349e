"""The PyMC-facing entry points: ``sample_ais`` and ``sample_crais``.

Both share one set-up (compile the model once, choose ``q0``, kernel and seeds), one chain
runner (sequential or worker processes, identical results either way) and one output
builder.
"""

from __future__ import annotations

import concurrent.futures as cf
import itertools
import multiprocessing
import numbers
import os
import time
import traceback
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..core.adaptive import CESSSchedule, ConstantRateSchedule, ESSSchedule
from ..core.anneal import ParamsByTau, anneal
from ..core.kernels import MutationKernel, make_kernel
from ..core.paths import make_path
from ..core.resampling import systematic
from ..core.schedules import (
    FIXED_SCHEDULES,
    FixedSchedule,
    Schedule,
    exponential_schedule,
    interpolate_schedule,
    make_fixed_schedule,
)
from ..core.weights import normalized_weights
from .compile import compile_model_density, parameter_layout, resolve_compile_kwargs, uses_jax
from .init import prior_sampler
from .initial import build_initial
from .mapping import posterior_mapper
from .model_info import check_model_for_evidence, model_data_for_results
from .progress import ChainProgress, stage_callback, worker_initializer

__all__ = ["ChainFailedError", "SamplerResult", "sample_ais", "sample_crais"]

ADAPTIVE_SCHEDULES = ("ess", "cess")


class ChainFailedError(RuntimeError):
    """A chain raised; the message names the chain and carries the original traceback."""


@dataclass
class SamplerResult:
    """Raw output when ``return_inferencedata=False``.

    Attributes
    ----------
    posterior : dict of numpy.ndarray
        ``name -> (chain, draw, *shape)`` equal-weight posterior draws.
    chain_stats : list of dict
        Per-chain statistics (see :func:`pymc_crais.results.build_datatree`).
    attrs : dict
        Run settings.
    extra_vars : dict
        Run-level arrays (e.g. the CR-AIS tuning schedule).
    """

    posterior: dict
    chain_stats: list
    attrs: dict
    extra_vars: dict = field(default_factory=dict)


# ----------------------------------------------------------------------------- arguments
def _check_int(value, name: str, minimum: int, fix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}; {fix}")
    return int(value)


def chain_generators(
    random_seed, chains: int
) -> tuple[list[np.random.Generator], np.random.Generator]:
    """One independent generator per chain, plus one for run-level work (pilot, tuning).

    Parameters
    ----------
    random_seed : None, int, sequence of int, numpy.random.SeedSequence or Generator
        A sequence must have one entry per chain (each seeds its chain).
    chains : int

    Returns
    -------
    (list of Generator, Generator)
    """
    from .term_checks import check_seed

    check_seed(random_seed)
    if isinstance(random_seed, np.random.Generator):
        kids = random_seed.spawn(chains + 1)
        return kids[:chains], kids[chains]
    if random_seed is None or isinstance(random_seed, numbers.Integral | np.random.SeedSequence):
        root = (
            random_seed
            if isinstance(random_seed, np.random.SeedSequence)
            else np.random.SeedSequence(random_seed)
        )
        kids = [np.random.default_rng(s) for s in root.spawn(chains + 1)]
        return kids[:chains], kids[chains]
    try:
        seeds = [int(s) for s in random_seed]
    except (TypeError, ValueError):
        raise TypeError(
            f"random_seed must be None, an int, a sequence of ints (one per chain), a "
            f"SeedSequence or a Generator; got {random_seed!r}"
        ) from None
    if len(seeds) != chains:
        raise ValueError(
            f"random_seed has {len(seeds)} entries but chains={chains}; give one seed per "
            "chain or a single int"
        )
    return [np.random.default_rng(s) for s in seeds], np.random.default_rng([*seeds, 2**31])


def schedule_from_result(result) -> np.ndarray:
    """The annealing schedule ``0 = τ_0 < … < τ_M = 1`` a previous run used.

    Parameters
    ----------
    result : xarray.DataTree or SamplerResult
        Output of :func:`sample_ais` / :func:`sample_crais` (chain 0's schedule).
    """
    if isinstance(result, SamplerResult):
        tau = np.asarray(result.chain_stats[0]["tau"], dtype=np.float64)
    else:
        try:
            st = result["sample_stats"]
            n = int(st["n_stages"].values[0])
            tau = np.asarray(st["tau"].values[0, :n], dtype=np.float64)
        except KeyError:
            raise ValueError(
                "the result has no sample_stats.tau; pass a pymc_crais result"
            ) from None
    return np.concatenate([[0.0], tau])


# ----------------------------------------------------------------------------- set-up
@dataclass
class _Setup:
    model: object
    layout: object
    density: object
    draw: object
    kernel: MutationKernel
    kernel_spec: tuple
    chain_rngs: list
    aux_rng: np.random.Generator
    chains: int
    cores: int
    draws: int
    compile_kwargs: dict
    attrs: dict
    n_evals_setup: int = 0


def _setup(
    *,
    model,
    draws,
    chains,
    cores,
    kernel,
    kernel_kwargs,
    init,
    init_kwargs,
    random_seed,
    backend,
    compile_kwargs,
    idata_kwargs,
    n_mcmc_steps,
) -> _Setup:
    import pymc as pm

    model = pm.modelcontext(model)
    draws = _check_int(draws, "draws", 2, "use at least 2 particles (hundreds are typical)")
    if cores is None:
        cores = os.cpu_count() or 1
    cores = _check_int(cores, "cores", 1, "use cores=1 for sequential chains")
    if chains is None:
        chains = max(2, cores)
    chains = _check_int(chains, "chains", 1, "use chains=1 for a single run")
    cores = min(cores, chains)
    _check_int(n_mcmc_steps, "n_mcmc_steps", 0, "e.g. n_mcmc_steps=1")
    mutation = make_kernel(kernel, **dict(kernel_kwargs or {}))
    if idata_kwargs is not None:
        unknown = set(idata_kwargs) - {"coords", "dims", "log_likelihood"}
        if unknown:
            raise TypeError(
                f"idata_kwargs keys {sorted(unknown)} are not supported; use 'coords', 'dims' "
                "or 'log_likelihood'"
            )
    layout = parameter_layout(model)
    if layout.dim == 0:
        raise ValueError(
            "the model has no free random variables, so there is nothing to anneal; its "
            "evidence is its likelihood at the fixed values"
        )
    if mutation.needs_gradient and layout.has_discrete:
        raise ValueError(
            f"kernel={mutation.name!r} needs gradients but the model has discrete free "
            f"variables {layout.discrete_names}; use kernel='rwmh' or kernel='imh'"
        )
    check_model_for_evidence(model, init)
    chain_rngs, aux_rng = chain_generators(random_seed, chains)  # seed errors before compiling
    ckw = resolve_compile_kwargs(backend, compile_kwargs)
    if cores > 1 and uses_jax(ckw):
        raise ValueError(
            f"cores={cores} with the JAX backend: JAX-compiled functions cannot run in worker "
            "processes (a forked JAX runtime deadlocks and the compiled function does not "
            "unpickle); use cores=1, or backend='numba' (the default) for parallel chains"
        )
    needs_grad = mutation.needs_gradient or (isinstance(init, str) and init == "laplace")
    model_density = compile_model_density(model, gradient=needs_grad, compile_kwargs=ckw)
    prior = prior_sampler(model, layout, ckw) if isinstance(init, str) and init == "prior" else None
    initial = build_initial(init, init_kwargs, model, model_density, prior)
    attrs = {
        "draws": draws,
        "n_mcmc_steps": int(n_mcmc_steps),
        "vectorized": model_density.vectorized,
        **initial.attrs,
        **{f"kernel_{k}" if k != "kernel" else k: v for k, v in mutation.describe().items()},
    }
    return _Setup(
        model=model,
        layout=layout,
        density=initial.density,
        draw=initial.draw,
        kernel=mutation,
        kernel_spec=(kernel, dict(kernel_kwargs or {})),
        chain_rngs=chain_rngs,
        aux_rng=aux_rng,
        chains=chains,
        cores=cores,
        draws=draws,
        compile_kwargs=ckw,
        attrs=attrs,
        n_evals_setup=initial.n_evals,
    )


def _fresh_kernel(setup: _Setup) -> MutationKernel:
    kernel, kw = setup.kernel_spec
    return make_kernel(kernel, **kw) if isinstance(kernel, str) else setup.kernel


# ----------------------------------------------------------------------------- one chain
@dataclass
class _ChainTask:
    chain: int
    rng: np.random.Generator
    density: object
    draw: object
    draws: int
    path: object
    schedule: Schedule
    kernel: MutationKernel
    n_mcmc_steps: int
    max_steps: int
    kernel_params: object = None


def _run_chain(task: _ChainTask) -> dict:
    """Anneal one chain; returns plain NumPy output (picklable, small)."""
    rng = task.rng
    x0 = task.draw(rng, task.draws)
    result = anneal(
        rng,
        task.density,
        x0,
        task.path,
        task.schedule,
        task.kernel,
        n_mcmc_steps=task.n_mcmc_steps,
        resample="never",
        max_steps=task.max_steps,
        kernel_params=task.kernel_params,
        callback=stage_callback(task.chain),
    )
    return _chain_output(task, rng, result)


def _chain_output(task, rng: np.random.Generator, result) -> dict:
    """Per-chain output: equal-weight posterior draws (systematic resampling of the final
    weighted particles, shuffled) and the run's statistics, as plain NumPy."""
    idx = systematic(rng, normalized_weights(result.log_weights), task.draws)
    idx = rng.permutation(idx)  # systematic resampling returns sorted ancestors
    return {
        "chain": task.chain,
        "x": result.state.x[idx],
        "log_marginal_likelihood": result.log_marginal_likelihood,
        "log_z_variance": result.log_z_variance,
        "log_z_variance_segments": result.log_z_variance_segments,
        "n_resamplings": result.n_resamplings,
        "n_eves": result.n_eves,
        "n_logp_evals": result.n_logp_evals,
        "log_weights": result.log_weights,
        "hit_max_steps": result.hit_max_steps,
        "initial_weight_tail": result.initial_weight_tail,  # for pymc_crais.diagnostics
        **result.stages,
    }


# Chain tasks handed to forked workers by inheritance: registered before the pool forks,
# so a worker finds its (runner, task) here with the compiled, already JIT-compiled model
# functions of the parent, instead of unpickling them and compiling them again (≈ 2 s per
# worker with the Numba linker).
_FORK_TASKS: dict[int, tuple] = {}
_FORK_KEYS = itertools.count()


def _run_chain_in_worker(payload: bytes | int) -> dict:
    """Worker entry: ``(runner, task)`` either inherited from a forking parent (``payload``
    is its key in ``_FORK_TASKS``) or as cloudpickle bytes (spawn/forkserver; compiled
    graphs with ``OpFromGraph`` gradients do not pickle with the standard pickler)."""
    if isinstance(payload, int):
        runner, task = _FORK_TASKS[payload]
    else:
        import cloudpickle

        runner, task = cloudpickle.loads(payload)
    try:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1):
            return runner(task)
    except BaseException as err:  # carry the worker's traceback to the caller as text
        raise ChainFailedError(
            f"chain {task.chain} failed with {type(err).__name__}: {err}\n"
            f"--- traceback in the worker process ---\n{traceback.format_exc()}"
        ) from None


def _terminate_workers(executor: cf.ProcessPoolExecutor, timeout: float = 10.0) -> None:
    """Stop a process pool at once (a chain failed, or KeyboardInterrupt): cancel the chains
    not yet started, terminate every worker, and reap them so that none is left behind.

    Workers still alive ``timeout`` seconds after ``SIGTERM`` are killed.
    """
    procs = list((getattr(executor, "_processes", None) or {}).values())
    executor.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    deadline = time.monotonic() + timeout
    for proc in procs:
        proc.join(max(deadline - time.monotonic(), 0.0))
        if proc.is_alive():
            proc.kill()
            proc.join(1.0)
    # the pool's manager thread may be reaping the same processes: a join that lost that
    # race returns before the exit code is recorded, so wait until every one has it
    while any(p.exitcode is None for p in procs) and time.monotonic() < deadline + 2.0:
        time.sleep(0.01)


def _run_chains(
    tasks: list[_ChainTask], cores: int, mp_ctx, progress: ChainProgress, runner=None
) -> list[dict]:
    """Run the chain tasks (in this process when ``cores == 1``, else in a process pool),
    reporting to ``progress`` (entered here)."""
    runner = _run_chain if runner is None else runner
    with progress:
        if cores <= 1 or len(tasks) == 1:
            out = []
            for task in tasks:
                try:
                    out.append(runner(task))
                except Exception as err:
                    if len(tasks) == 1:
                        raise
                    raise ChainFailedError(
                        f"chain {task.chain} failed: {type(err).__name__}: {err}"
                    ) from err
                progress.chain_done(out[-1])
            return out
        import cloudpickle

        ctx = (
            multiprocessing.get_context(mp_ctx) if isinstance(mp_ctx, str | type(None)) else mp_ctx
        )
        results: dict[int, dict] = {}
        executor = cf.ProcessPoolExecutor(
            max_workers=min(cores, len(tasks)),
            mp_context=ctx,
            initializer=worker_initializer,
            initargs=(progress.make_queue(ctx),),
        )
        forked = ctx.get_start_method() == "fork"
        if forked:  # a fork-context pool forks all its workers at the first submit
            keys = [next(_FORK_KEYS) for _ in tasks]
            _FORK_TASKS.update({k: (runner, t) for k, t in zip(keys, tasks, strict=True)})
            payloads = keys
        else:
            payloads = [cloudpickle.dumps((runner, t)) for t in tasks]
        try:
            futures = {
                executor.submit(_run_chain_in_worker, payload): t.chain
                for payload, t in zip(payloads, tasks, strict=True)
            }
            for fut in cf.as_completed(futures):
                res = fut.result()
                results[res["chain"]] = res
                progress.chain_done(res)
        except BaseException:  # a chain failed, or KeyboardInterrupt: no worker survives
            _terminate_workers(executor)
            raise
        finally:
            if forked:
                for k in keys:
                    _FORK_TASKS.pop(k, None)
        executor.shutdown(wait=True)
        return [results[t.chain] for t in tasks]


def _sample_chains(
    setup: _Setup,
    path,
    schedule,
    n_mcmc_steps,
    max_steps,
    progressbar,
    mp_ctx,
    kernel_params=None,
    label: str = "AIS",
) -> tuple[list, float]:
    tasks = [
        _ChainTask(
            i,
            setup.chain_rngs[i],
            setup.density,
            setup.draw,
            setup.draws,
            path,
            schedule,
            setup.kernel,
            int(n_mcmc_steps),
            int(max_steps),
            kernel_params,
        )
        for i in range(setup.chains)
    ]
    t0 = time.perf_counter()
    outs = _run_chains(tasks, setup.cores, mp_ctx, ChainProgress(progressbar, setup.chains, label))
    return outs, time.perf_counter() - t0


def _finish(setup: _Setup, outs, attrs, extra_vars, return_inferencedata, idata_kwargs):
    import pymc as pm

    from ..diagnostics import check_run

    check_run(outs, attrs)  # diagnostics into outs/attrs; warns if log Z is unreliable
    mapper = posterior_mapper(setup.model, setup.layout, setup.compile_kwargs)
    per_chain = [mapper(o.pop("x")) for o in outs]
    posterior = {k: np.stack([pc[k] for pc in per_chain]) for k in mapper.names}
    for o in outs:
        o.pop("chain")
    if not return_inferencedata:
        return SamplerResult(posterior, outs, attrs, extra_vars)
    from ..results import build_datatree

    info = model_data_for_results(setup.model)
    ik = dict(idata_kwargs or {})
    idata = build_datatree(
        posterior=posterior,
        chain_stats=outs,
        attrs=attrs,
        coords={**info["coords"], **dict(ik.get("coords") or {})},
        dims={**info["dims"], **dict(ik.get("dims") or {})},
        observed_data=info["observed_data"],
        constant_data=info["constant_data"],
        extra_vars=extra_vars,
    )
    if ik.get("log_likelihood"):
        idata = pm.compute_log_likelihood(
            idata, model=setup.model, extend_inferencedata=True, progressbar=False
        )
    return idata


def _pilot(setup: _Setup, schedule, n_draws: int):
    """A geometric AIS run with few particles on ``schedule`` (returns the AnnealResult)."""
    before = setup.density.n_evals
    res = anneal(
        setup.aux_rng,
        setup.density,
        setup.draw(setup.aux_rng, n_draws),
        make_path(0.0),
        schedule,
        _fresh_kernel(setup),
    )
    return res, setup.density.n_evals - before


def _scale_shift(setup, alpha, scale_shift, pilot_schedule, attrs) -> float:
    """Fix the power-mean scale shift ``c`` (ALGORITHMS.md §2) and record how."""
    n_pilot = 0
    if scale_shift is None:
        scale_shift = 0.0 if float(alpha) == 0.0 else "pilot"
    if isinstance(scale_shift, str):
        if scale_shift != "pilot":
            raise ValueError(f"scale_shift must be a float, 'pilot' or None, got {scale_shift!r}")
        res, n_pilot = _pilot(setup, pilot_schedule, min(setup.draws, 256))
        c = res.log_marginal_likelihood
    else:
        c = float(scale_shift)
        if not np.isfinite(c):
            raise ValueError(f"scale_shift must be finite, got {scale_shift!r}")
    attrs.update(
        {"c": c, "scale_shift": "pilot" if n_pilot else "fixed", "n_logp_evals_pilot": n_pilot}
    )
    return c


# ----------------------------------------------------------------------------- sample_ais
def _resolve_schedule(schedule, n_steps, schedule_kwargs, rho, max_step, min_step):
    kw = dict(schedule_kwargs or {})
    if isinstance(schedule, Schedule):
        return schedule
    if isinstance(schedule, str):
        key = schedule.lower()
        if key in ADAPTIVE_SCHEDULES:
            if kw:
                raise TypeError(
                    "schedule_kwargs only apply to linear/sigmoid/exponential schedules"
                )
            cls = ESSSchedule if key == "ess" else CESSSchedule
            return cls(0.9 if rho is None else rho, max_step=max_step, min_step=min_step)
        if key in FIXED_SCHEDULES:
            return make_fixed_schedule(
                key, _check_int(n_steps, "n_steps", 1, "e.g. n_steps=200"), **kw
            )
        raise ValueError(
            f"schedule={schedule!r} is unknown; choose one of {sorted(FIXED_SCHEDULES)}, 'ess', "
            "'cess', 'constant_rate', or pass an increasing array of tau from 0 to 1 or a "
            "previous result"
        )
    if hasattr(schedule, "children") or isinstance(schedule, SamplerResult):
        return make_fixed_schedule(schedule_from_result(schedule))
    if hasattr(schedule, "__array__") or isinstance(schedule, list | tuple):
        taus = np.asarray(schedule, dtype=np.float64)
        return make_fixed_schedule(taus, **kw)
    raise ValueError(
        f"schedule={schedule!r} is not understood; pass 'linear', 'sigmoid', 'exponential', "
        "'ess', 'cess', 'constant_rate', an increasing array of tau from 0 to 1, or a previous result"
    )


def single_threaded_blas(fn):
    """Run a sampler with BLAS/OpenMP limited to one thread in this process, as in the
    worker processes. The batched calls are many small matrix products, for which extra
    BLAS threads only add synchronisation: on 2 cores a Sonar CR-AIS run took 4x longer
    with the default thread pool (docs/benchmarks.md). It also makes ``cores=1`` and
    ``cores=2`` run the same arithmetic."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from threadpoolctl import threadpool_limits

        from .term_checks import explain_model_errors

        with threadpool_limits(limits=1), explain_model_errors(kwargs.get("model")):
            return fn(*args, **kwargs)

    return wrapper


@single_threaded_blas
def sample_ais(
    draws: int = 1000,
    schedule="linear",
    n_steps: int = 200,
    alpha: float = 0.0,
    kernel="hmc",
    chains: int | None = None,
    cores: int | None = None,
    random_seed=None,
    progressbar: bool = True,
    return_inferencedata: bool = True,
    idata_kwargs: dict | None = None,
    compile_kwargs: dict | None = None,
    *,
    model=None,
    init="prior",
    init_kwargs: dict | None = None,
    n_mcmc_steps: int = 1,
    kernel_kwargs: dict | None = None,
    schedule_kwargs: dict | None = None,
    rho: float | None = None,
    max_step: float | None = None,
    min_step: float | None = None,
    max_steps: int = 100_000,
    scale_shift: float | str | None = None,
    backend: str | None = None,
    mp_ctx=None,
    **crais_kwargs,
):
    """Estimate the evidence ``log Z`` of a PyMC model by annealed importance sampling.

    Particles are drawn from ``q0`` (the prior by default), annealed along the path ``γ_τ``
    (geometric for ``alpha=0``, power mean otherwise) over the ``schedule``, moved by a
    batched MCMC ``kernel`` at every step, and weighted (never resampled), so that
    ``mean(w)`` estimates ``Z``.

    Parameters
    ----------
    draws : int, default 1000
        Particles per chain (``>= 2``); also the number of posterior draws per chain.
    schedule : str, array_like or previous result, default "linear"
        ``"linear"``, ``"sigmoid"``, ``"exponential"`` (fixed, ``n_steps`` steps);
        ``"ess"`` or ``"cess"`` (adaptive AIS: each step keeps ``ESS(W·incr) = ρ ESS(W)`` or
        the conditional ESS at ``ρN``, per chain, by bisection); ``"constant_rate"`` (runs
        :func:`sample_crais` with the remaining arguments); an increasing array of τ from
        exactly 0 to 1; or a previous result, whose schedule is re-used.
    n_steps : int, default 200
        Steps of a fixed named schedule.
    alpha : float, default 0.0
        Power-mean exponent of the path: 0 geometric, 1 arithmetic; any finite value.
    kernel : {"hmc", "rwmh"} or MutationKernel, default "hmc"
        Mutation kernel. ``"hmc"`` needs gradients and continuous variables; ``"rwmh"``
        (random-walk Metropolis with particle-covariance proposals) works for all.
    chains : int, optional
        Independent runs (default: ``max(2, cores)``, as PyMC).
    cores : int, optional
        Worker processes (default: the number of CPUs). Results do not depend on it.
    random_seed : int, sequence of int, SeedSequence or Generator, optional
        Seeds everything; the global NumPy RNG is never used.
    progressbar : bool, default True
        Print one line per finished chain to stderr.
    return_inferencedata : bool, default True
        Return an ``xarray.DataTree`` (as ``pm.sample_smc``); else a :class:`SamplerResult`.
    idata_kwargs : dict, optional
        ``coords``/``dims`` overrides and ``log_likelihood=True`` (adds the pointwise
        log-likelihood group via ``pm.compute_log_likelihood``).
    compile_kwargs : dict, optional
        Passed to ``pytensor.function``.
    model : pymc.Model, optional
        Defaults to the model on the context stack.
    init : "prior", "laplace", dict or GaussianInitial, default "prior"
        Initial distribution ``q0`` (see :func:`pymc_crais.pymc.initial.build_initial`):
        the prior; a Student-t (or Gaussian) at the Laplace fit; or a user-given normalized
        Gaussian ``{"mean": ..., "cov": ...}`` in the model's unconstrained coordinates.
    init_kwargs : dict, optional
        ``df``, ``scale``, ``family`` for ``init="laplace"``.
    n_mcmc_steps : int, default 1
        Kernel transitions per annealing step.
    kernel_kwargs : dict, optional
        Options of a named kernel (``n_leapfrog``, ``step_size``, ``target_accept``...).
    schedule_kwargs : dict, optional
        Options of a named fixed schedule (``scale`` for sigmoid, ``tau_min`` for exponential).
    rho : float, optional
        Target ratio of the ``"ess"``/``"cess"`` rules, in (0, 1) (default 0.9).
    max_step, min_step : float, optional
        Bounds on ``τ' − τ`` for adaptive schedules.
    max_steps : int, default 100000
        Cap on the number of stages of an adaptive schedule; reaching it jumps to τ = 1,
        warns and sets ``hit_max_steps``.
    scale_shift : float, "pilot" or None, default None
        The fixed ``c`` of a power-mean path (``log Z = c + log Z_c``). ``None`` means 0 for
        ``alpha=0`` and ``"pilot"`` otherwise: ``c`` is the ``log Ẑ`` of a geometric pilot
        run with ``min(draws, 256)`` particles, reported as ``n_logp_evals_pilot``.
    backend : str, optional
        PyTensor backend (``"c"``, ``"numba"``, ``"jax"``), as in ``pm.sample_smc``. The
        default is PyTensor's (Numba). JAX needs ``cores=1`` and static shapes (some
        models fail to compile); see ``docs/benchmarks.md`` for the comparison.
    mp_ctx : str or multiprocessing context, optional
        Start method of the worker processes (default: the platform's; with ``"fork"``
        the workers inherit the compiled model instead of unpickling and re-compiling it).
    **crais_kwargs
        Only with ``schedule="constant_rate"``: arguments of :func:`sample_crais`.

    Returns
    -------
    xarray.DataTree or SamplerResult
        ``sample_stats.log_marginal_likelihood`` holds one ``log Ẑ`` per chain; combine
        them with :func:`pymc_crais.log_marginal_likelihood`.

    Examples
    --------
    >>> import pymc as pm, pymc_crais as pmc
    >>> with pm.Model():
    ...     mu = pm.Normal("mu", 0, 1)
    ...     pm.Normal("y", mu, 1, observed=[0.3, -0.2])
    ...     idata = pmc.sample_ais(draws=500, n_steps=50, random_seed=1, progressbar=False)
    >>> value, mcse = pmc.log_marginal_likelihood(idata)
    """
    if isinstance(schedule, str) and schedule.lower() == "constant_rate":
        return sample_crais(
            draws=draws,
            alpha=alpha,
            kernel=kernel,
            chains=chains,
            cores=cores,
            random_seed=random_seed,
            progressbar=progressbar,
            return_inferencedata=return_inferencedata,
            idata_kwargs=idata_kwargs,
            compile_kwargs=compile_kwargs,
            model=model,
            init=init,
            init_kwargs=init_kwargs,
            n_mcmc_steps=n_mcmc_steps,
            kernel_kwargs=kernel_kwargs,
            max_step=max_step,
            min_step=min_step,
            max_steps=max_steps,
            scale_shift=scale_shift,
            backend=backend,
            mp_ctx=mp_ctx,
            n_steps=n_steps,
            **crais_kwargs,
        )
    if crais_kwargs:
        raise TypeError(f"sample_ais got unexpected arguments {sorted(crais_kwargs)}")
    t_start = time.perf_counter()
    make_path(alpha, 0.0)  # validates alpha before any compilation
    sched = _resolve_schedule(schedule, n_steps, schedule_kwargs, rho, max_step, min_step)
    max_steps = _check_int(max_steps, "max_steps", 1, "e.g. max_steps=10000")
    setup = _setup(
        model=model,
        draws=draws,
        chains=chains,
        cores=cores,
        kernel=kernel,
        kernel_kwargs=kernel_kwargs,
        init=init,
        init_kwargs=init_kwargs,
        random_seed=random_seed,
        backend=backend,
        compile_kwargs=compile_kwargs,
        idata_kwargs=idata_kwargs,
        n_mcmc_steps=n_mcmc_steps,
    )
    attrs = {
        "method": "ais",
        "path": make_path(alpha, 0.0).name,
        "alpha": float(alpha),
        **setup.attrs,
        **sched.describe(),
    }
    pilot_sched = sched
    if isinstance(schedule, str) and schedule.lower() in FIXED_SCHEDULES:
        pilot_sched = make_fixed_schedule(
            schedule, max(int(n_steps) // 4, 10), **dict(schedule_kwargs or {})
        )
    c = _scale_shift(setup, alpha, scale_shift, pilot_sched, attrs)
    outs, t_sampling = _sample_chains(
        setup, make_path(alpha, c), sched, n_mcmc_steps, max_steps, progressbar, mp_ctx
    )
    attrs["sampling_time"] = t_sampling
    attrs["wall_time"] = time.perf_counter() - t_start
    return _finish(setup, outs, attrs, {}, return_inferencedata, idata_kwargs)


# ----------------------------------------------------------------------------- sample_crais
@single_threaded_blas
def sample_crais(
    draws: int = 1000,
    alpha: float = 0.0,
    delta="auto",
    n_steps: int | None = 200,
    kernel="hmc",
    chains: int | None = None,
    cores: int | None = None,
    random_seed=None,
    progressbar: bool = True,
    return_inferencedata: bool = True,
    idata_kwargs: dict | None = None,
    compile_kwargs: dict | None = None,
    *,
    model=None,
    init="prior",
    init_kwargs: dict | None = None,
    n_tune_steps: int | None = None,
    tune_draws: int | None = None,
    variance: str = "unweighted",
    min_step: float | None = 0.0,
    max_step: float | None = 0.125,
    v_min: float = 1e-3,
    max_steps: int = 10_000,
    n_mcmc_steps: int = 1,
    kernel_kwargs: dict | None = None,
    replay_kernel: bool = True,
    scale_shift: float | str | None = None,
    backend: str | None = None,
    mp_ctx=None,
):
    """Constant-Rate AIS (Goshtasbpour et al., ICML 2023): tune a schedule, then re-run.

    1. **Pilot** (only when needed): a cheap geometric AIS run with ``min(draws, 256)``
       particles on a 32-step exponential schedule. It fixes the scale shift ``c`` of a
       power-mean path (its ``log Ẑ``) and, for ``delta="auto"``, measures the integral
       ``T`` of the constant-rate objective along the path, so that ``δ = T / n_tune_steps``
       gives a tuning run of about ``n_tune_steps`` steps.
    2. **Tuning run**: ``tune_draws`` particles annealed with the constant-rate rule: each
       step lowers the α-divergence to the target by about δ. Its schedule is kept.
    3. **Final run**: per chain, *fresh* particles annealed on that fixed schedule —
       interpolated to ``n_steps`` steps when ``n_steps`` is given (the schedule's shape is
       stable across δ) — giving the reported, unbiased-for-``Z`` estimate.

    Parameters
    ----------
    draws : int, default 1000
        Particles per chain in the final run.
    alpha : float, default 0.0
        Power-mean exponent (0 geometric / inverse KL, 1 arithmetic; negative allowed).
    delta : float or "auto", default "auto"
        Rate δ > 0 of the tuning run (steps ∝ 1/δ; problem-scale dependent). ``"auto"``
        derives it from the pilot so the tuning run has about ``n_tune_steps`` steps.
    n_steps : int or None, default 200
        Steps of the final run (the tuned schedule interpolated); ``None`` re-uses the
        tuned schedule as it is.
    n_tune_steps : int, optional
        Target length of the tuning run for ``delta="auto"`` (default
        ``max(32, n_steps // 4)``, or 64 when ``n_steps`` is None).
    tune_draws : int, optional
        Particles of the tuning run (default ``draws``).
    variance : {"unweighted", "weighted"}, default "unweighted"
        How the rate's variance is estimated (see ConstantRateSchedule).
    min_step, max_step : float, default 0 and 1/8
        Bounds on each tuning step ``Δτ``. ``min_step`` guards against stalls (useful for
        α < 0 on targets much narrower than ``q0``).
    v_min : float, default 1e-3
        The tuning run jumps to τ = 1 once the objective's variance falls below it.
    max_steps : int, default 10000
        Cap on the tuning run (then it jumps to τ = 1, warns and records it).
    replay_kernel : bool, default True
        The final run re-uses the tuning run's kernel parameters (step size, mass matrix or
        proposal covariance, looked up by τ) instead of tuning them on its own particles.
        Kernels fixed before the final particles exist keep the estimate unbiased for ``Z``;
        population tuning biases ``log Ẑ`` upwards (+0.16 ± 0.05 nats on a d = 5 regression
        with 500 particles; docs/algorithms.md).

    Other Parameters
    ----------------
    kernel, chains, cores, random_seed, progressbar, return_inferencedata, idata_kwargs, compile_kwargs, model, init, init_kwargs, n_mcmc_steps, kernel_kwargs, scale_shift, backend, mp_ctx
        As in :func:`sample_ais`.

    Returns
    -------
    xarray.DataTree or SamplerResult
        The final run's output (``log_marginal_likelihood`` per chain, per-stage stats on
        the final schedule) plus ``tune_tau`` (the tuned schedule, dim ``tune_stage``) and
        attributes ``delta``, ``n_tune_steps``, ``n_logp_evals_tune``,
        ``n_logp_evals_pilot``. ``n_logp_evals`` counts the final run only.
    """
    t_start = time.perf_counter()
    make_path(alpha, 0.0)
    if not (isinstance(delta, str) and delta == "auto"):
        if (
            isinstance(delta, bool)
            or not isinstance(delta, numbers.Real)
            or not (np.isfinite(delta) and delta > 0)
        ):
            raise ValueError(f"delta must be a positive number or 'auto', got {delta!r}")
    if n_steps is not None:
        n_steps = _check_int(n_steps, "n_steps", 1, "or n_steps=None to keep the tuned schedule")
    if n_tune_steps is None:
        n_tune_steps = max(32, n_steps // 4) if n_steps is not None else 64
    n_tune_steps = _check_int(n_tune_steps, "n_tune_steps", 2, "e.g. n_tune_steps=64")
    max_steps = _check_int(max_steps, "max_steps", 1, "e.g. max_steps=10000")
    ConstantRateSchedule(
        1.0, variance=variance, min_step=min_step, max_step=max_step, v_min=v_min
    )  # validate
    setup = _setup(
        model=model,
        draws=draws,
        chains=chains,
        cores=cores,
        kernel=kernel,
        kernel_kwargs=kernel_kwargs,
        init=init,
        init_kwargs=init_kwargs,
        random_seed=random_seed,
        backend=backend,
        compile_kwargs=compile_kwargs,
        idata_kwargs=idata_kwargs,
        n_mcmc_steps=n_mcmc_steps,
    )
    tune_draws = (
        setup.draws
        if tune_draws is None
        else _check_int(tune_draws, "tune_draws", 2, "e.g. tune_draws=512")
    )
    attrs = {
        "method": "crais",
        "path": make_path(alpha, 0.0).name,
        "alpha": float(alpha),
        **setup.attrs,
    }

    # 1. pilot: c for α ≠ 0 and the rate integral for delta="auto"
    c, total = _rate_pilot(setup, alpha, scale_shift, need_integral=delta == "auto", attrs=attrs)
    path = make_path(alpha, c)
    delta_value = max(total / n_tune_steps, 1e-12) if delta == "auto" else float(delta)

    # 2. tuning run; with delta="auto" its length is checked against the target and δ
    #    rescaled (the number of steps is about proportional to 1/δ) at most 3 times
    before = setup.density.n_evals
    attempts = []
    for attempt in range(4 if delta == "auto" else 1):
        cap = max_steps if delta != "auto" else min(max_steps, 4 * n_tune_steps)
        tune_sched = ConstantRateSchedule(
            delta_value, variance=variance, min_step=min_step, max_step=max_step, v_min=v_min
        )
        with warnings.catch_warnings():
            if delta == "auto" and attempt < 3:
                warnings.filterwarnings("ignore", message="max_steps=", category=RuntimeWarning)
            with ChainProgress(progressbar, 1, "CR-AIS tuning", final_line=False) as bar:
                tres = anneal(
                    setup.aux_rng,
                    setup.density,
                    setup.draw(setup.aux_rng, tune_draws),
                    path,
                    tune_sched,
                    _fresh_kernel(setup),
                    n_mcmc_steps=n_mcmc_steps,
                    max_steps=cap,
                    callback=stage_callback(0),
                )
                bar.chain_done(
                    {
                        "chain": 0,
                        "log_marginal_likelihood": tres.log_marginal_likelihood,
                        "n_logp_evals": tres.n_logp_evals,
                        **tres.stages,
                    }
                )
        attempts.append((delta_value, tres.n_stages))
        if delta != "auto":
            break
        m = tres.n_stages
        clipped = np.mean(
            np.diff(np.concatenate([[0.0], tres.stages["tau"]])) >= (max_step or 1.0) * (1 - 1e-9)
        )
        if (n_tune_steps / 2 <= m <= 2 * n_tune_steps and not tres.hit_max_steps) or (
            m < n_tune_steps and clipped > 0.5
        ):
            break  # on target, or too short only because max_step clips most steps
        delta_value *= 4.0 if tres.hit_max_steps else m / n_tune_steps
    n_tune = setup.density.n_evals - before
    tuned = np.concatenate([[0.0], tres.stages["tau"]])
    final = tuned if n_steps is None else interpolate_schedule(tuned, n_steps)
    attrs.update(
        {
            "schedule": "constant_rate",
            "delta": delta_value,
            "delta_mode": "auto" if delta == "auto" else "given",
            "variance": variance,
            "min_step": float(min_step or 0.0),
            "max_step": float(max_step if max_step is not None else 1.0),
            "v_min": float(v_min),
            "n_tune_steps": int(tuned.size - 1),
            "n_tune_steps_target": int(n_tune_steps),
            "n_tune_attempts": len(attempts),
            "tune_draws": tune_draws,
            "tune_log_marginal_likelihood": tres.log_marginal_likelihood,
            "tune_hit_max_steps": tres.hit_max_steps,
            "n_logp_evals_tune": n_tune,
            "interpolated": n_steps is not None,
            "n_steps": int(final.size - 1),
        }
    )

    # 3. final run: fresh particles per chain on the fixed schedule
    replay = ParamsByTau(tres.stages["tau"], tres.kernel_params) if replay_kernel else None
    attrs["replay_kernel"] = bool(replay_kernel)
    outs, t_sampling = _sample_chains(
        setup,
        path,
        FixedSchedule(final, name="constant_rate"),
        n_mcmc_steps,
        final.size,
        progressbar,
        mp_ctx,
        kernel_params=replay,
        label="CR-AIS",
    )
    attrs["sampling_time"] = t_sampling
    attrs["wall_time"] = time.perf_counter() - t_start
    extra = {"tune_tau": (("tune_stage",), tres.stages["tau"])}
    return _finish(setup, outs, attrs, extra, return_inferencedata, idata_kwargs)


def _rate_pilot(
    setup: _Setup, alpha, scale_shift, *, need_integral: bool, attrs: dict
) -> tuple[float, float]:
    """One cheap geometric pilot for the constant-rate samplers.

    It fixes the scale shift ``c`` (its ``log Ẑ``, when ``alpha != 0`` and no shift is
    given) and, if ``need_integral``, estimates the rate integral ``T`` (NaN otherwise).
    Records ``c``, ``scale_shift`` and ``n_logp_evals_pilot`` in ``attrs``.
    """
    if isinstance(scale_shift, str) and scale_shift != "pilot":
        raise ValueError(f"scale_shift must be a float, 'pilot' or None, got {scale_shift!r}")
    need_c = (scale_shift is None and float(alpha) != 0.0) or scale_shift == "pilot"
    c, total, n_pilot = 0.0, float("nan"), 0
    if need_c or need_integral:
        probe = _RateProbe(alpha)
        before = setup.density.n_evals
        pres = anneal(
            setup.aux_rng,
            setup.density,
            setup.draw(setup.aux_rng, min(setup.draws, 256)),
            make_path(0.0),
            probe.wrap(make_fixed_schedule(exponential_schedule(32, tau_min=1e-6))),
            _fresh_kernel(setup),
        )
        n_pilot = setup.density.n_evals - before
        if need_c:
            c = pres.log_marginal_likelihood
        if need_integral:
            total = probe.total_rate(pres.log_marginal_likelihood, c)
    if not need_c and scale_shift is not None:
        c = float(scale_shift)
        if not np.isfinite(c):
            raise ValueError(f"scale_shift must be finite, got {scale_shift!r}")
    attrs.update(
        {"c": c, "scale_shift": "pilot" if need_c else "fixed", "n_logp_evals_pilot": n_pilot}
    )
    return c, total


class _RateProbe:
    """Records the constant-rate integrand along a pilot run on a fixed schedule."""

    def __init__(self, alpha: float):
        self.alpha = float(alpha)
        self.samples = []  # (tau, delta array, log_weights array)

    def wrap(self, schedule):
        probe = self

        class _Recording(Schedule):
            name = schedule.name

            def next_tau(self, stage, tau, state, log_weights, path):
                probe.samples.append((tau, state.delta.copy(), np.array(log_weights, dtype=float)))
                return schedule.next_tau(stage, tau, state, log_weights, path)

        return _Recording()

    def total_rate(self, log_z: float, c: float) -> float:
        """The path's length ``T`` in the rule's units (steps ≈ T / δ).

        For α = 0 the rule lowers ``KL(γ_τ ‖ π)`` by δ per step, so ``T = KL(q0 ‖ π) =
        log Z − E_q0[Δ]``: the pilot's ``log Ẑ`` and the mean ``Δ`` of its exact ``q0``
        draws, robust to how poorly the pilot's particles equilibrate. For α ≠ 0 the
        integrand is estimated along the pilot (:meth:`integral`).
        """
        if self.alpha == 0.0:
            d0 = self.samples[0][1]
            d0 = d0[np.isfinite(d0)]
            return float(max(log_z - d0.mean(), 1e-12)) if d0.size else float("nan")
        return self.integral(c)

    def integral(self, c: float) -> float:
        """``T ≈ ∫ v r^α / (1 − τ) dτ`` by the trapezoid rule in ``log τ`` (plus [0, τ_1])."""
        path = make_path(self.alpha, c)
        rate = ConstantRateSchedule(1.0, variance="unweighted")
        from ..core.particles import ParticleState

        taus, vals = [], []
        for tau, delta, log_w in self.samples:
            state = ParticleState(np.zeros((delta.size, 1)), np.zeros(delta.size), delta)
            v, log_r = rate.rate_statistics(tau, state, log_w, path)
            taus.append(tau)
            vals.append(v * np.exp(min(self.alpha * log_r, 700.0)) / max(1.0 - tau, 1e-300))
        taus, vals = np.asarray(taus), np.asarray(vals)
        head = vals[0] * taus[1] if taus.size > 1 else vals[0]
        lt = np.log(taus[1:])
        body = np.trapezoid(vals[1:] * taus[1:], lt) if taus.size > 2 else 0.0
        # the last recorded τ is < 1; the integrand there covers the rest
        tail = vals[-1] * (1.0 - taus[-1]) if taus.size > 1 else 0.0
        return float(head + body + tail)
