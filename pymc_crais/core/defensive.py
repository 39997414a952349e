"""A defensive mixture start: ``q0 = (1 − ε)·q + ε·q_base``.

A proposal ``q`` fitted to posterior draws (a Student-t at their mean and covariance)
describes the bulk of the posterior and may miss a region the draws did not reach: the neck
of a funnel, where a hierarchical scale is small. An annealing run from ``q`` alone then
starts with no particle there, and a short run (few stages, as from any start close to the
posterior) may never put one there: its ``log Ẑ`` is precise and low. Mixing in the run's
first start ``q_base`` (the prior) with weight ``ε`` keeps ``q0 ≥ ε·q_base`` everywhere,
so every region the prior covers is covered at least ``ε`` as well (defensive importance
sampling: the weights ``π/q0`` are at most ``1/ε`` times the prior's), while a fraction
``1 − ε`` of the particles starts in the bulk.

Both components are normalized, so ``q0`` is; its draws are exact (each particle's
component chosen with probability ``ε``, then drawn from it). :class:`DefensiveMixtureDensity`
evaluates ``(log q0, Δ = log π̃ − log q0)`` from the base density, whose evaluation is
``(log q_base, Δ_base)`` with ``log π̃ = log q_base + Δ_base``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .density import Evaluation
from .initial import GaussianInitial, InitialReweightedDensity

__all__ = ["DefensiveDraw", "DefensiveMixtureDensity"]


def _check_weight(weight: float) -> float:
    weight = float(weight)
    if not 0.0 < weight < 1.0:
        raise ValueError(f"the defensive weight must be in (0, 1), got {weight!r}")
    return weight


@dataclass
class DefensiveMixtureDensity(InitialReweightedDensity):
    """``q0 = (1 − weight)·initial + weight·q_base``, where ``base`` evaluates
    ``(log q_base, Δ_base)``; returns ``(log q0, log π̃ − log q0)`` and their gradients."""

    weight: float = 0.5

    def __post_init__(self):
        self.weight = _check_weight(self.weight)
        if self.base is None or self.initial is None:
            raise ValueError("DefensiveMixtureDensity needs a base density and an initial")
        if self.initial.dim != self.dim:
            raise ValueError(f"initial has dimension {self.initial.dim}, the density {self.dim}")

    def _evaluate(self, x, gradient):
        ev, lt, gt = self._base_and_initial(x, gradient)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            a = np.log1p(-self.weight) + lt
            b = np.log(self.weight) + ev.log_q0
            lq = np.logaddexp(a, b)
            target = ev.log_q0 + ev.delta
            delta = target - lq
            if not gradient:
                return Evaluation(lq, delta)
            # responsibility of the fitted component; 0 where q0 is zero (no particle there)
            r = np.where(np.isfinite(lq), np.exp(a - lq), 0.0)[:, None]
            g_base = ev.grad_log_q0
            # a component of zero responsibility adds nothing, even where its gradient is not
            # finite (which would otherwise turn the particle's whole gradient into NaN)
            gq = np.where(r > 0.0, r * gt, 0.0) + np.where(r < 1.0, (1.0 - r) * g_base, 0.0)
            g_target = g_base + ev.grad_delta
        return Evaluation(lq, delta, gq, g_target - gq)


@dataclass(frozen=True)
class DefensiveDraw:
    """Exact draws of the mixture: ``(rng, n) -> (n, d)``, each row from ``base_draw`` with
    probability ``weight``, else from ``initial`` (rows in a random order)."""

    initial: GaussianInitial
    base_draw: object
    weight: float

    def __post_init__(self):
        _check_weight(self.weight)

    def __call__(self, rng: np.random.Generator, n: int) -> np.ndarray:
        m = int(rng.binomial(n, self.weight))
        parts = [self.base_draw(rng, m)] if m else []
        if n - m:
            parts.append(self.initial.draw(rng, n - m))
        x = np.concatenate(parts) if parts else np.empty((0, self.initial.dim))
        return x[rng.permutation(n)]
