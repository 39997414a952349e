"""Pilot and tuning runs, shared by every sampler that needs them.

* the **pilot**: a cheap geometric AIS run that fixes the scale shift ``c`` of a power-mean
  path (its ``log Ẑ``) and, for the constant-rate rule with ``delta="auto"``, estimates the
  path's length ``T`` in the rule's units (so that ``δ = T / n`` gives about ``n`` steps);
* the **constant-rate tuning run**: particles annealed with the constant-rate rule, whose
  schedule CR-AIS re-uses for its final run and RTS as its temperature ladder; with a
  target length it rescales ``δ`` until the run has about that many steps.

Used by :func:`pymc_crais.sample_crais`, :func:`pymc_crais.sample_ais`,
:func:`pymc_crais.sample_smc`, :func:`pymc_crais.sample_rts` and the ``pm.sample_smc``
kernels :class:`pymc_crais.CRSMC` and :class:`pymc_crais.CRAIS`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...core.anneal import AnnealResult, anneal
from ...core.observers import LoopObserver
from ...core.paths import make_path
from ...core.schedules import FixedSchedule, exponential_schedule, make_fixed_schedule
from ...core.schedules.adaptive import ConstantRateSchedule, rate_statistics
from ...core.schedules.rate_reference import RateReference, reference_total_rate
from ...core.schedules.thermodynamic import fisher_metric, path_score, thermodynamic_schedule
from ...warnings import MaxStepsWarning
from .pipeline import RunSetup, fresh_kernel
from .progress import ChainProgress, stage_callback

__all__ = [
    "PILOT_DRAWS",
    "Pilot",
    "RateProbe",
    "RateTuning",
    "constant_rate_run",
    "constant_rate_tuning",
    "path_pilot",
    "pilot_run",
    "rate_for_steps",
    "rate_pilot_schedule",
    "scale_shift_pilot",
    "thermodynamic_pilot",
]

PILOT_DRAWS = 256
"""Particles of a pilot run (fewer when the run has fewer)."""


def rate_pilot_schedule() -> FixedSchedule:
    """The pilot's schedule: 32 exponentially spaced steps from τ = 10⁻⁶."""
    return make_fixed_schedule(exponential_schedule(32, tau_min=1e-6))


class RateProbe(LoopObserver):
    """Records the constant-rate integrand along a pilot run on a fixed schedule.

    Parameters
    ----------
    alpha : float
        Power-mean exponent of the path the rate is wanted for.
    """

    def __init__(self, alpha: float):
        self.alpha = float(alpha)
        self.samples = []  # (tau, Δ array, log_weights array)

    def begin_stage(self, stage, tau, state, log_weights) -> None:
        """An observer of the loop (:class:`~pymc_crais.core.anneal.AnnealOptions`'s
        ``observers``): record ``(τ, Δ, log w)`` where each next τ is chosen."""
        self.samples.append((tau, state.delta.copy(), np.array(log_weights, dtype=float)))

    def reference(self, final=None) -> RateReference:
        """The recorded stages (plus ``final = (Δ, log w)`` at τ = 1) pooled into one
        weighted population (:meth:`RateReference.from_geometric_stages`)."""
        taus = [t for t, _, _ in self.samples]
        deltas = [d for _, d, _ in self.samples]
        log_ws = [lw for _, _, lw in self.samples]
        if final is not None:
            taus.append(1.0)
            deltas.append(np.asarray(final[0], dtype=float))
            log_ws.append(np.asarray(final[1], dtype=float))
        return RateReference.from_geometric_stages(taus, deltas, log_ws)

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
        taus, vals = [], []
        for tau, delta, log_w in self.samples:
            v, log_r = rate_statistics(delta, log_w, tau, path, weighted=False)
            taus.append(tau)
            vals.append(v * np.exp(min(self.alpha * log_r, 700.0)) / max(1.0 - tau, 1e-300))
        taus, vals = np.asarray(taus), np.asarray(vals)
        head = vals[0] * taus[1] if taus.size > 1 else vals[0]
        lt = np.log(taus[1:])
        body = np.trapezoid(vals[1:] * taus[1:], lt) if taus.size > 2 else 0.0
        # the last recorded τ is < 1; the integrand there covers the rest
        tail = vals[-1] * (1.0 - taus[-1]) if taus.size > 1 else 0.0
        return float(head + body + tail)


def pilot_run(rng, density, x0, kernel, schedule=None, probe: RateProbe | None = None):
    """A geometric AIS run of the particles ``x0`` (``schedule`` default:
    :func:`rate_pilot_schedule`), recorded by ``probe`` if given."""
    schedule = rate_pilot_schedule() if schedule is None else schedule
    observers = (probe,) if probe is not None else ()
    return anneal(rng, density, x0, make_path(0.0), schedule, kernel, observers=observers)


def rate_for_steps(total: float, n_steps: int) -> float:
    """The rate ``δ = T / n`` that gives about ``n`` constant-rate steps on a path of length
    ``T`` (1 when the pilot could not estimate ``T``)."""
    return max(total / n_steps, 1e-12) if np.isfinite(total) else 1.0


@dataclass(frozen=True)
class Pilot:
    """What the pilot gives a run.

    Attributes
    ----------
    c : float
        The scale shift of the path.
    total : float
        The path's length ``T`` in the constant-rate rule's units (NaN unless asked for).
    reference : RateReference or None
        For α ≠ 0, the pilot's stages pooled (the constant-rate rule's statistics).
    """

    c: float
    total: float
    reference: RateReference | None = None


def scale_shift_pilot(
    setup: RunSetup, alpha, scale_shift, attrs: dict, *, schedule=None, need_rate=False
) -> tuple[float, float]:
    """``(c, T)`` of :func:`path_pilot` (the scale shift and, if ``need_rate``, the path's
    length ``T``; ``T`` is NaN otherwise)."""
    pilot = path_pilot(setup, alpha, scale_shift, attrs, schedule=schedule, need_rate=need_rate)
    return pilot.c, pilot.total


def path_pilot(
    setup: RunSetup,
    alpha,
    scale_shift,
    attrs: dict,
    *,
    schedule=None,
    need_rate=False,
    need_reference=False,
    need_pool=False,
) -> Pilot:
    """The scale shift ``c`` of the path, the path's length ``T`` if ``need_rate``, and
    for α ≠ 0 the constant-rate rule's reference population.

    ``scale_shift`` is a float (``c`` as given), ``"pilot"`` (``c`` = the pilot's
    ``log Ẑ``) or ``None`` (0 for ``alpha = 0``, ``"pilot"`` otherwise). One pilot with
    ``min(draws, 256)`` particles serves all three, on ``schedule`` (default
    :func:`rate_pilot_schedule`); it runs only when one of them is needed. For α ≠ 0 with
    ``need_rate`` or ``need_reference`` its stages, pooled
    (:class:`~pymc_crais.core.schedules.rate_reference.RateReference`), give the rule's statistics and
    ``T``, whose estimate from the particles of the power-mean path itself misses the
    target's mass (issue 15). Records ``c``, ``scale_shift`` and ``n_logp_evals_pilot`` in
    ``attrs``. ``need_pool``: run the pilot and pool its stages whatever α.
    """
    if isinstance(scale_shift, str) and scale_shift != "pilot":
        raise ValueError(f"scale_shift must be a float, 'pilot' or None, got {scale_shift!r}")
    alpha = float(alpha)
    need_c = (scale_shift is None and alpha != 0.0) or scale_shift == "pilot"
    if not need_c and scale_shift is not None:
        c = float(scale_shift)
        if not np.isfinite(c):
            raise ValueError(f"scale_shift must be finite, got {scale_shift!r}")
    else:
        c = 0.0
    total, n_pilot, reference = float("nan"), 0, None
    want_reference = need_pool or (alpha != 0.0 and (need_rate or need_reference))
    if need_c or need_rate or want_reference:
        probe = RateProbe(alpha) if (need_rate or want_reference) else None
        before = setup.density.n_evals
        x0 = setup.draw(setup.aux_rng, min(setup.draws, PILOT_DRAWS))
        res = pilot_run(setup.aux_rng, setup.density, x0, fresh_kernel(setup), schedule, probe)
        n_pilot = setup.density.n_evals - before
        if need_c:
            c = res.log_marginal_likelihood
        if want_reference:
            reference = probe.reference(final=(res.state.delta, res.log_weights))
        if need_rate:
            if reference is not None:
                total = reference_total_rate(reference, make_path(alpha, c))
            else:
                total = probe.total_rate(res.log_marginal_likelihood, c)
    attrs.update(
        {"c": c, "scale_shift": "pilot" if need_c else "fixed", "n_logp_evals_pilot": n_pilot}
    )
    return Pilot(c, total, reference)


def thermodynamic_pilot(setup: RunSetup, alpha, scale_shift, n_steps: int, attrs: dict):
    """``(c, schedule)``: ``n_steps`` steps of equal thermodynamic length (seed 004).

    The pilot's stages, pooled (:class:`~pymc_crais.core.schedules.rate_reference.RateReference`),
    give the metric ``G(τ)`` (weighted variance of ``∂_τ log γ_τ``) of the path
    ``(alpha, c)`` on 64 exponentially spaced τ from 10⁻⁶;
    :func:`~pymc_crais.core.schedules.thermodynamic.thermodynamic_schedule` turns it into the
    schedule. For α ≠ 0 the metric at the two ends (where it can diverge) is not used.
    """
    pilot = path_pilot(setup, alpha, scale_shift, attrs, need_pool=True)
    path, ref = make_path(alpha, pilot.c), pilot.reference
    grid = exponential_schedule(64, tau_min=1e-6)
    metric = np.array(
        [fisher_metric(path_score(ref.delta, t, alpha, pilot.c), ref.log_weights(t, path)) for t in grid]
    )
    if alpha != 0.0:
        metric[[0, -1]] = np.nan
    return pilot.c, make_fixed_schedule(thermodynamic_schedule(grid, metric, n_steps))


@dataclass(frozen=True)
class RateTuning:
    """A constant-rate tuning run.

    Attributes
    ----------
    result : AnnealResult
        The run (its last attempt).
    delta : float
        The rate of that attempt.
    n_attempts : int
        Attempts made (``delta`` rescaled between them).
    n_logp_evals : int
        Model evaluations of all attempts.
    """

    result: AnnealResult
    delta: float
    n_attempts: int
    n_logp_evals: int

    @property
    def schedule(self) -> np.ndarray:
        """The tuned schedule ``0 = τ_0 < … < τ_M = 1``."""
        return np.concatenate([[0.0], self.result.stages["tau"]])


def constant_rate_tuning(setup: RunSetup, path, delta: float, **options) -> RateTuning:
    """:func:`constant_rate_run` with the run's generator for run-level work, ``q0``,
    kernel and progress setting."""
    return constant_rate_run(
        setup.aux_rng,
        setup.density,
        setup.draw,
        lambda: fresh_kernel(setup),
        path,
        delta,
        progressbar=setup.options.progressbar,
        **options,
    )


def constant_rate_run(
    rng,
    density,
    draw,
    new_kernel,
    path,
    delta: float,
    *,
    draws: int,
    max_steps: int,
    n_target: int | None = None,
    variance: str = "unweighted",
    min_step: float | None = 0.0,
    max_step: float | None = 0.125,
    v_min: float = 1e-3,
    reference: RateReference | None = None,
    n_mcmc_steps: int = 1,
    warn_at_cap: bool = True,
    progressbar: bool = False,
    label: str = "tuning",
    enough: Callable[[AnnealResult], bool] | None = None,
) -> RateTuning:
    """Anneal ``draws`` fresh particles (``draw(rng, n)``, kernel ``new_kernel()``) with the
    constant-rate rule at rate ``delta``.

    With ``n_target`` (``delta="auto"``), the run's length is checked against it and ``δ``
    rescaled (steps are about proportional to ``1/δ``), at most 3 times: the run is accepted
    when it has between ``n_target / 2`` and ``2 n_target`` steps, or fewer only because
    ``max_step`` clips most of them. A :class:`~pymc_crais.warnings.MaxStepsWarning` of an
    attempt that is retried is not shown; ``warn_at_cap=False`` silences it always. With a
    ``reference`` (α ≠ 0, from :func:`path_pilot`) the rule's statistics come from it
    rather than from the annealed particles. ``enough(result)``, if given, is asked after
    each attempt off its length window that reached τ = 1 within ``max_steps``: ``True``
    accepts that attempt (its caller has learned what it needs from the attempts so far).
    """
    before = density.n_evals
    n_attempts = 0
    for attempt in range(4 if n_target is not None else 1):
        n_attempts += 1
        used = delta
        schedule = ConstantRateSchedule(
            delta,
            variance=variance,
            min_step=min_step,
            max_step=max_step,
            v_min=v_min,
            reference=reference,
        )
        with warnings.catch_warnings():
            if not warn_at_cap or (n_target is not None and attempt < 3):
                warnings.simplefilter("ignore", MaxStepsWarning)
            with ChainProgress(progressbar, 1, label, final_line=False) as bar:
                res = anneal(
                    rng,
                    density,
                    draw(rng, draws),
                    path,
                    schedule,
                    new_kernel(),
                    n_mcmc_steps=n_mcmc_steps,
                    max_steps=max_steps,
                    callback=stage_callback(0),
                )
                bar.chain_done(
                    {
                        "chain": 0,
                        "log_marginal_likelihood": res.log_marginal_likelihood,
                        "n_logp_evals": res.n_logp_evals,
                        **res.stages,
                    }
                )
        if n_target is None:
            break
        m = res.n_stages
        steps = np.diff(np.concatenate([[0.0], res.stages["tau"]]))
        clipped = np.mean(steps >= (max_step or 1.0) * (1 - 1e-9))
        if (n_target / 2 <= m <= 2 * n_target and not res.hit_max_steps) or (
            m < n_target and clipped > 0.5
        ):
            break  # on target, or too short only because max_step clips most steps
        if enough is not None and not res.hit_max_steps and enough(res):
            break
        delta *= 4.0 if res.hit_max_steps else m / n_target
    return RateTuning(res, used, n_attempts, density.n_evals - before)
