"""CR-AIS's run-level work: checks, set-up, the start's weights, pilot and tuning run, and
the final run's schedule and kernels (:func:`plan_crais`), for :func:`pymc_crais.sample_crais`
and the ``pm.sample_smc`` kernel :class:`pymc_crais.CRAIS`.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, replace

import numpy as np

from ...core.anneal import AnnealOptions, ParamsByTau
from ...core.kernels import make_kernel
from ...core.paths import make_path
from ...core.schedules import FixedSchedule, interpolate_schedule
from ...core.schedules.adaptive import ConstantRateSchedule
from ...core.schedules.rate_reference import reference_rate_for_steps
from ...core.schedules.run_length import (
    LengthPoint,
    choose_length,
    length_settled,
    relative_variance,
)
from ...warnings import MaxStepsWarning, user_stacklevel
from .anneal_chain import AnnealPlan
from .annealed_start import anneal_if_far
from .conditional_start import one_step_conditional_start
from .kernel_choice import one_step_kernel
from .options import RunArguments, RunOptions, check_int, check_rate, is_auto
from .pipeline import kernel_attributes, prepare
from .start_point import check_target_mcse, one_step_schedule, start_length_point
from .tuning import constant_rate_tuning, path_pilot, rate_for_steps

__all__ = [
    "FINAL_ACCEPTANCE",
    "MAX_FINAL_FACTOR",
    "REFIT",
    "CRAISSettings",
    "attempt_point",
    "final_transitions",
    "plan_crais",
]

FINAL_ACCEPTANCE = 0.5
MAX_FINAL_FACTOR = 4
FALLBACK_STEPS = 200
"""Steps of the linear fallback schedule when ``n_steps`` is not a number (``sample_ais``'s
default)."""
AUTO_TUNE_STEPS = 32
"""Target length of the tuning run under ``n_steps="auto"``."""
MAX_AUTO_STEPS = 200
"""The longest final run ``n_steps="auto"`` chooses."""
REFIT = "check"
"""CR-AIS's posterior refit check (:mod:`~pymc_crais.samplers.engine.posterior_refit`): the
check and its record (flag ``refit``; :func:`pymc_crais.log_marginal_likelihood` pools its
importance estimate as for ``sample_smc``), without ``sample_smc``'s second run: CR-AIS's
schedule and scale shift are tuned to its start, so a run from the fitted start would need a
tuning run of its own."""


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


def attempt_point(attempt) -> LengthPoint:
    """The length rule's measured point of a tuning attempt (a run to τ = 1)."""
    return LengthPoint(int(attempt.n_stages), relative_variance(attempt.log_weights))


def _one_step_setup(setup):
    """``setup`` with the one-step run's kernel (:func:`one_step_kernel`), or as it is."""
    choice = one_step_kernel(setup.options.kernel, setup.options.kernel_kwargs, setup.attrs)
    if choice is None:
        return setup
    name, kernel_attrs = choice
    mutation = make_kernel(name)
    attrs = {k: v for k, v in setup.attrs.items() if not k.startswith("kernel")}
    attrs.update(
        kernel_attributes(mutation),
        **kernel_attrs,
    )
    return replace(setup, kernel=mutation, options=replace(setup.options, kernel=name), attrs=attrs)


def _one_step_plan(setup, alpha, attrs: dict, mcse: float, final_mcmc_steps, t_start) -> AnnealPlan:
    """The final run when the start's weights meet the target: importance sampling from
    ``q0`` (one step, τ: 0 → 1), then the stage's transitions at τ = 1 (after the weights,
    so tuning the kernel on the particles there leaves the estimate unbiased)."""
    n_mcmc = setup.options.n_mcmc_steps if is_auto(final_mcmc_steps) else final_mcmc_steps
    setup = _one_step_setup(setup)
    for key in [k for k in attrs if k.startswith("kernel")]:
        del attrs[key]
    attrs.update({k: v for k, v in setup.attrs.items() if k.startswith("kernel")})
    nan = float("nan")
    attrs.update(
        {
            "c": 0.0,
            "scale_shift": "fixed",
            "n_logp_evals_pilot": attrs["n_logp_evals_start"],
            "schedule": "one_step",
            "schedule_fallback": "",
            "delta": nan,
            "delta_mode": "unused",
            "rate_statistics": "unused",
            "n_tune_steps": 0,
            "n_tune_steps_target": 0,
            "n_tune_attempts": 0,
            "tune_draws": 0,
            "tune_log_marginal_likelihood": nan,
            "tune_hit_max_steps": False,
            "n_logp_evals_tune": 0,
            "interpolated": False,
            "n_steps": 1,
            "final_mcmc_steps": int(n_mcmc),
            "replay_kernel": False,
            "predicted_mcse": mcse,
            "length_reason": "the start's importance weights are predicted to meet target_mcse",
        }
    )
    options = AnnealOptions.from_settings(n_mcmc_steps=int(n_mcmc), max_stages=2)
    schedule = one_step_schedule()
    return AnnealPlan(
        setup, make_path(alpha, 0.0), schedule, "CR-AIS", options, attrs, {}, t_start, REFIT
    )


@dataclass(frozen=True)
class CRAISSettings(RunArguments):
    """Every argument of :func:`pymc_crais.sample_crais`, as given or defaulted there (its
    signature is the one place the defaults are written; the ``pm.sample_smc`` kernel
    :class:`pymc_crais.CRAIS` binds its arguments to that signature): built once per call
    and passed whole to :func:`plan_crais`."""

    delta: float | str
    n_steps: int | str | None
    n_tune_steps: int | None
    tune_draws: int | None
    variance: str
    min_step: float | None
    max_step: float | None
    v_min: float
    target_mcse: float
    max_steps: int
    final_mcmc_steps: int | str
    replay_kernel: bool


def plan_crais(settings: CRAISSettings) -> AnnealPlan:
    """:func:`sample_crais`'s checks, set-up, pilot and tuning run: the final run, ready
    for its chains (:class:`~pymc_crais.samplers.engine.anneal_chain.AnnealPlan`)."""
    s = settings
    t_start = time.perf_counter()
    alpha = s.alpha
    delta = s.delta
    n_steps = s.n_steps
    n_tune_steps = s.n_tune_steps
    tune_draws = s.tune_draws
    variance = s.variance
    min_step = s.min_step
    max_step = s.max_step
    v_min = s.v_min
    target_mcse = s.target_mcse
    max_steps = s.max_steps
    n_mcmc_steps = s.n_mcmc_steps
    final_mcmc_steps = s.final_mcmc_steps
    replay_kernel = s.replay_kernel
    scale_shift = s.scale_shift
    make_path(alpha, 0.0)
    delta = check_rate(delta)
    auto = is_auto(delta)
    auto_length = is_auto(n_steps)
    if auto_length:
        target_mcse = check_target_mcse(target_mcse)
    elif n_steps is not None:
        n_steps = check_int(
            n_steps, "n_steps", 1, 'or n_steps="auto" (from target_mcse), or None to keep the tuned schedule'
        )
    if n_tune_steps is None:
        if auto_length:
            n_tune_steps = AUTO_TUNE_STEPS
        else:
            n_tune_steps = max(32, n_steps // 4) if n_steps is not None else 64
    n_tune_steps = check_int(n_tune_steps, "n_tune_steps", 2, "e.g. n_tune_steps=64")
    max_steps = check_int(max_steps, "max_steps", 1, "e.g. max_steps=10000")
    if not is_auto(final_mcmc_steps):
        final_mcmc_steps = check_int(
            final_mcmc_steps, "final_mcmc_steps", 1, 'e.g. final_mcmc_steps="auto" or 1'
        )
    rule = {"variance": variance, "min_step": min_step, "max_step": max_step, "v_min": v_min}
    ConstantRateSchedule(1.0, **rule)  # validates the rule's options before compiling
    options = RunOptions.from_settings(s)
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
        "n_steps_mode": "auto" if auto_length else "given",
        "target_mcse": float(target_mcse) if auto_length else float("nan"),
        "predicted_mcse": float("nan"),
        "tune_relative_variance": float("nan"),
        "length_reason": "",
        "variance": variance,
        "min_step": float(min_step or 0.0),
        "max_step": float(max_step if max_step is not None else 1.0),
        "v_min": float(v_min),
    }

    # 0. n_steps="auto": the start's own importance weights are the run of one step; when
    # they already meet the target, that is the final run (no pilot, no tuning run)
    points: list[LengthPoint] = []
    if auto_length:
        if float(alpha) == 0.0:  # latent-Gaussian structure: one step from that start
            setup, found, mcse = one_step_conditional_start(setup, target_mcse)
            attrs.update(found)
            if mcse is not None:
                attrs["n_logp_evals_start"] = found["n_logp_evals_conditional_start"]
                return _one_step_plan(setup, alpha, attrs, mcse, final_mcmc_steps, t_start)
        # far from the posterior, an SMC run may find a closer start (annealed_start)
        setup, start, found = anneal_if_far(setup, start_length_point(setup), target_mcse)
        attrs.update(start.attrs, **found)
        if found.get("init_choice") == "annealed":  # a plain Student-t replaced the first
            attrs.pop("init_defensive_weight", None)
        if start.point is not None:
            points.append(start.point)
        if start.meets(target_mcse):
            return _one_step_plan(setup, alpha, attrs, start.mcse, final_mcmc_steps, t_start)

    # 1. pilot: c for α ≠ 0 and the rate integral for delta="auto"
    # (for α ≠ 0 the rule's statistics come from the pilot's stages, pooled: issue 15)
    pilot = path_pilot(
        setup, alpha, scale_shift, attrs, need_rate=auto, need_reference=float(alpha) != 0.0
    )
    c, total = pilot.c, pilot.total
    attrs["n_logp_evals_pilot"] += attrs.get("n_logp_evals_start", 0)
    path = make_path(alpha, c)

    # 2. tuning run; with delta="auto" its length is brought near n_tune_steps (on the
    # pilot's reference the rule's schedule is known before the run: δ found by bisection)
    if auto and pilot.reference is not None:
        rate = reference_rate_for_steps(
            pilot.reference, path, n_tune_steps, tol=0.02, min_dtau=min_step, max_dtau=max_step, v_min=v_min
        )
    else:
        rate = rate_for_steps(total, n_tune_steps) if auto else delta
    enough = None
    if auto_length:
        # an attempt off its length window that reached τ = 1 within the cap is kept when
        # a point near n_tune_steps could no longer shorten the final run (length_settled):
        # the choice below, from the start and that attempt, is then made already
        def enough(res) -> bool:
            pts = [*points, attempt_point(res)]
            short = 2 * n_tune_steps
            return length_settled(
                pts, setup.draws, setup.chains, target_mcse, MAX_AUTO_STEPS, short, n_tune_steps
            )

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
        enough=enough,
        **rule,
    )
    tres = tuning.result
    tuned = tuning.schedule
    fallback = ""
    if auto and tres.hit_max_steps:
        n_linear = n_steps if isinstance(n_steps, int) else FALLBACK_STEPS
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
    elif auto_length:
        points.append(attempt_point(tres))
        k, mcse = choose_length(points, setup.draws, setup.chains, target_mcse, MAX_AUTO_STEPS)
        attrs.update(
            tune_relative_variance=points[-1].r,
            predicted_mcse=mcse,
            length_reason=(
                f"the fewest steps predicted to meet target_mcse={target_mcse:g}"
                if mcse <= target_mcse
                else f"target_mcse={target_mcse:g} is predicted out of reach: the longest run"
            ),
        )
        final = interpolate_schedule(tuned, k)
    else:
        final = tuned if n_steps is None else interpolate_schedule(tuned, n_steps)
    attrs.update(
        {
            "schedule": "linear" if fallback else "constant_rate",
            "schedule_fallback": fallback,
            "delta": tuning.delta,
            "delta_mode": "auto" if auto else "given",
            "rate_statistics": "pilot_reference" if pilot.reference is not None else "particles",
            "n_tune_steps": int(tuned.size - 1),
            "n_tune_steps_target": int(n_tune_steps),
            "n_tune_attempts": tuning.n_attempts,
            "tune_draws": tune_draws,
            "tune_log_marginal_likelihood": tres.log_marginal_likelihood,
            "tune_hit_max_steps": tres.hit_max_steps,
            "n_logp_evals_tune": tuning.n_logp_evals,
            "interpolated": (auto_length or n_steps is not None) and not fallback,
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
    options = AnnealOptions.from_settings(
        n_mcmc_steps=int(final_mcmc_steps), max_stages=int(final.size), kernel_params=replay
    )
    schedule = FixedSchedule(final, name="linear" if fallback else "constant_rate")
    return AnnealPlan(setup, path, schedule, "CR-AIS", options, attrs, extra, t_start, REFIT)
