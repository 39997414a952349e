"""What an annealing run returns: the per-stage record (kept by observers of the loop), the
result, and the error raised when every weight vanishes (kept apart from the loop in
:mod:`pymc_crais.core.anneal`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .observers import LoopObserver, StageReport
from .particles import ParticleState
from .tails import DiagnosticsRecorder

__all__ = [
    "AnnealResult",
    "KernelParamsRecorder",
    "RunRecorders",
    "StageRecord",
    "StageRecorder",
    "WeightsVanishedError",
]


class WeightsVanishedError(FloatingPointError):
    """Every particle's weight became zero (all log-weights ``-inf`` or NaN)."""

    def __init__(self, stage: int, tau_from: float, tau_to: float):
        self.stage, self.tau_from, self.tau_to = stage, tau_from, tau_to
        super().__init__(
            f"all particle weights vanished at stage {stage} (tau {tau_from:.6g} -> {tau_to:.6g}): "
            "every particle has a non-finite or zero tempered density there. Check the model "
            "for log-densities that are -inf/NaN on a large part of the initial distribution's "
            "support, or use more particles / a finer schedule."
        )


@dataclass
class StageRecord:
    """Per-stage numbers, one list entry per stage."""

    tau: list = field(default_factory=list)
    ess: list = field(default_factory=list)
    acceptance_rate: list = field(default_factory=list)
    log_z_increment: list = field(default_factory=list)
    mcmc_steps: list = field(default_factory=list)
    resampled: list = field(default_factory=list)

    def as_arrays(self) -> dict[str, np.ndarray]:
        """The records as arrays (``resampled`` as bool)."""
        out = {k: np.asarray(v, dtype=np.float64) for k, v in vars(self).items()}
        out["resampled"] = np.asarray(self.resampled, dtype=bool)
        return out


class StageRecorder(LoopObserver):
    """The observer that keeps each stage's numbers (:class:`StageRecord`)."""

    def __init__(self):
        self.record = StageRecord()

    def end_stage(self, report: StageReport) -> None:
        rec = self.record
        rec.tau.append(report.tau)
        rec.ess.append(report.ess)
        rec.acceptance_rate.append(report.moved.acceptance_rate)
        rec.log_z_increment.append(report.log_z_increment)
        rec.mcmc_steps.append(report.moved.n_transitions)
        rec.resampled.append(report.resampled)


class KernelParamsRecorder(LoopObserver):
    """The observer that keeps the kernel parameters of each stage's last transition
    (re-tuned on particles that have moved under ``γ_τ``: what a replay at this τ should
    use, not the stage's first ones), without per-particle parts."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.params = []

    def end_stage(self, report: StageReport) -> None:
        self.params.append(self.kernel.population_params(report.moved.params))


class RunRecorders:
    """The loop's own observers of one run (stage numbers, diagnostics, kernel parameters)
    and the :class:`AnnealResult` built from what they kept."""

    def __init__(self, kernel):
        self.stages = StageRecorder()
        self.diagnostics = DiagnosticsRecorder()
        self.kernel_params = KernelParamsRecorder(kernel)

    @property
    def observers(self) -> tuple:
        return (self.stages, self.diagnostics, self.kernel_params)

    def result(self, loop, path, n_evals: int, *, log_z_variance, log_z_variance_segments) -> AnnealResult:
        """The run's result from the final ``loop`` state and the recorders."""
        return AnnealResult(
            state=loop.state,
            log_weights=loop.log_w,
            log_marginal_likelihood=float(loop.log_z + path.c),
            log_z_variance=log_z_variance,
            stages={**self.stages.record.as_arrays(), **self.diagnostics.as_arrays()},
            n_logp_evals=n_evals,
            c=float(path.c),
            hit_max_steps=loop.hit_max,
            kernel_params=self.kernel_params.params,
            log_z_variance_segments=log_z_variance_segments,
            eve=loop.eve,
            n_resamplings=loop.n_resamplings,
            initial_weight_tail=self.diagnostics.initial_tail,
        )


@dataclass
class AnnealResult:
    """The outcome of one annealing run (one chain).

    Attributes
    ----------
    state : ParticleState
        Final particles.
    log_weights : numpy.ndarray
        Final unnormalized log-weights (AIS: the importance weights of the particles).
    log_marginal_likelihood : float
        ``log Ẑ``, the scale shift ``c`` included.
    log_z_variance : float
        Within-run variance of ``log Ẑ`` from the final weights and the particles' Eve
        indices (:func:`pymc_crais.core.estimators.ancestry_variance`). Without resampling
        (AIS) it is the delta-method variance of the mean of the final weights
        (:func:`pymc_crais.core.weights.log_z_relative_variance`); with resampling it
        accounts for the dependence resampling creates.
    log_z_variance_segments : float
        The per-segment weight variances summed over the segments between resamplings
        (equal to ``log_z_variance`` for AIS); ignores resampling's dependence and is
        kept only as a diagnostic.
    eve : numpy.ndarray of int
        Index of each final particle's ancestor in the initial population.
    n_eves : int
        Number of distinct Eves left (a collapsed genealogy, ``n_eves == 1``, makes the
        ancestry variance uninformative).
    n_resamplings : int
        Number of resampling steps.
    stages : dict of numpy.ndarray
        ``tau``, ``ess``, ``acceptance_rate``, ``log_z_increment``, ``mcmc_steps``,
        ``resampled``.
    n_logp_evals : int
        Particle-evaluations of the model (initial population included).
    c : float
        The path's scale shift.
    hit_max_steps : bool
        Whether the cap on stages (``max_stages``, alias ``max_steps``) forced the last
        step to ``τ = 1`` (also as ``hit_max_stages``).
    kernel_params : list
        The kernel parameters of each stage's last transition, without per-particle parts
        (for replay by a later run).
    initial_weight_tail : numpy.ndarray
        The ``M + 1`` largest ``Δ`` of the initial particles: the tail of the importance
        weights of ``q0`` against the target (for the Pareto k̂ of the start).
    """

    state: ParticleState
    log_weights: np.ndarray
    log_marginal_likelihood: float
    log_z_variance: float
    stages: dict
    n_logp_evals: int
    c: float
    hit_max_steps: bool = False
    kernel_params: list = field(default_factory=list)
    log_z_variance_segments: float = float("nan")
    eve: np.ndarray | None = None
    n_resamplings: int = 0
    initial_weight_tail: np.ndarray | None = None

    @property
    def n_eves(self) -> int:
        """Number of distinct initial ancestors of the final particles."""
        return int(self.log_weights.size if self.eve is None else np.unique(self.eve).size)

    @property
    def n_stages(self) -> int:
        """Number of annealing stages run."""
        return int(self.stages["tau"].size)

    @property
    def hit_max_stages(self) -> bool:
        """Whether the cap on stages forced the last step to ``τ = 1``."""
        return self.hit_max_steps


# ----------------------------------------------------------------------------- options
