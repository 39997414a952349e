"""The start's importance weights as a run of one step (shared by CR-AIS, CR-SMC and SMC's
ESS rule).

Importance weights of run-level draws of ``q0`` against the target measure the AIS run of
one step: their relative variance predicts the Monte Carlo error of ``log Ẑ`` for the final
run's particles (:mod:`pymc_crais.core.schedules.run_length`). CR-AIS's ``n_steps="auto"``
and the defaults of CR-SMC and of SMC's ESS rule end there, with one step, when the
prediction meets ``target_mcse``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.schedules import FixedSchedule
from ...core.schedules.run_length import LengthPoint, predicted_mcse, relative_variance
from ...tail_stats import pareto_khat

__all__ = [
    "DEFAULT_TARGET_MCSE",
    "START_DRAWS",
    "START_MAX_KHAT",
    "StartPoint",
    "check_target_mcse",
    "one_step_schedule",
    "start_length_point",
]

DEFAULT_TARGET_MCSE = 0.02
"""The default ``target_mcse`` (nats, pooled over chains) of CR-AIS, CR-SMC and SMC's ESS
rule's one-stage test."""
START_DRAWS = 1000
"""Draws of ``q0`` whose importance weights measure the one-step run."""
START_MAX_KHAT = 0.5
"""The start's weights count as a measured one-step run only with a Pareto k̂ at most this
(a finite variance); above it their sample variance says little."""


@dataclass(frozen=True)
class StartPoint:
    """The start's importance weights as a run of one step: its measured relative variance
    (``None`` when its weights are too heavy-tailed to trust, k̂ above
    :data:`START_MAX_KHAT`), the pooled MCSE it predicts for the final run's particles
    (``inf`` without a point) and the attributes that record it."""

    point: LengthPoint | None
    mcse: float
    attrs: dict

    def meets(self, target: float) -> bool:
        """Whether the one-step run is predicted to meet ``target``."""
        return self.mcse <= target


def one_step_schedule() -> FixedSchedule:
    """The schedule of the one-step run: τ from 0 to 1 in one stage."""
    return FixedSchedule(np.array([0.0, 1.0]), name="one_step")


def check_target_mcse(target_mcse) -> float:
    """``target_mcse`` as a positive finite float, or a ``ValueError`` that says so."""
    if (
        isinstance(target_mcse, bool)
        or not isinstance(target_mcse, (int, float, np.floating, np.integer))
        or not (np.isfinite(target_mcse) and target_mcse > 0)
    ):
        raise ValueError(f"target_mcse must be a positive number of nats, e.g. 0.02; got {target_mcse!r}")
    return float(target_mcse)


def start_length_point(setup) -> StartPoint:
    """Measure ``q0``'s importance weights against the target on run-level draws.

    ``min(max(draws, 256), START_DRAWS)`` draws from ``q0``, from a child of the run-level
    generator (so the pilot's and tuning run's streams are those of a run without it), and
    their log-weights ``Δ``: the one-step run, whatever the path (every path starts at
    ``q0`` and ends at the target).
    """
    rng = setup.aux_rng.spawn(1)[0]
    n = min(max(setup.draws, 256), START_DRAWS)
    before = setup.density.n_evals
    log_w = setup.density.evaluate(setup.draw(rng, n), gradient=setup.kernel.needs_gradient).delta
    r = relative_variance(log_w)
    khat = pareto_khat(log_w)
    attrs = {
        "start_relative_variance": r,
        "start_pareto_k": khat,
        "n_logp_evals_start": int(setup.density.n_evals - before),
    }
    ok = khat <= START_MAX_KHAT or r <= 1e-12  # equal weights: no tail to fit
    mcse = predicted_mcse(r, setup.draws, setup.chains) if ok else float("inf")
    return StartPoint(LengthPoint(1, r) if ok else None, mcse, attrs)
