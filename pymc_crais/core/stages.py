"""The steps of one stage of the annealing loop, as stage strategies.

:class:`LoopState` is the mutable state of one run of
:func:`~pymc_crais.core.anneal.anneal_stages`; a :class:`StageStrategy` makes each stage's
steps on it (choose τ, reweight, resample, move) and the run's result. The default strategy
is the loop of :mod:`pymc_crais.core.anneal`'s docstring; :class:`WasteFreeStages` is
waste-free SMC (Dau & Chopin 2022) and
:class:`~pymc_crais.core.persistent.PersistentSampling` persistent sampling. What a stage
records (its numbers, the diagnostics, the kernel parameters) is kept by the loop's
observers (:mod:`pymc_crais.core.observers`), not here.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ..warnings import MaxStepsWarning, user_stacklevel
from .estimators import ancestry_variance
from .families import family_log_weights
from .kernels.kernel_base import KernelInfo
from .kernels.moves import MoveResult
from .particles import ParticleState
from .paths import AnnealingPath
from .records import AnnealResult, RunRecorders, WeightsVanishedError
from .resampling import ResamplingPolicy
from .schedules import Schedule
from .weights import clean_log_weights, ess_from_log_weights, log_z_relative_variance, logsumexp

__all__ = ["LoopState", "StageStrategy", "WasteFreeStages", "capped_tau"]


@dataclass
class LoopState:
    """The mutable state of one annealing run."""

    state: ParticleState
    params: object
    log_w: np.ndarray
    eve: np.ndarray  # each particle's ancestor in x0, for the ancestry variance
    info: KernelInfo | None = None
    tau: float = 0.0
    stage: int = 0
    log_z: float = 0.0
    log_z_var: float = 0.0
    n_resamplings: int = 0
    hit_max: bool = False
    resampled: bool = False  # whether the current stage resampled
    records: RunRecorders | None = None  # the run's own observers (anneal_stages sets them)
    n_families: int | None = None  # initial Eves when the start drew particles in families
    moves_capped: bool = False  # the last resampling stage's moves ran to their cap


def capped_tau(loop: LoopState, propose, max_stages: int) -> float:
    """The next τ, ``propose()`` (a strategy's rule), forced to 1 at the last allowed stage
    with a warning; a ``RuntimeError`` if it does not increase or exceeds 1."""
    if loop.stage == max_stages - 1:
        tau_new = 1.0
        if propose() < 1.0:
            loop.hit_max = True
            warnings.warn(
                f"max_steps={max_stages} reached at tau={loop.tau:.6g}; the last step jumps to "
                "tau=1, so the estimate may be poor. Increase max_steps.",
                MaxStepsWarning,
                stacklevel=user_stacklevel(),
            )
    else:
        tau_new = float(propose())
    if not loop.tau < tau_new <= 1.0:
        raise RuntimeError(
            f"schedule returned tau={tau_new!r} after tau={loop.tau!r} at stage {loop.stage}; "
            "a schedule must increase strictly and stay <= 1"
        )
    return tau_new


def next_tau(loop: LoopState, schedule: Schedule, path: AnnealingPath, max_stages: int) -> float:
    """The schedule's next τ (forced to 1 at the last allowed stage, with a warning)."""
    return capped_tau(
        loop, lambda: schedule.next_tau(loop.stage, loop.tau, loop.state, loop.log_w, path), max_stages
    )


def reweight(loop: LoopState, path: AnnealingPath, tau_new: float) -> tuple[float, float, np.ndarray]:
    """Apply the increment to ``τ_new``; returns the stage's ``log Ẑ`` increment, ESS and
    incremental log-weights (normalized log-weights plus the increment)."""
    incr = path.state_log_increment(loop.tau, tau_new, loop.state)
    log_w_norm = loop.log_w - logsumexp(loop.log_w)
    log_z_inc = logsumexp(log_w_norm + incr)
    if not np.isfinite(log_z_inc):
        raise WeightsVanishedError(loop.stage, loop.tau, tau_new)
    loop.log_z += log_z_inc
    stage_log_w = log_w_norm + incr
    loop.log_w = clean_log_weights(loop.log_w + incr)
    return log_z_inc, ess_from_log_weights(loop.log_w), stage_log_w


def resample_to(loop: LoopState, rng, policy: ResamplingPolicy, ess: float, tau_new: float, m: int) -> bool:
    """Resample ``m`` particles if the policy wants it (never at τ = 1); returns whether it
    did."""
    loop.resampled = False
    if not (policy.wants(ess, loop.state.n) and tau_new < 1.0):
        return False
    loop.log_z_var += log_z_relative_variance(loop.log_w)
    idx = policy.indices(rng, np.exp(loop.log_w - logsumexp(loop.log_w)), m)
    loop.state = loop.state.take(idx)
    loop.eve = loop.eve[idx]
    loop.n_resamplings += 1
    loop.log_w = np.zeros(m)
    loop.resampled = True
    return True


def stage_params(loop: LoopState, kernel, tau_new, opts):
    """The kernel's parameters for the stage (tuned from the population, or looked up) and
    the re-tuning function of the moves (``None`` when looked up)."""
    if opts.kernel_params is not None:
        return opts.kernel_params(tau_new), None
    weights = loop.log_w if opts.tune_from_weights else None

    def tune(params, state, info):
        return kernel.tune(params, state, info, weights)

    return tune(loop.params, loop.state, loop.info), tune


def adopt(loop: LoopState, moved: MoveResult) -> MoveResult:
    """Take the moves' state, parameters and info as the loop's."""
    loop.state, loop.params, loop.info = moved.state, moved.params, moved.info
    return moved


def _units(loop: LoopState) -> np.ndarray:
    """The log-weights of the run's independent units: one per family when the start drew
    its particles in families (:func:`~pymc_crais.core.families.family_log_weights`)."""
    if loop.n_families is None or loop.n_families == loop.log_w.size:
        return loop.log_w
    return family_log_weights(loop.log_w, np.unique(loop.eve, return_inverse=True)[1])


def result(loop: LoopState, path: AnnealingPath, options, n_evals: int) -> AnnealResult:
    """The run's :class:`AnnealResult` (the ancestry variance of ``log Ẑ``)."""
    multinomial = options.resampling.scheme == "multinomial"
    within = ancestry_variance(
        loop.log_w, loop.eve, loop.n_resamplings,
        multinomial=multinomial, n_families=loop.n_families,
    )  # fmt: skip
    return loop.records.result(
        loop,
        path,
        n_evals,
        log_z_variance=float(within),
        log_z_variance_segments=float(loop.log_z_var + log_z_relative_variance(_units(loop))),
    )


class StageStrategy:
    """The steps of a stage, in the order :func:`~pymc_crais.core.anneal.anneal_stages`
    calls them, then the run's result: this class is the loop of
    :mod:`pymc_crais.core.anneal`'s docstring. One with a state of its own (a history)
    returns a fresh object from :meth:`begin`, once per run."""

    next_tau = staticmethod(next_tau)
    reweight = staticmethod(reweight)
    result = staticmethod(result)

    def begin(self, loop: LoopState) -> StageStrategy:
        """The object that runs one annealing run from its initial ``loop``."""
        return self

    def resample(self, loop: LoopState, rng, policy: ResamplingPolicy, ess: float, tau_new: float) -> bool:
        """Resample the population if the policy wants it (never at τ = 1)."""
        return resample_to(loop, rng, policy, ess, tau_new, loop.state.n)

    def move(self, loop: LoopState, rng, kernel, density, path, tau_new, options, n_total: int) -> MoveResult:
        """Tune (or look up) the kernel, then make the stage's transitions
        (``options.idle_moves`` in a stage ``τ < 1`` that did not resample;
        ``options.final_moves`` at ``τ = 1`` where it did not resample either, no start family
        of several particles is left and the last resampling stage's moves stopped before
        their cap, so no copies are left to break up)."""
        params, tune = stage_params(loop, kernel, tau_new, options)
        args = (rng, kernel, loop.state, density, path, tau_new, params)
        idle = options.idle_moves is not None and tau_new < 1.0 and not loop.resampled
        families = loop.n_resamplings == 0 and loop.n_families is not None and (
            loop.n_families < loop.state.n
        )
        final = options.final_moves is not None and tau_new >= 1.0 and not (
            families or loop.resampled or loop.moves_capped
        )
        moves = options.idle_moves if idle else options.final_moves if final else options.moves
        moved = adopt(loop, moves.run(*args, tune=tune, info=loop.info))
        if loop.resampled:
            cap = moves.stopping_rule is not None and moved.n_transitions >= moves.n_transitions
            loop.moves_capped = bool(cap)
        return moved


@dataclass(frozen=True)
class WasteFreeStages(StageStrategy):
    """Waste-free SMC (Dau & Chopin 2022) with chains of ``length`` ``P ≥ 2`` states: a
    resampling stage draws only ``M = ⌈N / P⌉`` particles, each starts a chain of ``P``
    states (``P − 1`` transitions), and all the states (cut to ``N``) are the new, equally
    weighted population (:meth:`~pymc_crais.core.kernels.moves.Moves.run_chains`); a stage
    without resampling moves as the default strategy."""

    length: int = 10

    def resample(self, loop, rng, policy, ess, tau_new) -> bool:
        """Draw ``⌈N / P⌉`` particles, the starts of the stage's chains, if the policy wants."""
        return resample_to(loop, rng, policy, ess, tau_new, -(-loop.state.n // self.length))

    def move(self, loop, rng, kernel, density, path, tau_new, options, n_total):
        if loop.state.n == n_total:  # the stage did not resample
            return super().move(loop, rng, kernel, density, path, tau_new, options, n_total)
        params, tune = stage_params(loop, kernel, tau_new, options)
        args = (rng, kernel, loop.state, density, path, tau_new, params)
        moved = options.moves.run_chains(*args, n_total, tune=tune, info=loop.info)
        length = -(-n_total // loop.state.n)
        loop.eve = np.tile(loop.eve, length)[:n_total]
        loop.log_w = np.zeros(n_total)
        return adopt(loop, moved)
