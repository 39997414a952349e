"""Observers of the annealing loop, as the collectors of ``particles``: objects told what
each stage did, that keep what they want of it and never change the run.

:func:`~pymc_crais.core.anneal.anneal_stages` tells every observer (its own recorders, then
:class:`~pymc_crais.core.anneal.AnnealOptions`' ``observers``) the initial population
(:meth:`LoopObserver.begin_run`), the population at the start of each stage, before its τ
is chosen (:meth:`LoopObserver.begin_stage`), and what the stage did
(:meth:`LoopObserver.end_stage`, a :class:`StageReport`). The per-stage records of a run
(:class:`~pymc_crais.core.records.StageRecorder`), its diagnostics
(:class:`~pymc_crais.core.tails.DiagnosticsRecorder`), the kernel parameters a replay uses
(:class:`~pymc_crais.core.records.KernelParamsRecorder`) and the constant-rate pilot's probe
(``samplers/engine/tuning.RateProbe``) are observers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["LoopObserver", "StageReport"]


@dataclass(frozen=True)
class StageReport:
    """What one stage of the loop did, as its observers see it (read-only).

    Attributes
    ----------
    index : int
        The stage (from 0).
    tau : float
        The stage's τ.
    ess : float
        ESS of the weights after the stage's increment (before resampling).
    log_z_increment : float
        The stage's increment of ``log Ẑ``.
    log_weights : numpy.ndarray
        The stage's incremental log-weights: the normalized log-weights plus the increment
        (persistent sampling: the pooled log-weights of every kept population).
    n_particles : int
        The population's size ``N``.
    resampled : bool
        Whether the stage resampled.
    x_start : numpy.ndarray, shape (n, d)
        The positions the stage's moves started from (after resampling).
    moved : MoveResult
        The moves (:class:`~pymc_crais.core.kernels.moves.MoveResult`: the new state, the
        transitions made, the last transition's positions, the parameters).
    """

    index: int
    tau: float
    ess: float
    log_z_increment: float
    log_weights: np.ndarray
    n_particles: int
    resampled: bool
    x_start: np.ndarray
    moved: object


class LoopObserver:
    """An observer of the annealing loop (each hook does nothing by default; subclass and
    override those you need). An observer must not change what it is shown."""

    def begin_run(self, state) -> None:
        """The initial population (a :class:`~pymc_crais.core.particles.ParticleState`)."""

    def begin_stage(self, stage: int, tau: float, state, log_weights: np.ndarray) -> None:
        """The population at the start of stage ``stage``, before its τ is chosen: the
        current ``tau``, the state and its log-weights."""

    def end_stage(self, report: StageReport) -> None:
        """What the stage did (:class:`StageReport`)."""
