"""``sample_crais``: Constant-Rate AIS (Goshtasbpour et al., ICML 2023).

A pilot (scale shift, rate integral), a tuning run with the constant-rate rule (shared with
CR-SMC and the RTS ladder in :mod:`pymc_crais.samplers.tuning`), then fresh particles per
chain annealed on the tuned schedule with the tuning run's kernels replayed.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np

from ..core.schedules.adaptive import ConstantRateSchedule
from ..core.anneal import ParamsByTau
from ..core.paths import make_path
from ..core.schedules.rate_reference import reference_rate_for_steps
from ..core.schedules import FixedSchedule, interpolate_schedule
from ..warnings import MaxStepsWarning, user_stacklevel
from .engine.anneal_chain import AnnealPlan
from .engine.options import RunOptions, check_int, check_rate, is_auto
from .engine.pipeline import prepare
from .engine.runner import single_threaded_blas
from .engine.tuning import constant_rate_tuning, path_pilot, rate_for_steps

__all__ = ["FINAL_ACCEPTANCE", "MAX_FINAL_FACTOR", "final_transitions", "plan_crais"]
__all__ += ["sample_crais"]

FINAL_ACCEPTANCE = 0.5
MAX_FINAL_FACTOR = 4
FALLBACK_STEPS = 200
"""Steps of the linear fallback schedule when ``n_steps=None`` (``sample_ais``'s default)."""


def final_transitions(acceptance, n_mcmc_steps: int) -> int:
    """Transitions per level of the final run under ``final_mcmc_steps="auto"``.

    ``n_mcmc_steps`` times ``ceil(FINAL_ACCEPTANCE / ā)``, ``ā`` the tuning run's mean
    acceptance per transition, at most ``MAX_FINAL_FACTOR`` times ``n_mcmc_steps``: where the
    kernel accepts fewer than half of its proposals, each level gets the transitions that
    move every particle about half a time in expectation (fixed before the final particles
    exist, so the estimate stays unbiased for ``Z``).

    Parameters
    ----------
    acceptance : array_like
        The tuning run's acceptance rate per stage.
    n_mcmc_steps : int
        Transitions per stage of the tuning run.

    Returns
    -------
    int
    """
    a = np.asarray(acceptance, dtype=float)
    a = a[np.isfinite(a)]
    mean = float(a.mean()) if a.size else 1.0
    if mean >= FINAL_ACCEPTANCE:
        return int(n_mcmc_steps)
    factor = MAX_FINAL_FACTOR
    if mean > 0:
        factor = min(MAX_FINAL_FACTOR, math.ceil(FINAL_ACCEPTANCE / mean))
    return int(n_mcmc_steps) * int(factor)


@single_threaded_blas
def sample_crais(
    draws: int = 1000,
    alpha: float = 0.0,
    delta="auto",
    n_steps: int | None = 200,
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

    1. **Pilot** (only when needed): a cheap geometric AIS run with ``min(draws, 256)``
       particles on a 32-step exponential schedule. It fixes the scale shift ``c`` of a
       power-mean path (its ``log Ẑ``) and, for ``delta="auto"``, measures the integral
       ``T`` of the constant-rate objective along the path, so that ``δ = T / n_tune_steps``
       gives a tuning run of about ``n_tune_steps`` steps. For ``alpha != 0`` it always
       runs: its stages, pooled, give the constant-rate rule's statistics (the particles
       of a power-mean path miss the mass of a target much narrower than ``q0``), and
       ``delta="auto"`` is found on them by bisection.
    2. **Tuning run**: ``tune_draws`` particles annealed with the constant-rate rule: each
       step lowers the α-divergence to the target by about δ. Its schedule is kept.
    3. **Final run**: per chain, *fresh* particles annealed on that fixed schedule —
       interpolated to ``n_steps`` steps when ``n_steps`` is given (the schedule's shape is
       stable across δ) — giving the reported, unbiased-for-``Z`` estimate.

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
    draws : int, default 1000
        Particles per chain in the final run.
    alpha : float, default 0.0
        Power-mean exponent (0 geometric / inverse KL, 1 arithmetic; negative allowed).
        With ``alpha != 0`` start near the posterior (``init="laplace"``): from the prior,
        a posterior much narrower than it is never reached by the particles of a
        power-mean path, whatever the schedule (docs/paths.md).
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
        the final schedule) plus ``tune_tau`` (the tuned schedule, dim ``tune_stage``) and
        attributes ``delta``, ``n_tune_steps``, ``n_logp_evals_tune``,
        ``n_logp_evals_pilot``, ``schedule`` (``"constant_rate"``, or ``"linear"`` with the
        reason in ``schedule_fallback``; empty when the tuned schedule was used).
        ``n_logp_evals`` counts the final run only.
    """
    return plan_crais(
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
    ).run()


def plan_crais(
    draws: int = 1000,
    alpha: float = 0.0,
    delta="auto",
    n_steps: int | None = 200,
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
) -> AnnealPlan:
    """:func:`sample_crais`'s checks, set-up, pilot and tuning run: the final run, ready
    for its chains (:class:`~pymc_crais.samplers.anneal_chain.AnnealPlan`). Same arguments."""
    t_start = time.perf_counter()
    make_path(alpha, 0.0)
    delta = check_rate(delta)
    auto = is_auto(delta)
    if n_steps is not None:
        n_steps = check_int(n_steps, "n_steps", 1, "or n_steps=None to keep the tuned schedule")
    if n_tune_steps is None:
        n_tune_steps = max(32, n_steps // 4) if n_steps is not None else 64
    n_tune_steps = check_int(n_tune_steps, "n_tune_steps", 2, "e.g. n_tune_steps=64")
    max_steps = check_int(max_steps, "max_steps", 1, "e.g. max_steps=10000")
    if not is_auto(final_mcmc_steps):
        final_mcmc_steps = check_int(
            final_mcmc_steps, "final_mcmc_steps", 1, 'e.g. final_mcmc_steps="auto" or 1'
        )
    rule = {"variance": variance, "min_step": min_step, "max_step": max_step, "v_min": v_min}
    ConstantRateSchedule(1.0, **rule)  # validates the rule's options before compiling
    options = RunOptions.from_arguments(locals())
    setup = prepare(options)
    if tune_draws is None:
        tune_draws = setup.draws
    else:
        tune_draws = check_int(tune_draws, "tune_draws", 2, "e.g. tune_draws=512")
    attrs = {
        "method": "crais",
        "path": make_path(alpha, 0.0).name,
        "alpha": float(alpha),
        **setup.attrs,
    }

    # 1. pilot: c for α ≠ 0 and the rate integral for delta="auto"
    # (for α ≠ 0 the rule's statistics come from the pilot's stages, pooled: issue 15)
    pilot = path_pilot(
        setup, alpha, scale_shift, attrs, need_rate=auto, need_reference=float(alpha) != 0.0
    )
    c, total = pilot.c, pilot.total
    path = make_path(alpha, c)

    # 2. tuning run; with delta="auto" its length is brought near n_tune_steps (on the
    # pilot's reference the rule's schedule is known before the run: δ found by bisection)
    if auto and pilot.reference is not None:
        rate = reference_rate_for_steps(
            pilot.reference, path, n_tune_steps, tol=0.02, min_dtau=min_step, max_dtau=max_step, v_min=v_min
        )
    else:
        rate = rate_for_steps(total, n_tune_steps) if auto else delta
    tuning = constant_rate_tuning(
        setup,
        path,
        rate,
        draws=tune_draws,
        max_steps=min(max_steps, 4 * n_tune_steps) if auto else max_steps,
        n_target=n_tune_steps if auto else None,
        n_mcmc_steps=n_mcmc_steps,
        reference=pilot.reference,
        warn_at_cap=not auto,  # with delta="auto" a capped run is replaced (below)
        label="CR-AIS tuning",
        **rule,
    )
    tres = tuning.result
    tuned = tuning.schedule
    fallback = ""
    if auto and tres.hit_max_steps:
        n_linear = n_steps if n_steps is not None else FALLBACK_STEPS
        reached = float(tuned[-2])
        fallback = (
            f"the constant-rate tuning run reached its cap of {tuned.size - 1} steps at "
            f"tau={reached:.3g}, even with delta rescaled {tuning.n_attempts - 1} times"
        )
        warnings.warn(
            f"CR-AIS: {fallback} (the rule's steps crawl where the particles' log-likelihood "
            f"varies enormously, e.g. from a heavy-tailed start), so the final run used a "
            f"linear schedule of {n_linear} steps with kernels tuned on its own particles "
            "(sample_ais's default) instead of the tuned one. Compare with pmc.sample_smc, "
            "or pass delta= (and max_steps=) to tune the rate yourself.",
            MaxStepsWarning,
            stacklevel=user_stacklevel(),
        )
        final = np.linspace(0.0, 1.0, n_linear + 1)
    else:
        final = tuned if n_steps is None else interpolate_schedule(tuned, n_steps)
    attrs.update(
        {
            "schedule": "linear" if fallback else "constant_rate",
            "schedule_fallback": fallback,
            "delta": tuning.delta,
            "delta_mode": "auto" if auto else "given",
            "variance": variance,
            "min_step": float(min_step or 0.0),
            "max_step": float(max_step if max_step is not None else 1.0),
            "v_min": float(v_min),
            "rate_statistics": "pilot_reference" if pilot.reference is not None else "particles",
            "n_tune_steps": int(tuned.size - 1),
            "n_tune_steps_target": int(n_tune_steps),
            "n_tune_attempts": tuning.n_attempts,
            "tune_draws": tune_draws,
            "tune_log_marginal_likelihood": tres.log_marginal_likelihood,
            "tune_hit_max_steps": tres.hit_max_steps,
            "n_logp_evals_tune": tuning.n_logp_evals,
            "interpolated": n_steps is not None and not fallback,
            "n_steps": int(final.size - 1),
        }
    )

    # 3. final run: fresh particles per chain on the fixed schedule
    if is_auto(final_mcmc_steps):
        final_mcmc_steps = final_transitions(tres.stages["acceptance_rate"], int(n_mcmc_steps))
    attrs["final_mcmc_steps"] = int(final_mcmc_steps)
    replay_kernel = bool(replay_kernel) and not fallback
    replay = ParamsByTau(tres.stages["tau"], tres.kernel_params) if replay_kernel else None
    attrs["replay_kernel"] = replay_kernel
    extra = {"tune_tau": (("tune_stage",), tres.stages["tau"])}
    task_kwargs = dict(
        n_mcmc_steps=int(final_mcmc_steps), max_steps=int(final.size), kernel_params=replay
    )
    schedule = FixedSchedule(final, name="linear" if fallback else "constant_rate")
    return AnnealPlan(setup, path, schedule, "CR-AIS", task_kwargs, attrs, extra, t_start)
