"""``sample_smc``: tempered SMC with pm.sample_smc's signature (ESS/CESS/CR-SMC/fixed)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..core.adaptive import CESSSchedule, ConstantRateSchedule, ESSSchedule
from ..core.anneal import anneal
from ..core.paths import make_path
from ..core.schedules import FIXED_SCHEDULES, Schedule, make_fixed_schedule
from . import sampling as _s
from .progress import ChainProgress, stage_callback

__all__ = ["sample_smc"]

SMC_SCHEDULES = ("ess", "cess", "constant_rate", *FIXED_SCHEDULES)


@dataclass
class _SMCTask(_s._ChainTask):
    resample: str = "always"
    resample_threshold: float = 0.5
    resampler: str = "systematic"
    max_mcmc_steps: int = 20
    correlation_threshold: float = 0.01


def _run_smc_chain(task: _SMCTask) -> dict:
    rng = task.rng
    result = anneal(
        rng,
        task.density,
        task.draw(rng, task.draws),
        task.path,
        task.schedule,
        task.kernel,
        n_mcmc_steps=task.n_mcmc_steps,
        max_mcmc_steps=task.max_mcmc_steps,
        correlation_threshold=task.correlation_threshold,
        resample=task.resample,
        threshold=task.resample_threshold,
        resampler=task.resampler,
        max_steps=task.max_steps,
        tune_from_weights=True,
        callback=stage_callback(task.chain),
    )
    return _s._chain_output(task, rng, result)


@_s.single_threaded_blas
def sample_smc(
    draws: int = 2000,
    kernel="hmc",
    *,
    start=None,
    model=None,
    random_seed=None,
    chains: int | None = None,
    cores: int | None = None,
    compute_convergence_checks: bool = True,
    return_inferencedata: bool = True,
    idata_kwargs: dict | None = None,
    progressbar: bool = True,
    **kernel_kwargs,
):
    """Sequential Monte Carlo with tempering, batched kernels and an honest ``log Z``.

    Same signature as ``pm.sample_smc``. Each stage: choose the next τ, reweight, resample,
    then move all particles with a batched MCMC kernel tuned from the population.

    Parameters
    ----------
    draws : int, default 2000
        Particles per chain.
    kernel : {"hmc", "rwmh", "imh", "mala"} or MutationKernel, default "hmc"
        Mutation kernel (``"imh"`` is PyMC's default independence sampler).
    start : None
        Not supported (initial particles must be exact draws of ``q0`` for ``log Z``);
        use ``init=``.
    model, random_seed, chains, cores, return_inferencedata, idata_kwargs, progressbar
        As in :func:`pymc_crais.sample_ais`.
    compute_convergence_checks : bool, default True
        Accepted for compatibility; the run's own checks (genealogy, Pareto k̂, mixing,
        chain agreement) always run and raise :class:`pymc_crais.UnreliableEvidenceWarning`
        (see :func:`pymc_crais.diagnose`).
    **kernel_kwargs
        ``schedule`` (``"ess"`` default, ``"cess"``, ``"constant_rate"`` = CR-SMC, a fixed
        name, an array or a previous result); ``threshold`` (ρ of the ESS/CESS rules,
        default 0.5 as PyMC); ``delta`` (CR-SMC rate; default ``"auto"``: from a pilot's
        estimate of the rate integral, so that the run has about ``n_steps`` stages, see
        :func:`pymc_crais.sample_crais`); ``alpha``; ``n_steps`` (fixed schedules, and the
        target length of CR-SMC with ``delta="auto"``, default 100); ``resample`` (``"always"`` default for ESS/CESS and
        fixed schedules, ``"ess"`` for CR-SMC) and ``resample_threshold`` (κ, default 0.5,
        0.9 for CR-SMC as the paper); ``resampler``; ``n_mcmc_steps`` (``"auto"`` default:
        until the correlation with the stage's start stops falling by
        ``correlation_threshold`` = 0.01, at most ``max_mcmc_steps`` = 20); ``init``,
        ``init_kwargs``; ``kernel_kwargs`` (a dict of the kernel's own options);
        ``max_step``, ``min_step``, ``max_steps``; ``backend``, ``compile_kwargs``,
        ``mp_ctx``, ``scale_shift``.

    Returns
    -------
    xarray.DataTree or SamplerResult
        As :func:`pymc_crais.sample_ais`, with ``method = "smc"`` and per-stage
        ``resampled`` and ``mcmc_steps``.
    """
    t_start = time.perf_counter()
    if start is not None:
        raise ValueError(
            "start= is not supported: log Z needs exact draws from the initial distribution; "
            "use init= ('prior', 'laplace' or a Gaussian) instead"
        )
    kw = dict(kernel_kwargs)
    schedule = kw.pop("schedule", "ess")
    threshold = kw.pop("threshold", 0.5)
    alpha = kw.pop("alpha", 0.0)
    delta = kw.pop("delta", "auto")
    n_steps = kw.pop("n_steps", 100)
    is_cr = isinstance(schedule, str) and schedule == "constant_rate"
    resample = kw.pop("resample", "ess" if is_cr else "always")
    resample_threshold = kw.pop("resample_threshold", 0.9 if is_cr else 0.5)
    resampler = kw.pop("resampler", "systematic")
    n_mcmc_steps = kw.pop("n_mcmc_steps", "auto")
    max_mcmc_steps = kw.pop("max_mcmc_steps", 20)
    correlation_threshold = kw.pop("correlation_threshold", 0.01)
    max_step = kw.pop("max_step", None)
    min_step = kw.pop("min_step", None)
    max_steps = kw.pop("max_steps", 10_000)
    init = kw.pop("init", "prior")
    init_kwargs = kw.pop("init_kwargs", None)
    own_kernel_kwargs = kw.pop("kernel_kwargs", None)
    backend = kw.pop("backend", None)
    compile_kwargs = kw.pop("compile_kwargs", None)
    mp_ctx = kw.pop("mp_ctx", None)
    scale_shift = kw.pop("scale_shift", None)
    if kw:
        raise TypeError(f"sample_smc got unexpected keyword arguments {sorted(kw)}")
    if resample not in ("always", "ess"):
        raise ValueError(f"resample must be 'always' or 'ess', got {resample!r}")
    if not (np.isfinite(resample_threshold) and 0 < resample_threshold <= 1):
        raise ValueError(f"resample_threshold must be in (0, 1], got {resample_threshold!r}")
    make_path(alpha, 0.0)
    if isinstance(schedule, str) and schedule in ("ess", "cess"):
        sched: Schedule = (ESSSchedule if schedule == "ess" else CESSSchedule)(threshold, max_step=max_step, min_step=min_step)
    elif is_cr:
        if not (isinstance(delta, str) and delta == "auto"):
            if isinstance(delta, bool) or not isinstance(delta, int | float) or not (np.isfinite(delta) and delta > 0):
                raise ValueError(f"delta must be a positive number or 'auto', got {delta!r}")
        sched = None  # built once c and delta are known
    else:
        sched = _s._resolve_schedule(schedule, n_steps, None, None, max_step, min_step)
    if n_mcmc_steps != "auto":
        _s._check_int(n_mcmc_steps, "n_mcmc_steps", 0, "or n_mcmc_steps='auto'")
    max_steps = _s._check_int(max_steps, "max_steps", 1, "e.g. max_steps=10000")

    setup = _s._setup(
        model=model, draws=draws, chains=chains, cores=cores, kernel=kernel,
        kernel_kwargs=own_kernel_kwargs, init=init, init_kwargs=init_kwargs,
        random_seed=random_seed, backend=backend, compile_kwargs=compile_kwargs,
        idata_kwargs=idata_kwargs, n_mcmc_steps=n_mcmc_steps if n_mcmc_steps != "auto" else 0,
    )
    attrs = {
        "method": "smc",
        "path": make_path(alpha, 0.0).name,
        "alpha": float(alpha),
        **setup.attrs,
        **(sched.describe() if sched is not None else {}),
        "n_mcmc_steps": str(n_mcmc_steps),
        "max_mcmc_steps": int(max_mcmc_steps),
        "resample": resample,
        "resample_threshold": float(resample_threshold),
        "resampler": resampler,
    }
    if is_cr:
        c, total = _s._rate_pilot(setup, alpha, scale_shift, need_integral=delta == "auto", attrs=attrs)
        if delta == "auto":
            delta = max(total / _s._check_int(n_steps, "n_steps", 1, "e.g. n_steps=100"), 1e-12)
    else:
        pilot_sched = make_fixed_schedule("exponential", 32, tau_min=1e-6)
        c = _s._scale_shift(setup, alpha, scale_shift, pilot_sched, attrs)
    if is_cr:
        sched = ConstantRateSchedule(delta, min_step=min_step or 0.0, max_step=0.125 if max_step is None else max_step)
        attrs.update(sched.describe())
    tasks = [
        _SMCTask(
            chain=i, rng=setup.chain_rngs[i], density=setup.density, draw=setup.draw,
            draws=setup.draws, path=make_path(alpha, c), schedule=sched, kernel=setup.kernel,
            n_mcmc_steps=n_mcmc_steps, max_steps=max_steps, resample=resample,
            resample_threshold=float(resample_threshold), resampler=resampler,
            max_mcmc_steps=int(max_mcmc_steps), correlation_threshold=float(correlation_threshold),
        )
        for i in range(setup.chains)
    ]
    t0 = time.perf_counter()
    outs = _s._run_chains(
        tasks, setup.cores, mp_ctx, ChainProgress(progressbar, setup.chains, "SMC"), runner=_run_smc_chain
    )
    attrs["sampling_time"] = time.perf_counter() - t0
    attrs["wall_time"] = time.perf_counter() - t_start
    return _s._finish(setup, outs, attrs, {}, return_inferencedata, idata_kwargs)
