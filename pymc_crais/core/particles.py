"""The particle population: positions plus cached per-particle log-densities."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .density import BatchedDensity, Evaluation
from .paths import AnnealingPath

__all__ = ["ParticleState"]


@dataclass(frozen=True)
class ParticleState:
    """Positions ``x`` of ``N`` particles and their cached evaluations.

    Never recompute what is cached here: kernels return a new state in which only the
    moved particles carry new values.

    Attributes
    ----------
    x : numpy.ndarray, shape (N, d)
    log_q0, delta : numpy.ndarray, shape (N,)
    grad_log_q0, grad_delta : numpy.ndarray, shape (N, d), or None
    family : numpy.ndarray of int, shape (N,), or None
        Each particle's initial ancestor (set by the annealing loop, carried through
        resampling and moves): particles of different families share no ancestor, so a
        kernel may tune one family's moves from the others (cross-fitting).
    """

    x: np.ndarray
    log_q0: np.ndarray
    delta: np.ndarray
    grad_log_q0: np.ndarray | None = None
    grad_delta: np.ndarray | None = None
    family: np.ndarray | None = None

    @classmethod
    def from_evaluation(cls, x: np.ndarray, ev: Evaluation) -> ParticleState:
        """Pair positions with their :class:`Evaluation`."""
        return cls(x, ev.log_q0, ev.delta, ev.grad_log_q0, ev.grad_delta)

    @classmethod
    def evaluate(cls, density: BatchedDensity, x: np.ndarray, gradient: bool) -> ParticleState:
        """Evaluate ``density`` on ``x`` (one batched call) and wrap the result."""
        return cls.from_evaluation(x, density.evaluate(x, gradient=gradient))

    @property
    def n(self) -> int:
        """Number of particles."""
        return self.x.shape[0]

    @property
    def dim(self) -> int:
        """Dimension of a particle."""
        return self.x.shape[1]

    @property
    def has_gradient(self) -> bool:
        """Whether gradients are cached."""
        return self.grad_log_q0 is not None

    def take(self, idx: np.ndarray) -> ParticleState:
        """The population indexed by ``idx`` (resampling)."""
        g = self.has_gradient
        return ParticleState(
            self.x[idx],
            self.log_q0[idx],
            self.delta[idx],
            self.grad_log_q0[idx] if g else None,
            self.grad_delta[idx] if g else None,
            None if self.family is None else self.family[idx],
        )

    def with_initial(self, log_q0: np.ndarray) -> ParticleState:
        """The same particles seen as draws of another ``q0`` with log-density ``log_q0``:
        ``Δ`` becomes ``log q0 + Δ − log_q0`` (the target is unchanged, so the annealing
        path's ``τ = 1`` end and its gradient are the same; the gradients are kept)."""
        log_q0 = np.asarray(log_q0, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            delta = self.log_q0 + self.delta - log_q0
        return replace(self, log_q0=log_q0, delta=np.where(np.isnan(delta), -np.inf, delta))

    def with_family(self, family: np.ndarray | None) -> ParticleState:
        """The same particles labelled with ``family``."""
        return replace(self, family=family)

    @classmethod
    def concatenate(cls, states: list) -> ParticleState:
        """The populations of ``states`` one after the other (waste-free SMC)."""
        g = all(s.has_gradient for s in states)

        def cat(name):
            return np.concatenate([getattr(s, name) for s in states])

        return cls(
            cat("x"),
            cat("log_q0"),
            cat("delta"),
            cat("grad_log_q0") if g else None,
            cat("grad_delta") if g else None,
            cat("family") if all(s.family is not None for s in states) else None,
        )

    def where(self, mask: np.ndarray, other: ParticleState) -> ParticleState:
        """Take ``other``'s particles where ``mask`` is true, keep ours elsewhere."""
        m = np.asarray(mask, dtype=bool)
        g = self.has_gradient and other.has_gradient
        return ParticleState(
            np.where(m[:, None], other.x, self.x),
            np.where(m, other.log_q0, self.log_q0),
            np.where(m, other.delta, self.delta),
            np.where(m[:, None], other.grad_log_q0, self.grad_log_q0) if g else None,
            np.where(m[:, None], other.grad_delta, self.grad_delta) if g else None,
            self.family,
        )

    def log_density(self, path: AnnealingPath, tau: float) -> np.ndarray:
        """``log γ_τ`` of every particle (from the cache, no model call)."""
        return path.state_log_density(tau, self)

    def grad_log_density(self, path: AnnealingPath, tau: float) -> np.ndarray:
        """``∇ log γ_τ = ∇ log q0 + w ∇Δ`` of every particle (from the cache)."""
        if not self.has_gradient:
            raise ValueError("no gradients cached; evaluate the density with gradient=True")
        return path.state_grad_log_density(tau, self)
