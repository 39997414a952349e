"""``sample_crais``: Constant-Rate AIS (Goshtasbpour et al., ICML 2023).

The start's importance weights (one step, when they meet ``target_mcse``), else a pilot
(scale shift, rate integral), a tuning run with the constant-rate rule (shared with CR-SMC
and the RTS ladder in :mod:`pymc_crais.samplers.engine.tuning`), then fresh particles per
chain annealed on the tuned schedule, of the length the target needs, with the tuning
run's kernels replayed. The run-level work is
:func:`pymc_crais.samplers.engine.crais_plan.plan_crais`.
"""

from __future__ import annotations

from .engine.crais_plan import CRAISSettings, plan_crais
from .engine.runner import single_threaded_blas
from .engine.start_point import DEFAULT_TARGET_MCSE

__all__ = ["sample_crais"]


@single_threaded_blas
def sample_crais(
    draws: int = 2000,
    alpha: float = 0.0,
    delta="auto",
    n_steps="auto",
    kernel="auto",
    chains: int | None = None,
    cores: int | None = None,
    random_seed=None,
    progressbar: bool = True,
    return_inferencedata: bool = True,
    idata_kwargs: dict | None = None,
    compile_kwargs: dict | None = None,
    *,
    model=None,
    init="auto",
    init_kwargs: dict | None = None,
    n_tune_steps: int | None = None,
    tune_draws: int | None = None,
    variance: str = "unweighted",
    min_step: float | None = 0.0,
    max_step: float | None = 0.125,
    v_min: float = 1e-3,
    target_mcse: float = DEFAULT_TARGET_MCSE,
    max_steps: int = 10_000,
    n_mcmc_steps: int = 1,
    final_mcmc_steps="auto",
    kernel_kwargs: dict | None = None,
    replay_kernel: bool = True,
    scale_shift: float | str | None = None,
    backend: str | None = None,
    mp_ctx=None,
    executor=None,
    memory_budget: float | None = None,
):
    """Constant-Rate AIS (Goshtasbpour et al., ICML 2023): tune a schedule, then re-run.

    0. **The start's weights** (``n_steps="auto"``, the default): the importance weights of
       ``min(max(draws, 256), 1000)`` run-level draws of ``q0`` measure the run of one step.
       When they predict a pooled Monte Carlo error of ``log Ẑ`` at most ``target_mcse``
       (and their Pareto k̂ is at most 1/2), the final run is that one step — importance
       sampling from the automatic start, then the transitions at τ = 1 — and steps 1–2
       are skipped: on a posterior the Laplace start describes well, annealing buys little.
       That run is :func:`sample_smc`'s one stage: the same particles by default and, with
       ``kernel="auto"`` on a continuous model, the same moves at τ = 1 (``"hmc_final_imh"``,
       after the weights). Where the automatic start is poor and the model has a latent
       block given a few hyperparameters (with ``alpha=0``), the conditional-Laplace start
       of :func:`sample_smc` is measured first and, when its pilot predicts
       ``target_mcse`` (3 × it where the Laplace fit failed: the other starts miss there),
       is that one step (``init_choice == "conditional_laplace"``, docs/algorithms.md).
    1. **Pilot** (only when needed): a cheap geometric AIS run with ``min(draws, 256)``
       particles on a 32-step exponential schedule. It fixes the scale shift ``c`` of a
       power-mean path (its ``log Ẑ``) and, for ``delta="auto"``, measures the integral
       ``T`` of the constant-rate objective along the path, so that ``δ = T / n_tune_steps``
       gives a tuning run of about ``n_tune_steps`` steps. For ``alpha != 0`` it always
       runs: its stages, pooled, give the constant-rate rule's statistics (the particles
       of a power-mean path miss the mass of a target much narrower than ``q0``), and
       ``delta="auto"`` is found on them by bisection.
    2. **Tuning run**: ``tune_draws`` particles annealed with the constant-rate rule: each
       step lowers the α-divergence to the target by about δ. Its schedule is kept. With
       ``delta="auto"`` an attempt far from ``n_tune_steps`` steps is retried with δ
       rescaled; under ``n_steps="auto"`` an attempt that reached τ = 1 within its cap is
       kept, off that window, when a measurement near ``n_tune_steps`` could no longer
       shorten the final run of step 3: the target is met within ``2·n_tune_steps``
       steps, or out of reach at 200 steps even if the error fell as ``1/K`` beyond it.
    3. **Final run**: per chain, *fresh* particles annealed on that fixed schedule,
       interpolated to ``K`` steps (the schedule's shape is stable across δ), giving the
       reported, unbiased-for-``Z`` estimate. With ``n_steps="auto"``, ``K`` is the fewest
       of 1, 2, 3, 4, 6, …, 200 steps whose error is predicted to meet ``target_mcse``: the
       weights' relative variance ``r`` measured at one step (the start) and at the tuning
       run's length, interpolated linearly in log–log and extrapolated no faster than
       ``1/K`` (:mod:`pymc_crais.core.schedules.run_length`); 200 when the target is out of reach.
       The choice is made on run-level particles only, so the final estimate stays unbiased
       for ``Z``; the reported MCSE is measured on the final run, not predicted.

    With ``delta="auto"``, a tuning run that still reaches its cap of ``4·n_tune_steps``
    steps after δ was rescaled has no usable schedule: the rule's steps crawl where the
    particles' variance of the log-likelihood is huge (a heavy-tailed start: on
    ``hier_noncentered`` it spent 199 steps below τ = 1e-5 and jumped to 1, and the final
    run was off by 0.4–0.8 nat with an ESS of 1 %). The final run then takes
    :func:`sample_ais`'s default instead — a linear schedule of ``n_steps`` steps, kernels
    tuned on its own particles — with a :class:`~pymc_crais.warnings.MaxStepsWarning`
    that says so (``sample_stats`` attribute ``schedule_fallback``).

    Parameters
    ----------
    draws : int, default 2000
        Particles per chain in the final run (as :func:`sample_smc`; 1000 before
        2026-11-27, half the particles of the same one-step run for about the same wall
        time).
    alpha : float, default 0.0
        Power-mean exponent (0 geometric / inverse KL, 1 arithmetic; negative allowed).
        With ``alpha != 0`` start near the posterior (``init="laplace"``): from the prior,
        a posterior much narrower than it is never reached by the particles of a
        power-mean path, whatever the schedule (docs/paths.md).
    delta : float or "auto", default "auto"
        Rate δ > 0 of the tuning run (steps ∝ 1/δ; problem-scale dependent). ``"auto"``
        derives it from the pilot so the tuning run has about ``n_tune_steps`` steps.
    n_steps : "auto", int or None, default "auto"
        Steps of the final run: ``"auto"`` the fewest predicted to meet ``target_mcse``
        (step 0 and 3 above); a number, the tuned schedule interpolated to that many steps
        (200 was the default before 2026-11-27); ``None``, the tuned schedule as it is.
    target_mcse : float, default 0.02
        With ``n_steps="auto"``: the Monte Carlo error of the pooled ``log Ẑ`` (nats) the
        final run is sized for. Smaller costs more steps (at most 200); e.g. 0.005 for a
        Bayes factor between very close models.
    n_tune_steps : int, optional
        Target length of the tuning run for ``delta="auto"`` (default 32 with
        ``n_steps="auto"``, else ``max(32, n_steps // 4)``, or 64 when ``n_steps`` is None).
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
    final_mcmc_steps : int or "auto", default "auto"
        Transitions per level of the final run. ``"auto"``: ``n_mcmc_steps``, or up to 4 times
        as many where the tuning run's kernel accepted on average fewer than half of its
        proposals (:func:`final_transitions`; on the discrete switchpoint model IMH's fixed
        replayed proposal accepts 5–60 %, and one transition per level left final weights
        with an ESS of 3–7 % and an MCSE of 0.14 nat; benchmarks/reports/validation.md).
    replay_kernel : bool, default True
        The final run re-uses the tuning run's kernel parameters (step size, mass matrix or
        proposal covariance, looked up by τ) instead of tuning them on its own particles.
        Kernels fixed before the final particles exist keep the estimate unbiased for ``Z``;
        population tuning biases ``log Ẑ`` upwards (+0.16 ± 0.05 nats on a d = 5 regression
        with 500 particles; docs/algorithms.md).

    Other Parameters
    ----------------
    kernel, chains, cores, random_seed, progressbar, return_inferencedata, idata_kwargs, compile_kwargs, model, init, init_kwargs, n_mcmc_steps, kernel_kwargs, scale_shift, backend, mp_ctx, executor, memory_budget
        As in :func:`sample_ais`.

    Returns
    -------
    xarray.DataTree or SamplerResult
        The final run's output (``log_marginal_likelihood`` per chain, per-stage stats on
        the final schedule) plus ``tune_tau`` (the tuned schedule, dim ``tune_stage``; absent
        when no tuning run was made) and
        attributes ``delta``, ``n_tune_steps``, ``n_logp_evals_tune``,
        ``n_logp_evals_pilot`` (the start's weights included), ``schedule``
        (``"constant_rate"``; ``"one_step"`` when the start met the target; ``"linear"``
        with the reason in ``schedule_fallback``, empty otherwise), and for
        ``n_steps="auto"`` ``target_mcse``, ``predicted_mcse``, ``start_relative_variance``,
        ``start_pareto_k``, ``tune_relative_variance`` and ``length_reason``.
        ``n_logp_evals`` counts the final run only.
    """
    settings = CRAISSettings(
        draws=draws,
        alpha=alpha,
        delta=delta,
        n_steps=n_steps,
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
        n_tune_steps=n_tune_steps,
        tune_draws=tune_draws,
        variance=variance,
        min_step=min_step,
        max_step=max_step,
        v_min=v_min,
        target_mcse=target_mcse,
        max_steps=max_steps,
        n_mcmc_steps=n_mcmc_steps,
        final_mcmc_steps=final_mcmc_steps,
        kernel_kwargs=kernel_kwargs,
        replay_kernel=replay_kernel,
        scale_shift=scale_shift,
        backend=backend,
        mp_ctx=mp_ctx,
        executor=executor,
        memory_budget=memory_budget,
    )
    return plan_crais(settings).run()
