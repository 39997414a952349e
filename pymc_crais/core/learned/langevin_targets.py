"""Targets of the unadjusted annealing of :mod:`pymc_crais.core.learned.ula`: ``log γ`` and its
gradient and Hessian-vector products, batched over particles, from NumPy callables
(:class:`FunctionTarget`) or a :class:`~pymc_crais.core.density.BatchedDensity`
(:class:`DensityTarget`, optionally in standardized coordinates)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..density import BatchedDensity

__all__ = ["DensityTarget", "FunctionTarget", "LangevinTarget"]


# ----------------------------------------------------------------------------- targets
@dataclass
class LangevinTarget:
    """Base class: the unnormalized target ``log γ`` with batched gradient and HVP.

    Subclasses implement :meth:`_logp_grad` (``(N, d) -> ((N,), (N, d))``) and
    :meth:`_hvp` (``(N, d), (N, d) -> (N, d)``: row ``i`` is ``∇²log γ(x_i) v_i``).
    Particle evaluations are counted in :attr:`n_evals` (a gradient call on ``N``
    particles adds ``N``; a Hessian-vector product adds ``N`` to :attr:`n_hvp`).
    """

    dim: int
    n_evals: int = field(default=0, init=False)
    n_hvp: int = field(default=0, init=False)

    def _logp_grad(self, x):
        raise NotImplementedError

    def _hvp(self, x, v):
        raise NotImplementedError

    def logp_grad(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(log γ(x), ∇ log γ(x))`` of every row; non-finite values: ``-inf`` and 0."""
        lp, g = self._logp_grad(x)
        self.n_evals += x.shape[0]
        lp = np.asarray(lp, dtype=np.float64)
        g = np.asarray(g, dtype=np.float64)
        bad = ~np.isfinite(lp) | (lp == np.inf)
        if bad.any() or not np.isfinite(g).all():
            lp = np.where(np.isfinite(lp), lp, -np.inf)
            g = np.where(bad[:, None] | ~np.isfinite(g), 0.0, g)
        return lp, g

    def hvp(self, x: np.ndarray, v: np.ndarray) -> np.ndarray:
        """``∇² log γ(x_i) v_i`` for every row ``i``."""
        self.n_hvp += x.shape[0]
        out = np.asarray(self._hvp(x, v), dtype=np.float64)
        return np.where(np.isfinite(out), out, 0.0)


@dataclass
class FunctionTarget(LangevinTarget):
    """A :class:`LangevinTarget` from NumPy callables.

    Parameters
    ----------
    dim : int
    log_density, grad_log_density : callable
        ``(N, d) -> (N,)`` and ``(N, d) -> (N, d)``.
    hvp_fn : callable, optional
        ``(x, v) -> (N, d)`` Hessian-vector products. Without it, a central difference of
        the gradient along ``v`` (two gradient calls; relative error about 1e-7).
    """

    log_density: Callable | None = None
    grad_log_density: Callable | None = None
    hvp_fn: Callable | None = None

    def _logp_grad(self, x):
        return self.log_density(x), self.grad_log_density(x)

    def _hvp(self, x, v):
        if self.hvp_fn is not None:
            return self.hvp_fn(x, v)
        return _fd_hvp(lambda y: self.grad_log_density(y), x, v)


def _fd_hvp(grad, x, v):
    nv = np.sqrt(np.sum(v * v, axis=1, keepdims=True))
    scale = np.maximum(1.0, np.sqrt(np.sum(x * x, axis=1, keepdims=True) / x.shape[1]))
    h = 1e-5 * scale / np.where(nv > 0, nv, 1.0)
    g = grad(np.concatenate([x + h * v, x - h * v]))
    n = x.shape[0]
    return (g[:n] - g[n:]) / (2.0 * h)


@dataclass
class DensityTarget(LangevinTarget):
    """``log γ = log q0 + Δ`` of a :class:`~pymc_crais.core.density.BatchedDensity`.

    Parameters
    ----------
    density : BatchedDensity
        With gradients.
    hvp_fn : callable, optional
        Exact batched Hessian-vector products of ``log γ`` (e.g. compiled by PyTensor);
        without it, a central difference of the batched gradient.
    shift, scale : numpy.ndarray, optional
        Work in standardized coordinates ``y = (x − shift) / scale``: the target becomes
        ``log γ(shift + scale·y) + Σ log scale`` (the same ``Z``), which makes unit step
        sizes and a standard ``q0`` sensible whatever the model's scales.
    """

    density: BatchedDensity | None = None
    hvp_fn: Callable | None = None
    shift: np.ndarray | None = None
    scale: np.ndarray | None = None

    def __post_init__(self):
        d = self.dim
        self.shift = np.zeros(d) if self.shift is None else np.asarray(self.shift, float).ravel()
        self.scale = np.ones(d) if self.scale is None else np.asarray(self.scale, float).ravel()
        if np.any(~np.isfinite(self.scale) | (self.scale <= 0)):
            raise ValueError("scale must be positive and finite")
        self._log_jac = float(np.sum(np.log(self.scale)))

    def to_model(self, y: np.ndarray) -> np.ndarray:
        """Map standardized points back to the density's coordinates."""
        return self.shift + self.scale * y

    def _grad_x(self, x):
        ev = self.density.evaluate(x, gradient=True)
        return ev.log_q0 + ev.delta, ev.grad_log_q0 + ev.grad_delta

    def _logp_grad(self, y):
        lp, g = self._grad_x(self.to_model(y))
        return lp + self._log_jac, g * self.scale

    def _hvp(self, y, v):
        x = self.to_model(y)
        if self.hvp_fn is not None:
            return self.scale * self.hvp_fn(x, v * self.scale)
        return self.scale * _fd_hvp(lambda z: self._grad_x(z)[1], x, v * self.scale)
