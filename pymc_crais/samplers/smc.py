"""``sample_smc``: tempered SMC with pm.sample_smc's signature (ESS/CESS/CR-SMC/fixed)."""

from __future__ import annotations

import time

import numpy as np

from ..core.adaptive import CESSSchedule, ConstantRateSchedule, ESSSchedule
from ..core.paths import make_path
from ..core.run_length import predicted_mcse
from ..core.schedules import FIXED_SCHEDULES, FixedSchedule, Schedule
from .anneal_chain import AnnealPlan
from .options import (
    ADAPTIVE_SCHEDULES,
    RunOptions,
    check_int,
    check_rate,
    is_auto,
    resolve_schedule,
)
from .path_option import build_path, check_path
from .persistent_option import check_persistent, persistent_stages
from .pipeline import prepare
from .runner import single_threaded_blas
from .tuning import (
    DEFAULT_TARGET_MCSE,
    check_target_mcse,
    rate_for_steps,
    scale_shift_pilot,
    start_length_point,
)

__all__ = ["SMC_SCHEDULES", "plan_smc", "sample_smc"]

DEFAULT_N_STEPS = 100
"""Stages of a fixed schedule, and CR-SMC's target length, when ``n_steps`` is not given."""
SMC_SCHEDULES = ("ess", "cess", "constant_rate", *FIXED_SCHEDULES)
WASTE_FREE_LENGTH = 10  # the chain length P of waste_free=True


@single_threaded_blas
def sample_smc(
    draws: int = 2000,
    kernel="auto",
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
    kernel : {"auto", "hmc", "mala", "rwmh", "mh", "imh", "imh_then_hmc", "hmc_final_imh"} or MutationKernel, default "auto"
        Mutation kernel (``"auto"``: ``"hmc_final_imh"`` on continuous models, HMC and, at
        ``τ = 1``, after ``log Z`` is complete, independence moves while they accept at least
        29 % of their proposals; ``"imh"`` on models with discrete variables, as in
        :func:`sample_ais`; the choice and its reason are in the output's
        ``kernel_reason``; ``"imh_then_hmc"``: independence moves, HMC from the first
        transition that accepts under 2.5 % of its proposals;
        ``"imh"`` is independence Metropolis with Gaussians fitted to the population, as in
        PyMC, cross-fitted between its halves; ``"mh"`` is ``"rwmh"``).
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
        target length of CR-SMC with ``delta="auto"``, default 100); ``target_mcse``
        (CR-SMC only, default 0.02 nats: with ``n_steps`` and ``delta`` not given, the
        importance weights of 1000 run-level draws of the start are measured first, and
        when they predict a pooled Monte Carlo error of ``log Ẑ`` at most ``target_mcse``
        the run is one stage, τ: 0 → 1, then its moves — no pilot, no rate rule; else the
        rule's stages as before; attributes ``start_relative_variance``,
        ``start_pareto_k``, ``predicted_mcse``); ``resample`` (``"always"`` default for ESS/CESS and
        fixed schedules, ``"ess"`` for CR-SMC) and ``resample_threshold`` (κ, default 0.5,
        0.9 for CR-SMC as the paper); ``resampler``; ``n_mcmc_steps`` (``"auto"`` default:
        until the 0.9-quantile of the coordinates' correlations with the stage's start is
        below ``max_correlation`` = 0.1, or until the moves left are projected not to halve
        it; ``"pymc"``: until the mean correlation stops falling by
        ``correlation_threshold`` = 0.01; at most ``max_mcmc_steps`` = 20);
        ``waste_free`` (``False`` default; ``True`` or a chain length ``P ≥ 2``, ``True``
        meaning 10: waste-free SMC, Dau & Chopin 2022: each stage resamples ``⌈N/P⌉``
        particles, runs ``P − 1`` transitions from each, and keeps all the states);
        ``persistent`` (``False`` default; ``True`` or a number ``L ≥ 2`` of populations
        kept: persistent sampling, Karamanis et al. 2025, which reweights every past
        population to each τ by multiple importance sampling and resamples from them all;
        with ``True`` all populations are kept within ``memory_budget / chains`` bytes; ESS
        schedule (the pooled weights' ESS ``≥ threshold · draws``) or a fixed one; its MCSE
        is the chains' spread only, NaN with a warning below 4 chains; see
        docs/algorithms.md, "Persistent sampling"); ``init``
        (default ``"auto"``, see :func:`pymc_crais.sample_ais`),
        ``init_kwargs``; ``kernel_kwargs`` (a dict of the kernel's own options);
        ``max_step``, ``min_step``, ``max_steps``; ``backend``, ``compile_kwargs``,
        ``mp_ctx``, ``executor``, ``memory_budget``, ``scale_shift``; ``path``
        (``"geometric"`` default, or ``"moment_averaging"``) and ``path_kwargs``, as in
        :func:`pymc_crais.sample_ais`.

    Returns
    -------
    xarray.DataTree or SamplerResult
        As :func:`pymc_crais.sample_ais`, with ``method = "smc"`` and per-stage
        ``resampled`` and ``mcmc_steps``.
    """
    return plan_smc(
        draws,
        kernel,
        start=start,
        model=model,
        random_seed=random_seed,
        chains=chains,
        cores=cores,
        compute_convergence_checks=compute_convergence_checks,
        return_inferencedata=return_inferencedata,
        idata_kwargs=idata_kwargs,
        progressbar=progressbar,
        **kernel_kwargs,
    ).run()


def plan_smc(
    draws: int = 2000,
    kernel="auto",
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
) -> AnnealPlan:
    """:func:`sample_smc`'s checks, set-up and pilot: the run, ready for its chains
    (:class:`~pymc_crais.samplers.anneal_chain.AnnealPlan`). Same arguments."""
    t_start = time.perf_counter()
    if start is not None:
        raise ValueError(
            "start= is not supported: log Z needs exact draws from the initial distribution; "
            "use init= ('auto', 'prior', 'laplace' or a Gaussian) instead"
        )
    kw = dict(kernel_kwargs)
    schedule = kw.pop("schedule", "ess")
    rho = kw.pop("threshold", 0.5)  # PyMC's name for the ESS ratio of the tempering rule
    alpha = kw.pop("alpha", 0.0)
    delta = kw.pop("delta", "auto")
    n_steps = kw.pop("n_steps", None)
    is_cr = isinstance(schedule, str) and schedule == "constant_rate"
    target_mcse = kw.pop("target_mcse", None)
    if target_mcse is not None:
        if not is_cr:
            raise TypeError(
                "target_mcse applies to schedule='constant_rate' (CR-SMC) only; the ESS rules "
                "choose their own stages"
            )
        target_mcse = check_target_mcse(target_mcse)
    resample = kw.pop("resample", "ess" if is_cr else "always")
    resample_threshold = kw.pop("resample_threshold", 0.9 if is_cr else 0.5)
    resampler = kw.pop("resampler", "systematic")
    n_mcmc_steps = kw.pop("n_mcmc_steps", "auto")
    max_mcmc_steps = kw.pop("max_mcmc_steps", 20)
    correlation_threshold = kw.pop("correlation_threshold", 0.01)
    max_correlation = kw.pop("max_correlation", 0.1)
    waste_free = kw.pop("waste_free", False)
    persistent = kw.pop("persistent", False)
    max_step = kw.pop("max_step", None)
    min_step = kw.pop("min_step", None)
    max_steps = kw.pop("max_steps", 10_000)
    init = kw.pop("init", "auto")
    init_kwargs = kw.pop("init_kwargs", None)
    own_kernel_kwargs = kw.pop("kernel_kwargs", None)
    backend = kw.pop("backend", None)
    compile_kwargs = kw.pop("compile_kwargs", None)
    mp_ctx = kw.pop("mp_ctx", None)
    executor = kw.pop("executor", None)
    memory_budget = kw.pop("memory_budget", None)
    scale_shift = kw.pop("scale_shift", None)
    path = kw.pop("path", "geometric")
    path_kwargs = kw.pop("path_kwargs", None)
    if kw:
        raise TypeError(f"sample_smc got unexpected keyword arguments {sorted(kw)}")
    if resample not in ("always", "ess"):
        raise ValueError(f"resample must be 'always' or 'ess', got {resample!r}")
    if not (np.isfinite(resample_threshold) and 0 < resample_threshold <= 1):
        raise ValueError(f"resample_threshold must be in (0, 1], got {resample_threshold!r}")
    make_path(alpha, 0.0)
    path, path_kwargs = check_path(path, alpha, schedule, path_kwargs)
    sched: Schedule | None
    if isinstance(schedule, str) and schedule in ADAPTIVE_SCHEDULES:
        rule = ESSSchedule if schedule == "ess" else CESSSchedule
        sched = rule(rho, max_step=max_step, min_step=min_step)
    elif is_cr:
        delta = check_rate(delta)
        sched = None  # built once c and delta are known
    else:
        sched = resolve_schedule(
            schedule, DEFAULT_N_STEPS if n_steps is None else n_steps, None, None, max_step, min_step
        )
    if waste_free is True:
        waste_free = WASTE_FREE_LENGTH
    elif waste_free is False or waste_free is None:
        waste_free = 0
    else:
        waste_free = check_int(waste_free, "waste_free", 2, "or waste_free=True (P = 10)")
    persistent = check_persistent(persistent, schedule, waste_free, path)
    if n_mcmc_steps not in ("auto", "pymc"):
        check_int(n_mcmc_steps, "n_mcmc_steps", 0, "or n_mcmc_steps='auto'")
    max_steps = check_int(max_steps, "max_steps", 1, "e.g. max_steps=10000")

    options = RunOptions.from_arguments(
        locals(),
        kernel_kwargs=own_kernel_kwargs,
        n_mcmc_steps=n_mcmc_steps if not isinstance(n_mcmc_steps, str) else 0,
        resamples=True,
    )
    setup = prepare(options)
    attrs = {
        "method": "smc",
        "path": make_path(alpha, 0.0).name,
        "alpha": float(alpha),
        **setup.attrs,
        **(sched.describe() if sched is not None else {}),
        "n_mcmc_steps": str(n_mcmc_steps),
        "max_mcmc_steps": int(max_mcmc_steps),
        "waste_free": int(waste_free),
        **({"persistent": persistent} if persistent else {}),
        "resample": resample,
        "resample_threshold": float(resample_threshold),
        "resampler": resampler,
    }
    one_step = False
    if is_cr and n_steps is None and is_auto(delta):
        # CR-SMC's default: one stage when the start's weights already meet the target
        target = DEFAULT_TARGET_MCSE if target_mcse is None else target_mcse
        start = start_length_point(setup)
        attrs.update(start.attrs, target_mcse=target)
        if start.point is not None:
            mcse = predicted_mcse(start.point.r, setup.draws, setup.chains)
            attrs["predicted_mcse"] = mcse
            one_step = mcse <= target
    if one_step:
        c = 0.0
        sched = FixedSchedule(np.array([0.0, 1.0]), name="one_step")
        attrs.update(sched.describe(), c=c, scale_shift="fixed")
        attrs["n_logp_evals_pilot"] = attrs["n_logp_evals_start"]
    else:
        need_rate = is_cr and is_auto(delta)
        c, total = scale_shift_pilot(setup, alpha, scale_shift, attrs, need_rate=need_rate)
        attrs["n_logp_evals_pilot"] += attrs.get("n_logp_evals_start", 0)
        if is_cr:
            if need_rate:
                n = DEFAULT_N_STEPS if n_steps is None else n_steps
                delta = rate_for_steps(total, check_int(n, "n_steps", 1, "e.g. n_steps=100"))
            max_step = 0.125 if max_step is None else max_step
            sched = ConstantRateSchedule(delta, min_step=min_step or 0.0, max_step=max_step)
            attrs.update(sched.describe())
    task_kwargs = dict(
        n_mcmc_steps=n_mcmc_steps,
        max_steps=max_steps,
        resample=resample,
        resample_threshold=float(resample_threshold),
        resampler=resampler,
        max_mcmc_steps=int(max_mcmc_steps),
        correlation_threshold=float(correlation_threshold),
        tune_from_weights=True,
        max_correlation=float(max_correlation),
        waste_free=waste_free,
    )
    if persistent:
        task_kwargs["stages"] = persistent_stages(persistent, setup)
    path = build_path(setup, path, alpha, c, attrs, path_kwargs)
    return AnnealPlan(setup, path, sched, "SMC", task_kwargs, attrs, {}, t_start)
