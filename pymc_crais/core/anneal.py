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

The steps of a stage are made by a stage strategy (:mod:`pymc_crais.core.stages`: the
default steps, waste-free SMC; :mod:`pymc_crais.core.persistent`); what each stage did is
told to the loop's observers (:mod:`pymc_crais.core.observers`), which keep the run's records
and diagnostics; the loop itself records nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field

import numpy as np

from ..warnings import MaxStepsWarning
from .conditional_laplace import WeightedStart
from .density import BatchedDensity
from .kernels.kernel_base import MutationKernel, ParamsByTau
from .kernels.moves import (
    CORRELATION_THRESHOLD,
    MAX_CORRELATION,
    MAX_MCMC_STEPS,
    Moves,
    mean_correlation,
)
from .observers import LoopObserver, StageReport
from .particles import ParticleState
from .paths import AnnealingPath
from .records import AnnealResult, RunRecorders, WeightsVanishedError
from .resampling import RESAMPLE_POLICIES, ResamplingPolicy
from .schedules import Schedule
from .stage_view import StageView, drive_stages
from .stages import LoopState, StageStrategy, WasteFreeStages

__all__ = ["RESAMPLE_POLICIES", "AnnealOptions", "AnnealResult", "MaxStepsWarning"]
__all__ += ["ParamsByTau", "StageStrategy", "StageView", "WeightsVanishedError", "anneal", "anneal_stages"]
__all__ += ["LoopObserver", "StageReport", "WasteFreeStages", "drive_stages", "mean_correlation"]


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
        ``P ≥ 2``: waste-free SMC (Dau & Chopin 2022), the stage strategy
        :class:`~pymc_crais.core.stages.WasteFreeStages` with chains of ``P`` states (when
        ``stages`` is not given). 0: off.
    idle_moves : Moves, optional
        The transitions of a stage ``τ < 1`` that did not resample (default: ``moves``):
        its particles are distinct and exactly weighted, so moves only follow the target's
        small change (resample-move; ``sample_smc``'s ``idle_mcmc_steps``). The number of
        transitions never biases ``Ẑ``.
    final_moves : Moves, optional
        The transitions at ``τ = 1`` (default: ``moves``) of a population with no copies left
        in it: the stage did not resample (the default strategies never do at τ = 1;
        persistent sampling does), no start family of several particles is left, and the
        last resampling stage's moves stopped before their cap. Those moves come before the
        final weights are resampled into the posterior draws and change no weight, so they
        neither set ``Ẑ`` nor break up the copies that resampling makes; they only follow
        the target's last change, as ``idle_moves`` do.
    observers : tuple of LoopObserver, default ()
        Observers of the loop (:class:`~pymc_crais.core.observers.LoopObserver`): told the
        initial population, the population at the start of every stage before its τ is
        chosen, and what each stage did (e.g. the constant-rate rule's probe in a pilot
        run); they must not change what they see. The run's own records are observers too
        (:class:`~pymc_crais.core.records.RunRecorders`), told before these.
    stages : StageStrategy, optional
        How each stage chooses τ, reweights, resamples and moves (default
        :class:`~pymc_crais.core.stages.StageStrategy`, the steps above, or
        :class:`~pymc_crais.core.stages.WasteFreeStages` for ``waste_free``); e.g.
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
    final_moves: Moves | None = None

    def __post_init__(self):
        if int(self.max_stages) != self.max_stages or self.max_stages < 1:
            raise ValueError(f"max_steps must be a positive integer, got {self.max_stages}")
        if int(self.waste_free) != self.waste_free or self.waste_free == 1 or self.waste_free < 0:
            raise ValueError(
                f"waste_free must be 0 (off) or a chain length >= 2, got {self.waste_free!r}"
            )
        self.resampling.check_scheme()
        hooks = ("begin_run", "begin_stage", "end_stage")
        for observer in self.observers:
            if not all(callable(getattr(observer, h, None)) for h in hooks):
                raise TypeError(
                    f"observers: {observer!r} lacks one of {hooks}; subclass "
                    "pymc_crais.core.observers.LoopObserver (its hooks do nothing by default)"
                )

    def stage_strategy(self) -> StageStrategy:
        """The stage strategy of a run: ``stages``, else waste-free chains of ``waste_free``
        states, else the default steps."""
        if self.stages is not None:
            return self.stages
        return WasteFreeStages(int(self.waste_free)) if self.waste_free else StageStrategy()

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
        final_mcmc_steps: int | None = None,
    ) -> AnnealOptions:
        """From the flat keyword settings of :func:`anneal` (``max_steps`` is the old name
        of ``max_stages``; ``threshold`` the ESS fraction of the ``"ess"`` policy;
        ``idle_mcmc_steps`` and ``final_mcmc_steps`` the transitions of ``idle_moves`` and
        ``final_moves``, ``None``: ``moves``)."""
        if max_stages is not None and max_steps is not None:
            raise TypeError("pass max_stages or its old name max_steps, not both")
        resampling = ResamplingPolicy(resample, threshold, resampler)
        moves = Moves.from_setting(
            n_mcmc_steps, max_mcmc_steps, correlation_threshold, max_correlation
        )
        cap = max_stages if max_stages is not None else max_steps if max_steps is not None else 100_000
        idle = None if idle_mcmc_steps is None else Moves.fixed(idle_mcmc_steps)
        final = None if final_mcmc_steps is None else Moves.fixed(final_mcmc_steps)
        return cls(
            moves, resampling, cap, tune_from_weights, kernel_params, int(waste_free), stages,
            tuple(observers), idle, final,
        )


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
    x0 : numpy.ndarray, shape (N, d), or WeightedStart
        Exact draws from ``q0``; or draws of another proposal with its exact log-density
        (a :class:`~pymc_crais.core.conditional_laplace.WeightedStart`: the run then takes
        that proposal as ``q0``; only its ``τ = 1`` end is the density's, so the schedule
        must go from 0 to 1 in one stage).
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
    start = x0 if isinstance(x0, WeightedStart) else None
    if start is not None:  # weighted draws of another proposal (the conditional-Laplace start)
        evals_before -= start.n_evals
        x0 = start.x
    state = ParticleState.evaluate(density, x0, gradient=kernel.needs_gradient)
    family = np.arange(state.n) if start is None else np.asarray(start.family)
    if start is not None:
        state = state.with_initial(start.log_q0)
    state = state.with_family(family)
    records = RunRecorders(kernel)
    loop = LoopState(state, kernel.init(state), np.zeros(state.n), family.copy(), records=records)
    if start is not None:
        loop.n_families = int(np.unique(family).size)
    observers = (*records.observers, *options.observers)
    for observer in observers:
        observer.begin_run(loop.state)
    n_particles = state.n
    steps = options.stage_strategy().begin(loop)
    while loop.tau < 1.0:
        for observer in observers:
            observer.begin_stage(loop.stage, loop.tau, loop.state, loop.log_w)
        tau_new = steps.next_tau(loop, schedule, path, options.max_stages)
        if start is not None and tau_new < 1.0:
            raise ValueError(
                "a WeightedStart's proposal is known only at its draws: the schedule must "
                f"reach τ = 1 in the first stage (it chose {tau_new:.3g}); use a one-step schedule"
            )
        log_z_inc, ess, stage_log_w = steps.reweight(loop, path, tau_new)
        resampled = steps.resample(loop, rng, options.resampling, ess, tau_new)
        x_start = loop.state.x
        moved = steps.move(loop, rng, kernel, density, path, tau_new, options, n_particles)
        report = StageReport(
            loop.stage, tau_new, ess, log_z_inc, stage_log_w, n_particles, resampled, x_start, moved
        )
        for observer in observers:
            observer.end_stage(report)
        view = StageView(
            loop.stage, tau_new, ess, moved.acceptance_rate, int(moved.n_transitions),
            bool(resampled), float(loop.log_z + path.c),
        )  # fmt: skip
        loop.tau = tau_new
        loop.stage += 1
        yield view
    return steps.result(loop, path, options, int(density.n_evals - evals_before))

