"""One annealing loop for AIS and SMC over an ``(N, d)`` particle population.

Stage ``k`` (docs/algorithms.md, "Annealed importance sampling (AIS)" and "Tempered SMC"):

1. the schedule picks ``τ_k`` from ``τ_{k−1}`` (and, if adaptive, the population);
2. the weights take the increment ``log γ_{τ_k} − log γ_{τ_{k−1}}`` (before the move), and
   ``log Ẑ += log Σ_j W_j · exp(incr_j)`` with ``W`` the normalized weights;
3. the :class:`~pymc_crais.core.resampling.ResamplingPolicy` may resample (never = AIS,
   always, or when the ESS falls below ``κN``), after which ``W`` is uniform;
4. the kernel is tuned from the population, then the :class:`~pymc_crais.core.kernels.moves.Moves`
   object moves every particle with transitions invariant for ``γ_{τ_k}``.

Without resampling the accumulated ``log Ẑ`` equals ``logsumexp(log w) − log N`` exactly
(the increments telescope), the AIS estimator. The scale shift ``c`` of the path is added
back at the end.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Generator
from dataclasses import dataclass, field

import numpy as np

from ..warnings import MaxStepsWarning, user_stacklevel
from .density import BatchedDensity
from .estimators import ancestry_variance
from .kernels.kernel_base import KernelInfo, MutationKernel, ParamsByTau
from .kernels.moves import (
    CORRELATION_THRESHOLD,
    MAX_CORRELATION,
    MAX_MCMC_STEPS,
    MoveResult,
    Moves,
    mean_correlation,
)
from .particles import ParticleState
from .paths import AnnealingPath
from .records import AnnealResult, StageRecord, WeightsVanishedError
from .resampling import RESAMPLE_POLICIES, ResamplingPolicy
from .schedules import Schedule
from .stage_view import StageView, drive_stages
from .tails import coordinate_correlations, log_weight_tail
from .weights import (
    clean_log_weights,
    ess_from_log_weights,
    log_z_relative_variance,
    logsumexp,
)

__all__ = ["RESAMPLE_POLICIES", "AnnealOptions", "AnnealResult", "MaxStepsWarning"]
__all__ += ["ParamsByTau", "StageStrategy", "StageView", "WeightsVanishedError", "anneal", "anneal_stages"]
__all__ += ["drive_stages", "mean_correlation"]


@dataclass(frozen=True)
class AnnealOptions:
    """How :func:`anneal` runs its stages.

    Attributes
    ----------
    moves : Moves, default one transition per stage
        Transitions per stage and when to stop (:mod:`pymc_crais.core.kernels.moves`).
    resampling : ResamplingPolicy, default never (AIS)
    max_stages : int, default 100000
        Cap on the stages; if τ < 1 then, the last stage jumps to τ = 1 with a warning
        and ``hit_max_steps`` is set.
    tune_from_weights : bool, default False
        Estimate the kernel's moments with the current weights (SMC) rather than uniformly
        (AIS, whose weights can degenerate while the particles still track ``γ_τ``).
    kernel_params : callable, optional
        ``kernel_params(tau) -> params``: fixed kernel parameters at each stage instead of
        tuning from the population (no re-tuning between moves either). Kernels fixed in
        advance keep AIS exactly unbiased for ``Z``; population-tuned kernels carry an
        O(1/N) bias (docs/algorithms.md, "Adaptation bias").
    waste_free : int, default 0
        ``P ≥ 2``: waste-free SMC (Dau & Chopin 2022). A resampling stage draws only
        ``M = ⌈N / P⌉`` particles, each starts a chain of ``P`` states (``P − 1``
        transitions), and all states (cut to ``N``) are the new, equally weighted
        population (:meth:`~pymc_crais.core.kernels.moves.Moves.run_chains`); stages without
        resampling move as ``moves`` says. 0: off.
    idle_moves : Moves, optional
        The transitions of a stage ``τ < 1`` that did not resample (default: ``moves``):
        its particles are distinct and exactly weighted, so moves only follow the target's
        small change (resample-move; ``sample_smc``'s ``idle_mcmc_steps``). The number of
        transitions never biases ``Ẑ``.
    observers : tuple, default ()
        Objects told the population at the start of every stage, before its τ is chosen:
        ``begin_stage(stage, tau, state, log_weights)`` (e.g. the constant-rate
        rule's probe in a pilot run); they must not change it.
    stages : StageStrategy, optional
        How each stage chooses τ, reweights, resamples and moves (default
        :class:`StageStrategy`, the steps above); e.g.
        :class:`~pymc_crais.core.persistent.PersistentSampling`.
    """

    moves: Moves = field(default_factory=Moves)
    resampling: ResamplingPolicy = field(default_factory=ResamplingPolicy)
    max_stages: int = 100_000
    tune_from_weights: bool = False
    kernel_params: Callable | None = None
    waste_free: int = 0
    stages: StageStrategy | None = None
    observers: tuple = ()
    idle_moves: Moves | None = None

    def __post_init__(self):
        if int(self.max_stages) != self.max_stages or self.max_stages < 1:
            raise ValueError(f"max_steps must be a positive integer, got {self.max_stages}")
        if int(self.waste_free) != self.waste_free or self.waste_free == 1 or self.waste_free < 0:
            raise ValueError(
                f"waste_free must be 0 (off) or a chain length >= 2, got {self.waste_free!r}"
            )
        self.resampling.check_scheme()

    @classmethod
    def from_settings(
        cls,
        *,
        n_mcmc_steps: int | str = 1,
        max_mcmc_steps: int = MAX_MCMC_STEPS,
        correlation_threshold: float = CORRELATION_THRESHOLD,
        max_correlation: float = MAX_CORRELATION,
        resample: str = "never",
        threshold: float = 0.5,
        resampler: str = "systematic",
        max_stages: int | None = None,
        max_steps: int | None = None,
        tune_from_weights: bool = False,
        kernel_params: Callable | None = None,
        waste_free: int = 0,
        stages: StageStrategy | None = None,
        observers: tuple = (),
        idle_mcmc_steps: int | None = None,
    ) -> AnnealOptions:
        """From the flat keyword settings of :func:`anneal` (``max_steps`` is the old name
        of ``max_stages``; ``threshold`` the ESS fraction of the ``"ess"`` policy;
        ``idle_mcmc_steps`` the transitions of ``idle_moves``, ``None``: ``moves``)."""
        if max_stages is not None and max_steps is not None:
            raise TypeError("pass max_stages or its old name max_steps, not both")
        resampling = ResamplingPolicy(resample, threshold, resampler)
        moves = Moves.from_setting(
            n_mcmc_steps, max_mcmc_steps, correlation_threshold, max_correlation
        )
        cap = max_stages if max_stages is not None else max_steps if max_steps is not None else 100_000
        idle = None if idle_mcmc_steps is None else Moves.fixed(idle_mcmc_steps)
        return cls(
            moves, resampling, cap, tune_from_weights, kernel_params, int(waste_free), stages,
            tuple(observers), idle,
        )


# ----------------------------------------------------------------------------- the loop
@dataclass
class _Loop:
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
    record: StageRecord = field(default_factory=StageRecord)
    used_params: list = field(default_factory=list)
    initial_tail: np.ndarray | None = None
    resampled: bool = False  # whether the current stage resampled


def _next_tau(loop: _Loop, schedule: Schedule, path: AnnealingPath, max_stages: int) -> float:
    """The schedule's next τ (forced to 1 at the last allowed stage, with a warning)."""
    if loop.stage == max_stages - 1:
        tau_new = 1.0
        if schedule.next_tau(loop.stage, loop.tau, loop.state, loop.log_w, path) < 1.0:
            loop.hit_max = True
            warnings.warn(
                f"max_steps={max_stages} reached at tau={loop.tau:.6g}; the last step jumps to "
                "tau=1, so the estimate may be poor. Increase max_steps.",
                MaxStepsWarning,
                stacklevel=user_stacklevel(),
            )
    else:
        tau_new = float(schedule.next_tau(loop.stage, loop.tau, loop.state, loop.log_w, path))
    if not loop.tau < tau_new <= 1.0:
        raise RuntimeError(
            f"schedule returned tau={tau_new!r} after tau={loop.tau!r} at stage {loop.stage}; "
            "a schedule must increase strictly and stay <= 1"
        )
    return tau_new


def _reweight(loop: _Loop, path: AnnealingPath, tau_new: float) -> tuple[float, float]:
    """Apply the increment to ``τ_new``; returns the stage's ``log Ẑ`` increment and ESS."""
    incr = path.state_log_increment(loop.tau, tau_new, loop.state)
    log_w_norm = loop.log_w - logsumexp(loop.log_w)
    log_z_inc = logsumexp(log_w_norm + incr)
    if not np.isfinite(log_z_inc):
        raise WeightsVanishedError(loop.stage, loop.tau, tau_new)
    loop.log_z += log_z_inc
    loop.record.weight_tail.append(log_weight_tail(log_w_norm + incr))
    loop.log_w = clean_log_weights(loop.log_w + incr)
    return log_z_inc, ess_from_log_weights(loop.log_w)


def _resample(
    loop: _Loop, rng, policy: ResamplingPolicy, ess: float, tau_new: float, waste_free: int
) -> bool:
    """Resample if the policy wants it (never at τ = 1); returns whether it did. Waste-free
    (chain length ``P``): draw ``⌈N / P⌉`` particles, the starts of the stage's chains."""
    n = loop.state.n
    loop.resampled = False
    if not (policy.wants(ess, n) and tau_new < 1.0):
        return False
    loop.log_z_var += log_z_relative_variance(loop.log_w)
    m = -(-n // waste_free) if waste_free else n
    idx = policy.indices(rng, np.exp(loop.log_w - logsumexp(loop.log_w)), m)
    loop.state = loop.state.take(idx)
    loop.eve = loop.eve[idx]
    loop.n_resamplings += 1
    loop.log_w = np.zeros(m)
    loop.resampled = True
    return True


def _move(
    loop: _Loop, rng, kernel, density, path, tau_new, opts: AnnealOptions, n_total: int
) -> MoveResult:
    """Tune (or look up) the kernel, then make the stage's transitions (waste-free chains
    when the population was cut to fewer than ``n_total`` particles; ``idle_moves`` in a
    stage ``τ < 1`` that did not resample)."""
    tune = None
    if opts.kernel_params is None:
        weights = loop.log_w if opts.tune_from_weights else None

        def tune(params, state, info):
            return kernel.tune(params, state, info, weights)

        params = tune(loop.params, loop.state, loop.info)
    else:
        params = opts.kernel_params(tau_new)
    args = (rng, kernel, loop.state, density, path, tau_new, params)
    if loop.state.n < n_total:
        moved = opts.moves.run_chains(*args, n_total, tune=tune, info=loop.info)
        length = -(-n_total // loop.state.n)
        loop.eve = np.tile(loop.eve, length)[:n_total]
        loop.log_w = np.zeros(n_total)
    else:
        idle = opts.idle_moves is not None and tau_new < 1.0 and not loop.resampled
        moves = opts.idle_moves if idle else opts.moves
        moved = moves.run(*args, tune=tune, info=loop.info)
    loop.state, loop.params, loop.info = moved.state, moved.params, moved.info
    # the parameters of the stage's last transition (re-tuned on particles that have
    # moved under γ_τ): what a replay at this τ should use, not the stage's first ones
    loop.used_params.append(kernel.population_params(moved.params))
    return moved


def anneal(
    rng: np.random.Generator,
    density: BatchedDensity,
    x0: np.ndarray,
    path: AnnealingPath,
    schedule: Schedule,
    kernel: MutationKernel,
    options: AnnealOptions | None = None,
    *,
    callback: Callable[[int, float, float, float], None] | None = None,
    **settings,
) -> AnnealResult:
    """Anneal the particles ``x0 ~ q0`` to the target and estimate ``log Z``.

    Parameters
    ----------
    rng : numpy.random.Generator
        The only source of randomness of this run.
    density : BatchedDensity
        Batched ``(log q0, Δ)`` evaluator.
    x0 : numpy.ndarray, shape (N, d)
        Exact draws from ``q0``.
    path : AnnealingPath
        The annealing path (with its scale shift ``c``).
    schedule : Schedule
        Chooses each next τ.
    kernel : MutationKernel
        Mutation kernel (tuned between stages).
    options : AnnealOptions, optional
        How the stages run, as one object (then no keyword settings).
    callback : callable, optional
        ``callback(stage, tau, ess, acceptance_rate)`` after each stage (progress bars).
    **settings
        The same as flat keywords (:meth:`AnnealOptions.from_settings`, whose signature
        holds the defaults): ``n_mcmc_steps`` (an integer, ``"auto"`` or ``"pymc"``, see
        :meth:`~pymc_crais.core.kernels.moves.Moves.from_setting`), ``max_mcmc_steps``,
        ``correlation_threshold``, ``max_correlation``, ``waste_free``, ``resample``
        (``"never"``: AIS; ``"always"``; ``"ess"``: below ``threshold · N``),
        ``threshold``, ``resampler`` (:mod:`pymc_crais.core.resampling`), ``max_stages``
        (old name ``max_steps``), ``tune_from_weights``, ``kernel_params``, ``stages`` and
        ``observers`` (see :class:`AnnealOptions`).

    Returns
    -------
    AnnealResult
    """
    if options is None:
        options = AnnealOptions.from_settings(**settings)
    elif settings:
        raise TypeError(f"pass either options or keyword settings, not both (got {sorted(settings)})")
    return drive_stages(anneal_stages(rng, density, x0, path, schedule, kernel, options), callback)


def anneal_stages(
    rng: np.random.Generator,
    density: BatchedDensity,
    x0: np.ndarray,
    path: AnnealingPath,
    schedule: Schedule,
    kernel: MutationKernel,
    options: AnnealOptions,
) -> Generator[StageView, None, AnnealResult]:
    """:func:`anneal` one stage at a time: a generator that yields a :class:`StageView`
    after each stage and returns the :class:`AnnealResult` (``StopIteration.value``).

    Driving it to the end gives the same bits as :func:`anneal` with the same arguments.
    """
    evals_before = density.n_evals
    state = ParticleState.evaluate(density, x0, gradient=kernel.needs_gradient)
    state = state.with_family(np.arange(state.n))
    loop = _Loop(state, kernel.init(state), np.zeros(state.n), np.arange(state.n))
    loop.initial_tail = log_weight_tail(state.delta)  # q0's weights against the target
    n_particles = state.n
    steps = (options.stages or StageStrategy()).begin(loop)
    while loop.tau < 1.0:
        for observer in options.observers:
            observer.begin_stage(loop.stage, loop.tau, loop.state, loop.log_w)
        tau_new = steps.next_tau(loop, schedule, path, options.max_stages)
        log_z_inc, ess = steps.reweight(loop, path, tau_new)
        resampled = steps.resample(loop, rng, options.resampling, ess, tau_new, options.waste_free)
        x_start = loop.state.x
        moved = steps.move(loop, rng, kernel, density, path, tau_new, options, n_particles)
        rec = loop.record
        rec.tau.append(tau_new)
        rec.ess.append(ess)
        rec.acceptance_rate.append(moved.acceptance_rate)
        rec.log_z_increment.append(log_z_inc)
        rec.mcmc_steps.append(moved.n_steps)
        rec.resampled.append(resampled)
        corr = coordinate_correlations(x_start, moved.last.x) if moved.n_steps else np.array([])
        rec.move_correlation.append(float(corr.mean()) if corr.size else np.nan)
        rec.move_correlation_max.append(float(corr.max()) if corr.size else np.nan)
        view = StageView(
            loop.stage, tau_new, ess, rec.acceptance_rate[-1], int(moved.n_steps),
            bool(resampled), float(loop.log_z + path.c),
        )
        loop.tau = tau_new
        loop.stage += 1
        yield view
    return steps.result(loop, path, options, int(density.n_evals - evals_before))


def _result(loop: _Loop, path: AnnealingPath, options: AnnealOptions, n_evals: int) -> AnnealResult:
    multinomial = options.resampling.scheme == "multinomial"
    within = ancestry_variance(loop.log_w, loop.eve, loop.n_resamplings, multinomial=multinomial)
    return AnnealResult(
        state=loop.state,
        log_weights=loop.log_w,
        log_marginal_likelihood=float(loop.log_z + path.c),
        log_z_variance=float(within),
        stages=loop.record.as_arrays(),
        n_logp_evals=n_evals,
        c=float(path.c),
        hit_max_steps=loop.hit_max,
        kernel_params=loop.used_params,
        log_z_variance_segments=float(loop.log_z_var + log_z_relative_variance(loop.log_w)),
        eve=loop.eve,
        n_resamplings=loop.n_resamplings,
        initial_weight_tail=loop.initial_tail,
    )


class StageStrategy:
    """The steps of a stage, in the order :func:`anneal_stages` calls them, then the run's
    result: this class is the loop of the module docstring (waste-free included). One with
    a state of its own (a history) returns a fresh object from :meth:`begin`, once per run."""

    next_tau = staticmethod(_next_tau)
    reweight = staticmethod(_reweight)
    resample = staticmethod(_resample)
    move = staticmethod(_move)
    result = staticmethod(_result)

    def begin(self, loop: _Loop) -> StageStrategy:
        """The object that runs one annealing run from its initial ``loop``."""
        return self
