"""A fixed weighted population for the constant-rate rule of a power-mean path (α ≠ 0).

The constant-rate rule (CR-AIS) needs, at each τ, the variance of ``g(u)`` under the
intermediate distribution ``p_τ ∝ γ_τ`` and the ratio ``r = Z_π / Z_τ``. Estimated from the
annealed particles themselves, both are wrong for α ≠ 0 whenever the target is much
narrower than ``q0``: a power-mean intermediate is close to a *mixture* of ``q0`` and the
target, local moves never carry the particles into the target's component, and the
particles' ``r`` misses its mass by hundreds of nats; ``v · r^α`` is then ≈ 0 and every
step hits the cap (issue 15).

A geometric pilot does reach the target. Its stages ``s`` (τ_s, particles with AIS weights
``w_sj`` whose mean estimates ``Z_s``) are pooled into one population by multiple
importance sampling with the balance heuristic: with ``γ⁰_s / q0 = e^{τ_s Δ}``,

``∫ γ_τ f ≈ Σ_s Σ_j (w_sj / (N_s Ẑ_s)) · e^{h(τ, Δ_sj)} f(x_sj) / Σ_s' e^{τ_s' Δ_sj} / Ẑ_s'``,

exact in expectation for any partition of unity, and a function of each particle's ``Δ``
only, as every path quantity is. So :meth:`RateReference.log_weights` re-weights the pool
to any τ of any path for free, and :func:`reference_schedule` runs the constant-rate
recursion on it without a model evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..weights import logsumexp
from .adaptive import ConstantRateSchedule

__all__ = ["RateReference", "reference_rate_for_steps", "reference_schedule", "reference_total_rate"]


@dataclass(frozen=True)
class RateReference:
    """A pooled weighted population: ``log W_j(τ) = log_base_j + h(τ, Δ_j)`` targets ``γ_τ``.

    Attributes
    ----------
    delta : numpy.ndarray
        ``Δ = log π̃ − log q0`` of the pooled particles (finite).
    log_base : numpy.ndarray
        Their log-weights with respect to ``q0`` (the ``h``-free part).
    """

    delta: np.ndarray
    log_base: np.ndarray

    def __post_init__(self):
        d = np.asarray(self.delta, dtype=np.float64)
        b = np.asarray(self.log_base, dtype=np.float64)
        if d.shape != b.shape or d.ndim != 1:
            raise ValueError(f"delta and log_base must be 1-D of one shape, got {d.shape} and {b.shape}")
        ok = np.isfinite(d) & np.isfinite(b)
        if ok.sum() < 2:
            raise ValueError("a RateReference needs at least two particles with finite delta and weight")
        object.__setattr__(self, "delta", d[ok])
        object.__setattr__(self, "log_base", b[ok])

    def log_weights(self, tau: float, path) -> np.ndarray:
        """Log-weights of the pool for ``γ_τ`` of ``path`` (their sum estimates ``Z_τ``)."""
        return self.log_base + path.log_ratio(tau, self.delta)

    @classmethod
    def from_geometric_stages(cls, taus, deltas, log_weights) -> RateReference:
        """Pool the stages of a geometric AIS run (balance heuristic, see the module).

        Parameters
        ----------
        taus : sequence of float
            τ of each stage (the first is usually 0: exact ``q0`` draws).
        deltas, log_weights : sequence of numpy.ndarray
            Per stage, the particles' ``Δ`` and their unnormalized AIS log-weights
            (``log Ẑ_s = logsumexp(log w_s) − log N_s``).
        """
        taus = np.asarray(taus, dtype=np.float64)
        if taus.ndim != 1 or taus.size == 0 or len(deltas) != taus.size or len(log_weights) != taus.size:
            raise ValueError("taus, deltas and log_weights must have one entry per stage")
        log_z, parts = [], []
        for d, lw in zip(deltas, log_weights, strict=True):
            d = np.asarray(d, dtype=np.float64)
            lw = np.where(np.isnan(lw), -np.inf, np.asarray(lw, dtype=np.float64))
            ok = np.isfinite(d) & np.isfinite(lw)
            lz = logsumexp(lw[ok]) - np.log(lw.size) if ok.any() else -np.inf
            log_z.append(lz)
            # w / (N Ẑ): each stage contributes one normalized weighted sample of p_s
            parts.append((d[ok], lw[ok] - np.log(lw.size) - lz))
        log_z = np.asarray(log_z)
        keep = np.isfinite(log_z)
        if not keep.any():
            raise ValueError("no stage of the run has a finite weight")
        taus_k, log_z_k = taus[keep], log_z[keep]
        delta = np.concatenate([p[0] for i, p in enumerate(parts) if keep[i]])
        base = np.concatenate([p[1] for i, p in enumerate(parts) if keep[i]])
        # balance heuristic: divide by Σ_s' p_s'(x)/q0(x) = Σ_s' e^{τ_s' Δ − log Ẑ_s'}
        log_mix = logsumexp(taus_k[None, :] * delta[:, None] - log_z_k[None, :], axis=1)
        return cls(delta, base - log_mix)


def reference_schedule(schedule: ConstantRateSchedule, path, max_steps: int = 10_000) -> np.ndarray:
    """The schedule ``0 = τ_0 < … < τ_M = 1`` the rule gives on its reference population
    (no model evaluation; at most ``max_steps`` steps, then a jump to 1)."""
    if schedule.reference is None:
        raise ValueError("reference_schedule needs a ConstantRateSchedule with a reference")
    taus, tau = [0.0], 0.0
    while tau < 1.0 and len(taus) <= max_steps:
        tau = schedule.next_tau(len(taus) - 1, tau, None, None, path)
        taus.append(tau)
    if taus[-1] < 1.0:
        taus.append(1.0)
    return np.asarray(taus)


def reference_rate_for_steps(
    reference: RateReference, path, n_steps: int, tol: float = 1e-3, **rule
) -> float:
    """The rate δ whose constant-rate schedule on ``reference`` has about ``n_steps`` steps
    (bisection on ``log δ`` to a relative ``tol``; ``rule``: the schedule's other options,
    e.g. ``max_dtau``).

    The count is monotone in δ up to ties; when the step cap makes ``n_steps`` unreachable
    the largest δ that reaches the cap's count is returned.
    """
    n_steps = int(n_steps)

    def steps(log_rate):
        sched = ConstantRateSchedule(float(np.exp(log_rate)), reference=reference, **rule)
        return reference_schedule(sched, path, max_steps=4 * n_steps + 8).size - 1

    lo, hi = np.log(1e-8), np.log(1e8)  # many steps at lo, few at hi
    if steps(hi) >= n_steps:
        return float(np.exp(hi))
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if steps(mid) > n_steps:
            lo = mid
        else:
            hi = mid
        if hi - lo < tol:
            break
    return float(np.exp(hi))


def reference_total_rate(reference: RateReference, path, n_sim: int = 400) -> float:
    """The path's length ``T`` in the rule's units (steps ≈ T / δ, no step cap) from the
    rule run on ``reference``: ``δ · n_sim`` with δ the rate of ``n_sim`` steps
    (:func:`reference_rate_for_steps`, to 1 %)."""
    return float(n_sim * reference_rate_for_steps(reference, path, n_sim, tol=0.01, max_dtau=1.0))
