"""What the annealing loop yields after each stage, and the driver that runs it.

:func:`~pymc_crais.core.anneal.anneal_stages` is a generator of :class:`StageView` (one per
stage) that returns the run's result; :func:`drive_stages` runs such a generator to its end
(progress callbacks, PyMC's ``pm.sample_smc`` driver steps through it itself).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass

__all__ = ["StageView", "drive_stages"]


def drive_stages(stages: Generator, callback: Callable | None = None):
    """Run a stage generator (:func:`anneal_stages`, or one that delegates to it) to its
    end, calling ``callback(stage, tau, ess, acceptance_rate)`` after each stage; returns
    what the generator returns."""
    while True:
        try:
            stage = next(stages)
        except StopIteration as done:
            return done.value
        if callback is not None:
            callback(stage.index, stage.tau, stage.ess, stage.acceptance_rate)


@dataclass(frozen=True)
class StageView:
    """What :func:`anneal_stages` yields after each stage: the stage's index and numbers,
    and the running estimate (scale shift included), for a caller that drives the loop
    stage by stage (progress, PyMC's ``pm.sample_smc`` driver)."""

    index: int
    tau: float
    ess: float
    acceptance_rate: float
    n_mcmc_steps: int
    resampled: bool
    log_marginal_likelihood: float
