"""``sample_ais``: the PyMC-facing entry point of annealed importance sampling."""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import numbers
import os
import sys
import time
import traceback
import warnings
from dataclasses import dataclass

import numpy as np

from ..core.anneal import anneal
from ..core.kernels import MutationKernel, make_kernel
from ..core.paths import make_path
from ..core.resampling import systematic
from ..core.schedules import FixedSchedule, make_fixed_schedule
from ..core.weights import normalized_weights
from .compile import compile_model_density, parameter_layout, resolve_compile_kwargs
from .init import PriorSampler
from .mapping import PosteriorMapper
from .model_info import has_likelihood_terms, model_data_for_results

__all__ = ["ChainFailedError", "sample_ais", "SamplerResult"]


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
    """

    posterior: dict
    chain_stats: list
    attrs: dict


# ----------------------------------------------------------------------------- arguments
def _check_positive_int(value, name: str, minimum: int, fix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}; {fix}")
    return int(value)


def chain_generators(random_seed, chains: int) -> tuple[list[np.random.Generator], np.random.Generator]:
    """One independent generator per chain, plus one for auxiliary work (the pilot run).

    Parameters
    ----------
    random_seed : None, int, sequence of int, numpy.random.SeedSequence or Generator
        A sequence must have one entry per chain (each seeds its chain).
    chains : int

    Returns
    -------
    (list of Generator, Generator)
    """
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


def _build_schedule(schedule, n_steps, schedule_kwargs) -> FixedSchedule:
    if hasattr(schedule, "next_tau"):
        return schedule
    kw = dict(schedule_kwargs or {})
    if isinstance(schedule, str):
        return make_fixed_schedule(schedule, _check_positive_int(n_steps, "n_steps", 1, "e.g. n_steps=200"), **kw)
    if hasattr(schedule, "__array__") or isinstance(schedule, list | tuple):
        return make_fixed_schedule(np.asarray(schedule, dtype=np.float64), **kw)
    raise ValueError(
        f"schedule={schedule!r} is not understood; pass 'linear', 'sigmoid', 'exponential' "
        "or an increasing array of tau values from 0 to 1"
    )


# ----------------------------------------------------------------------------- one chain
@dataclass
class _ChainTask:
    chain: int
    rng: np.random.Generator
    density: object
    prior: PriorSampler
    draws: int
    path: object
    schedule: object
    kernel: MutationKernel
    n_mcmc_steps: int
    show_progress: bool = False


def _run_chain(task: _ChainTask) -> dict:
    """Anneal one chain; returns plain NumPy output (picklable, small)."""
    rng = task.rng
    x0 = task.prior.draw(rng, task.draws)
    result = anneal(
        rng,
        task.density,
        x0,
        task.path,
        task.schedule,
        task.kernel,
        n_mcmc_steps=task.n_mcmc_steps,
        resample="never",
    )
    idx = systematic(rng, normalized_weights(result.log_weights), task.draws)
    idx = rng.permutation(idx)  # systematic resampling returns sorted ancestors
    return {
        "chain": task.chain,
        "x": result.state.x[idx],
        "log_marginal_likelihood": result.log_marginal_likelihood,
        "log_z_variance": result.log_z_variance,
        "n_logp_evals": result.n_logp_evals,
        "log_weights": result.log_weights,
        "hit_max_steps": result.hit_max_steps,
        **result.stages,
    }


def _run_chain_in_worker(payload: bytes) -> dict:
    """Worker entry: tasks travel as cloudpickle bytes (compiled graphs with
    ``OpFromGraph`` gradients do not pickle with the standard pickler)."""
    import cloudpickle

    task = cloudpickle.loads(payload)
    try:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1):
            return _run_chain(task)
    except BaseException as err:  # carry the worker's traceback to the caller as text
        raise ChainFailedError(
            f"chain {task.chain} failed with {type(err).__name__}: {err}\n"
            f"--- traceback in the worker process ---\n{traceback.format_exc()}"
        ) from None


def _run_chains(tasks: list[_ChainTask], cores: int, mp_ctx, progress) -> list[dict]:
    if cores <= 1 or len(tasks) == 1:
        out = []
        for task in tasks:
            try:
                out.append(_run_chain(task))
            except Exception as err:
                if len(tasks) == 1:
                    raise
                raise ChainFailedError(f"chain {task.chain} failed: {type(err).__name__}: {err}") from err
            progress(out[-1])
        return out
    ctx = multiprocessing.get_context(mp_ctx) if isinstance(mp_ctx, str | type(None)) else mp_ctx
    results: dict[int, dict] = {}
    executor = cf.ProcessPoolExecutor(max_workers=min(cores, len(tasks)), mp_context=ctx)
    try:
        import cloudpickle

        futures = {
            executor.submit(_run_chain_in_worker, cloudpickle.dumps(t)): t.chain for t in tasks
        }
        for fut in cf.as_completed(futures):
            res = fut.result()
            results[res["chain"]] = res
            progress(res)
    except BaseException:
        for proc in list(getattr(executor, "_processes", {}).values()):
            proc.terminate()
        executor.shutdown(wait=False, cancel_futures=True)
        raise
    executor.shutdown(wait=True)
    return [results[t.chain] for t in tasks]


def _progress_printer(enabled: bool, n_chains: int, t0: float):
    def report(res: dict):
        if enabled:
            print(
                f"pymc_crais: chain {res['chain'] + 1}/{n_chains} done: "
                f"{res['tau'].size} stages, log Z = {res['log_marginal_likelihood']:.4f}, "
                f"{res['n_logp_evals']} logp evals, {time.perf_counter() - t0:.1f} s",
                file=sys.stderr,
                flush=True,
            )

    return report


# ----------------------------------------------------------------------------- entry point
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
    n_mcmc_steps: int = 1,
    kernel_kwargs: dict | None = None,
    schedule_kwargs: dict | None = None,
    scale_shift: float | str | None = None,
    backend: str | None = None,
    mp_ctx=None,
):
    """Estimate the evidence ``log Z`` of a PyMC model by annealed importance sampling.

    Particles are drawn from the prior, annealed along the path ``γ_τ`` (geometric for
    ``alpha=0``, power mean otherwise) over the fixed ``schedule``, moved by a batched
    MCMC ``kernel`` at every stage, and weighted (never resampled) so that
    ``mean(w)`` is an unbiased estimate of ``Z``.

    Parameters
    ----------
    draws : int, default 1000
        Particles per chain (``>= 2``); also the number of posterior draws per chain.
    schedule : {"linear", "sigmoid", "exponential"} or array_like, default "linear"
        Fixed annealing schedule, or an increasing array of τ from exactly 0 to 1.
    n_steps : int, default 200
        Number of annealing steps of a named schedule.
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
    n_mcmc_steps : int, default 1
        Kernel transitions per annealing step.
    kernel_kwargs : dict, optional
        Options of a named kernel (``n_leapfrog``, ``step_size``, ``target_accept``...).
    schedule_kwargs : dict, optional
        Options of a named schedule (``scale`` for sigmoid, ``tau_min`` for exponential).
    scale_shift : float, "pilot" or None, default None
        The fixed ``c`` of a power-mean path (``log Z = c + log Z_c``). ``None`` means 0 for
        ``alpha=0`` and ``"pilot"`` otherwise: ``c`` is the ``log Ẑ`` of a geometric pilot
        run with ``min(draws, 256)`` particles and a quarter of the steps, whose model
        evaluations are reported as ``n_logp_evals_pilot``.
    backend : str, optional
        PyTensor backend (``"c"``, ``"numba"``, ``"jax"``), as in ``pm.sample_smc``.
    mp_ctx : str or multiprocessing context, optional
        Start method of the worker processes.

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
    import pymc as pm

    t_start = time.perf_counter()
    model = pm.modelcontext(model)
    draws = _check_positive_int(draws, "draws", 2, "use at least 2 particles (hundreds are typical)")
    if cores is None:
        cores = os.cpu_count() or 1
    cores = _check_positive_int(cores, "cores", 1, "use cores=1 for sequential chains")
    if chains is None:
        chains = max(2, cores)
    chains = _check_positive_int(chains, "chains", 1, "use chains=1 for a single run")
    cores = min(cores, chains)
    n_mcmc_steps = _check_positive_int(n_mcmc_steps, "n_mcmc_steps", 0, "e.g. n_mcmc_steps=1")
    path0 = make_path(alpha, 0.0)  # validates alpha early
    sched = _build_schedule(schedule, n_steps, schedule_kwargs)
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
            f"variables {layout.discrete_names}; use kernel='rwmh'"
        )
    if not has_likelihood_terms(model):
        warnings.warn(
            "the model has no observed variables or potentials: the evidence is exactly 1 "
            "(log Z = 0) and the posterior equals the prior",
            UserWarning,
            stacklevel=2,
        )

    ckw = resolve_compile_kwargs(backend, compile_kwargs)
    density = compile_model_density(model, gradient=mutation.needs_gradient, compile_kwargs=ckw)
    prior = PriorSampler(model, layout, ckw)
    chain_rngs, aux_rng = chain_generators(random_seed, chains)

    attrs = {
        "method": "ais",
        "path": path0.name,
        "alpha": float(alpha),
        "init": "prior",
        "n_mcmc_steps": n_mcmc_steps,
        "draws": draws,
        "vectorized": density.vectorized,
        **{k: v for k, v in sched.describe().items()},
        **{f"kernel_{k}" if k != "kernel" else k: v for k, v in mutation.describe().items()},
    }

    # The scale shift c, fixed once for every chain (ALGORITHMS.md §2).
    n_pilot = 0
    if scale_shift is None:
        scale_shift = 0.0 if path0.alpha == 0.0 else "pilot"
    if isinstance(scale_shift, str):
        if scale_shift != "pilot":
            raise ValueError(f"scale_shift must be a float, 'pilot' or None, got {scale_shift!r}")
        pilot_sched = sched
        if isinstance(schedule, str):
            pilot_sched = make_fixed_schedule(
                schedule, max(n_steps // 4, 10), **dict(schedule_kwargs or {})
            )
        pilot_draws = min(draws, 256)
        before = density.n_evals
        pilot = anneal(
            aux_rng,
            density,
            prior.draw(aux_rng, pilot_draws),
            make_path(0.0),
            pilot_sched,
            make_kernel(kernel, **dict(kernel_kwargs or {})) if isinstance(kernel, str) else mutation,
        )
        n_pilot = density.n_evals - before
        c = pilot.log_marginal_likelihood
    else:
        c = float(scale_shift)
    path = make_path(alpha, c)
    attrs.update({"c": c, "scale_shift": "pilot" if n_pilot else "fixed", "n_logp_evals_pilot": n_pilot})

    tasks = [
        _ChainTask(i, chain_rngs[i], density, prior, draws, path, sched, mutation, n_mcmc_steps)
        for i in range(chains)
    ]
    t0 = time.perf_counter()
    outs = _run_chains(tasks, cores, mp_ctx, _progress_printer(progressbar, chains, t0))
    attrs["sampling_time"] = time.perf_counter() - t0
    attrs["wall_time"] = time.perf_counter() - t_start

    mapper = PosteriorMapper(model, layout, ckw)
    per_chain = [mapper(o.pop("x")) for o in outs]
    posterior = {k: np.stack([pc[k] for pc in per_chain]) for k in mapper.names}
    for o in outs:
        o.pop("chain")
    if not return_inferencedata:
        return SamplerResult(posterior, outs, attrs)

    from ..results import build_datatree

    info = model_data_for_results(model)
    ik = dict(idata_kwargs or {})
    coords = {**info["coords"], **dict(ik.get("coords") or {})}
    dims = {**info["dims"], **dict(ik.get("dims") or {})}
    idata = build_datatree(
        posterior=posterior,
        chain_stats=outs,
        attrs=attrs,
        coords=coords,
        dims=dims,
        observed_data=info["observed_data"],
        constant_data=info["constant_data"],
    )
    if ik.get("log_likelihood"):
        idata = pm.compute_log_likelihood(idata, model=model, extend_inferencedata=True, progressbar=False)
    return idata
