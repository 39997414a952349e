"""``sample_smc``: tempered SMC with pm.sample_smc's signature (ESS/CESS/CR-SMC/fixed)."""

from __future__ import annotations

import time
from dataclasses import replace

from ..core.kernels.moves import Moves
from ..core.paths import make_path
from ..core.schedules import Schedule
from ..core.schedules.adaptive import ConstantRateSchedule
from .engine.anneal_chain import AnnealPlan
from .engine.annealed_start import smc_annealed_start
from .engine.conditional_start import CONDITIONAL_MAX_MCMC_STEPS, one_step_conditional_start
from .engine.options import RunOptions, check_int, check_rate, is_auto
from .engine.path_option import build_path, check_path
from .engine.persistent_option import check_persistent, persistent_stages
from .engine.pipeline import prepare
from .engine.runner import single_threaded_blas
from .engine.schedule_option import SMC_SCHEDULES
from .engine.smc_settings import SMCSettings
from .engine.start_point import DEFAULT_TARGET_MCSE, one_step_schedule, start_length_point
from .engine.tuning import rate_for_steps, scale_shift_pilot

__all__ = ["SMC_SCHEDULES", "plan_smc", "sample_smc"]

CR_SMC_CESS_FLOOR = 0.999
"""CR-SMC's steps are never smaller than the conditional-ESS rule's with this ρ (see
:class:`~pymc_crais.core.schedules.adaptive.ConstantRateSchedule`'s ``cess_floor``)."""
DEFAULT_N_STEPS = 100
"""Stages of a fixed schedule, and CR-SMC's target length, when ``n_steps`` is not given."""
MCMC_STEPS_AT_TARGET = 1
"""Transitions at ``τ = 1`` with an adaptive move count (unless ``max_mcmc_steps`` is given),
where no copies are left to break up: they come before the final weights are resampled into
the draws and change no weight (``AnnealOptions.final_moves``)."""


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
        chain agreement, the posterior refit check) always run and raise
        :class:`pymc_crais.UnreliableEvidenceWarning` (see :func:`pymc_crais.diagnose`).
        The posterior refit check compares ``log Ẑ`` with importance sampling from a
        Student-t fitted to the chains' draws; a run well below a light-tailed estimate, or
        a run that passed every check but would report an MCSE above 0.05 nat, is annealed
        once more from that Student-t and the second run is returned (attrs ``refit_*``,
        ``refit_restart_reason``; :mod:`pymc_crais.samplers.engine.posterior_refit`).
    **kernel_kwargs
        ``schedule`` (``"ess"`` default, ``"cess"``, ``"constant_rate"`` = CR-SMC, a fixed
        name, an array or a previous result); ``threshold`` (ρ of the ESS/CESS rules,
        default 0.5 as PyMC); ``delta`` (CR-SMC rate; default ``"auto"``: from a pilot's
        estimate of the rate integral, so that the run has about ``n_steps`` stages, see
        :func:`pymc_crais.sample_crais`); ``alpha``; ``n_steps`` (fixed schedules, and the
        target length of CR-SMC with ``delta="auto"``, default 100); ``target_mcse``
        (default 0.02 nats; the ESS rule and CR-SMC: the importance weights of up to
        1000 run-level draws of the start are measured first, and when their k̂ is at most
        0.5 and they predict a pooled Monte Carlo error of ``log Ẑ`` at most
        ``target_mcse`` the run is one stage, τ: 0 → 1, then its moves — no tempering, no
        pilot, no rate rule; else the rule's stages as before; attributes
        ``start_relative_variance``, ``start_pareto_k``, ``predicted_mcse``. CR-SMC does
        this only with ``n_steps`` and ``delta`` not given; the ESS rule at its default
        ``threshold`` without ``n_steps`` (the CESS rule, or another threshold, only when
        ``target_mcse`` is given), with the geometric path, ``alpha=0``, no
        ``max_step``/``min_step``, no persistent sampling and where neither the conditional
        nor the annealed start was tried (for CR-SMC too); its posterior refit check flags
        rather than restarts; it also sizes the conditional start's copies); ``resample``
        (``"always"`` default for ESS/CESS and fixed schedules, ``"ess"`` for CR-SMC) and ``resample_threshold`` (κ, default 0.5,
        0.9 for CR-SMC as the paper); ``resampler``; ``n_mcmc_steps`` (``"auto"`` default:
        until the 0.9-quantile of the coordinates' correlations with the stage's start is
        below ``max_correlation`` = 0.1, or until the moves left are projected not to halve
        it; ``"pymc"``: until the mean correlation stops falling by
        ``correlation_threshold`` = 0.01; at most ``max_mcmc_steps`` = 20; at τ = 1, where
        ``max_mcmc_steps`` is not given (outside waste-free and persistent runs), one
        transition (attribute ``mcmc_steps_at_target``), as no weight changes there and the
        final weights, resampled after the moves, make the posterior draws — unless the last
        resampling stage's moves ran to their cap (the rule then goes on), or after a
        conditional-Laplace start whose families share a hyperparameter draw (at most 3,
        which break the families up));
        ``idle_mcmc_steps`` (transitions of a stage before τ = 1 that did not resample;
        ``"auto"`` default: 1 when ``n_mcmc_steps`` is adaptive and ``resample="ess"``, as
        CR-SMC's default, outside waste-free and persistent runs — the stage's particles
        are distinct and exactly weighted, so the stages that resampled decorrelate their
        copies and the others follow the target with one transition, as AIS; an integer;
        ``None``: as ``n_mcmc_steps``);
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
        (default ``"auto"``, see :func:`pymc_crais.sample_ais`; where it falls back to the
        prior because the Laplace fit failed, with the ESS schedule (or CR-SMC without
        ``n_steps`` and ``delta``), the geometric path and no persistent sampling, two SMC
        chains of ``draws/4`` particles (at most 10 transitions a stage) run from the prior first and, when they take at least 8
        stages, a Student-t fitted to them (correlations shrunk) mixed half
        and half with the prior is the start if its weights' k̂ is below 1:
        ``init_choice == "annealed"``, docs/algorithms.md, "The annealed start"),
        ``init_kwargs``; ``conditional_start`` (default ``True``: where ``init="auto"``
        found no usable Laplace fit, or one with heavy-tailed weights, and the model has a
        latent block given a few hyperparameters, with the default ESS schedule (or CR-SMC
        without ``n_steps`` and ``delta``), the run may
        be one importance stage from the conditional-Laplace start — beside a Laplace fit
        only where its pilot predicts ``target_mcse`` — ``init_choice ==
        "conditional_laplace"``, docs/algorithms.md, "The conditional-Laplace start";
        ``False`` keeps the rules without it); ``kernel_kwargs`` (a dict of the kernel's own
        options);
        ``max_step``, ``min_step``, ``max_steps``; ``backend``, ``compile_kwargs``,
        ``mp_ctx``, ``executor``, ``memory_budget``, ``scale_shift``; ``path``
        (``"geometric"`` default, or ``"moment_averaging"``) and ``path_kwargs``, as in
        :func:`pymc_crais.sample_ais`; ``reparameterize`` (``"none"`` default, or
        ``"noncentred"``: latent Normal/Student-t variables whose location or scale depends
        on other free variables are sampled as ``μ + σ z``, same evidence; the output keeps
        them as deterministics and adds ``<name>_noncentred``, see
        :mod:`pymc_crais.samplers.engine.noncentre`).

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
    (:class:`~pymc_crais.samplers.engine.anneal_chain.AnnealPlan`). Same arguments."""
    t_start = time.perf_counter()
    if start is not None:
        raise ValueError(
            "start= is not supported: log Z needs exact draws from the initial distribution; "
            "use init= ('auto', 'prior', 'laplace' or a Gaussian) instead"
        )
    st = SMCSettings.from_kwargs(kernel_kwargs)
    schedule, alpha, delta, n_steps = st.schedule, st.alpha, st.delta, st.n_steps
    is_cr = st.constant_rate
    max_step, min_step = st.max_step, st.min_step
    make_path(alpha, 0.0)
    path, path_kwargs = check_path(st.path, alpha, schedule, st.path_kwargs)
    persistent = check_persistent(st.persistent, schedule, st.waste_free, path)
    sched: Schedule | None
    if is_cr:
        delta = check_rate(delta)
        sched = None  # built once c and delta are known
    else:  # ESS / CESS at ρ = threshold, or a fixed schedule
        n = DEFAULT_N_STEPS if n_steps is None else n_steps
        sched = schedule.build(n, None, st.threshold, max_step, min_step)
    options = RunOptions(
        model=model,
        draws=draws,
        chains=chains,
        cores=cores,
        kernel=kernel,
        kernel_kwargs=st.kernel_kwargs,
        init=st.init,
        init_kwargs=st.init_kwargs,
        random_seed=random_seed,
        backend=st.backend,
        compile_kwargs=st.compile_kwargs,
        idata_kwargs=idata_kwargs,
        n_mcmc_steps=st.n_mcmc_steps if not isinstance(st.n_mcmc_steps, str) else 0,
        progressbar=progressbar,
        return_inferencedata=return_inferencedata,
        mp_ctx=st.mp_ctx,
        executor=st.executor,
        memory_budget=st.memory_budget,
        resamples=True,
        reparameterize=st.reparameterize,
    )
    setup = prepare(options)
    attrs = {
        "method": "smc",
        "path": make_path(alpha, 0.0).name,
        "alpha": float(alpha),
        **setup.attrs,
        **(sched.describe() if sched is not None else {}),
        "n_mcmc_steps": str(st.n_mcmc_steps),
        "idle_mcmc_steps": str(st.resolved_idle_mcmc_steps(persistent)),
        "max_mcmc_steps": int(st.max_mcmc_steps),
        "waste_free": int(st.waste_free),
        "resample": st.resample,
        "resample_threshold": st.resample_threshold,
        "resampler": st.resampler,
        **({"persistent": persistent} if persistent else {}),
    }
    n_annealed = 0
    conditional = annealed = False
    geometric = path == "geometric" and not persistent and float(alpha) == 0.0
    plain = geometric and not is_cr  # the ESS rule's one-stage test is not CR-SMC's
    cr_auto = st.cr_sized
    # the starts below: the ESS rule's and CR-SMC's (pm.sample_smc(kernel=pmc.CRSMC) starts
    # where pmc.sample_smc() starts)
    if plain or (geometric and cr_auto):
        if st.tries_conditional_start():
            # latent-Gaussian structure: one importance stage from the conditional-Laplace start,
            # beside a Laplace fit only where its pilot predicts the target error
            target = st.target_mcse or DEFAULT_TARGET_MCSE
            setup, found, _ = one_step_conditional_start(setup, target, no_fit_factor=float("inf"))
            attrs.update(found)
            n_annealed = found.get("n_logp_evals_conditional_start", 0)
            conditional = found.get("init_choice") == "conditional_laplace"
        if not conditional:
            # a funnel's prior start: a smaller SMC run may find a start near the posterior
            setup, found = smc_annealed_start(setup)
            attrs.update(found)
            annealed = bool(found)  # a funnel's prior start: its weights are far already
            n_annealed += found.get("n_logp_evals_annealed_start", 0)
    one_step = False
    # the ESS rule as the user left it (or any adaptive rule given a target_mcse): a start
    # whose weights already meet the target needs no tempering
    ess_one_step = (
        plain and not (conditional or annealed) and max_step is None and min_step is None
        and (st.default_ess or (schedule.adaptive and st.target_mcse is not None))
    )
    if (cr_auto and not (conditional or annealed)) or ess_one_step:
        # CR-SMC's default: one stage when the start's weights already meet the target
        target = DEFAULT_TARGET_MCSE if st.target_mcse is None else st.target_mcse
        start = start_length_point(setup)
        attrs.update(start.attrs, target_mcse=target)
        if start.point is not None:
            attrs["predicted_mcse"] = start.mcse
        one_step = start.meets(target)
    ess_one = one_step and not is_cr  # the ESS rule's one stage
    if one_step or conditional:
        c = 0.0
        sched = one_step_schedule()
        attrs.update(sched.describe(), c=c, scale_shift="fixed")
        attrs["n_logp_evals_pilot"] = attrs.get("n_logp_evals_start", 0) + n_annealed
    else:
        need_rate = is_cr and is_auto(delta)
        c, total = scale_shift_pilot(setup, alpha, st.scale_shift, attrs, need_rate=need_rate)
        attrs["n_logp_evals_pilot"] += attrs.get("n_logp_evals_start", 0) + n_annealed
        if is_cr:
            if need_rate:
                n = DEFAULT_N_STEPS if n_steps is None else n_steps
                delta = rate_for_steps(total, check_int(n, "n_steps", 1, "e.g. n_steps=100"))
            max_step = 0.125 if max_step is None else max_step
            sched = ConstantRateSchedule(
                delta, min_step=min_step or 0.0, max_step=max_step, cess_floor=CR_SMC_CESS_FLOOR
            )
            attrs.update(sched.describe())
    stages = persistent_stages(persistent, setup) if persistent else None
    capped = isinstance(st.n_mcmc_steps, str) and "max_mcmc_steps" not in kernel_kwargs
    if conditional and capped:  # (a fixed count has no cap)
        # its draws are already weighted posterior draws: the moves at τ = 1 only break up
        # the families that share a θ (CR-AIS's one-step run makes one transition)
        st = replace(st, max_mcmc_steps=CONDITIONAL_MAX_MCMC_STEPS)
        attrs["max_mcmc_steps"] = CONDITIONAL_MAX_MCMC_STEPS
    run_options = st.anneal_options(persistent, stages)
    if capped and not (persistent or st.waste_free):
        # at τ = 1 the weights, not the moves, make the posterior draws (AnnealOptions)
        run_options = replace(run_options, final_moves=Moves.fixed(MCMC_STEPS_AT_TARGET))
        if not conditional:  # (its families of several particles keep the capped moves)
            attrs["mcmc_steps_at_target"] = MCMC_STEPS_AT_TARGET
    built = build_path(setup, path, alpha, c, attrs, path_kwargs)
    # a second run from the refit start needs a path and stages that do not depend on q0
    # (after the ESS rules' one stage too: its restart would be one importance stage again,
    # from a refit whose weights pass a weaker test than the stage's)
    restart = path == "geometric" and not (persistent or conditional or ess_one)
    refit = "restart" if restart else "check"
    return AnnealPlan(setup, built, sched, "SMC", run_options, attrs, {}, t_start, refit)
