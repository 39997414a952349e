"""What an annealing run returns: the per-stage record, the result, and the error raised when
every weight vanishes (kept apart from the loop in :mod:`pymc_crais.core.anneal`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .particles import ParticleState

__all__ = ["AnnealResult", "StageRecord", "WeightsVanishedError"]


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
    """Per-stage diagnostics, one list entry per stage."""

    tau: list = field(default_factory=list)
    ess: list = field(default_factory=list)
    acceptance_rate: list = field(default_factory=list)
    log_z_increment: list = field(default_factory=list)
    mcmc_steps: list = field(default_factory=list)
    resampled: list = field(default_factory=list)
    # diagnostics (pymc_crais.diagnostics): mean and max over coordinates of the correlation
    # of the particles after the stage's moves with their positions before (NaN: no move),
    # and the M + 1 largest of the stage's incremental log-weights log W + incr (core.tails)
    move_correlation: list = field(default_factory=list)
    move_correlation_max: list = field(default_factory=list)
    weight_tail: list = field(default_factory=list)

    def as_arrays(self) -> dict[str, np.ndarray]:
        """The records as arrays (``resampled`` as bool, ``weight_tail`` as (stage, M + 1))."""
        out = {k: np.asarray(v, dtype=np.float64) for k, v in vars(self).items()}
        out["resampled"] = np.asarray(self.resampled, dtype=bool)
        return out


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
