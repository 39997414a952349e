"""The batched density interface the engine anneals with.

The engine needs, for an ``(N, d)`` array of particles, the per-particle ``log q0``, the
per-particle ``Δ = log π̃ − log q0`` and, for gradient kernels, both gradients. A
:class:`BatchedDensity` provides them in one call; the PyMC layer implements it with one
compiled PyTensor function, tests and benchmarks with plain NumPy callables
(:class:`FunctionDensity`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "BatchedDensity",
    "Evaluation",
    "FunctionDensity",
    "InfiniteDensityError",
    "sanitize_log_density",
]


class InfiniteDensityError(ValueError):
    """A log-density evaluated to ``+inf``: the model is improper or broken there.

    Attributes
    ----------
    points : numpy.ndarray, shape (k, d)
        (Up to 8 of) the particles where it happened.
    """

    def __init__(self, points: np.ndarray, which: str):
        self.points = np.asarray(points)
        super().__init__(
            f"the {which} log-density is +inf at {len(self.points)} particle(s) (e.g. "
            f"{np.array2string(self.points[0], precision=4, threshold=8)} in unconstrained "
            "coordinates): an improper or broken density. A density can be large but never "
            "infinite; fix the term that returns +inf."
        )


def sanitize_log_density(values: np.ndarray) -> np.ndarray:
    """Map NaN and ``+inf`` log-densities to ``-inf`` (zero density, zero weight)."""
    v = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(v)
    if bad.any():
        v = v.copy()
        v[bad] = -np.inf
    return v


@dataclass(frozen=True)
class Evaluation:
    """Per-particle log-densities (and optionally gradients) of one batched call.

    Attributes
    ----------
    log_q0 : numpy.ndarray, shape (N,)
        Log-density of the initial distribution.
    delta : numpy.ndarray, shape (N,)
        ``log π̃ − log q0``.
    grad_log_q0, grad_delta : numpy.ndarray of shape (N, d), or None
        Gradients, present when requested.
    """

    log_q0: np.ndarray
    delta: np.ndarray
    grad_log_q0: np.ndarray | None = None
    grad_delta: np.ndarray | None = None


@dataclass
class BatchedDensity:
    """Base class of a batched ``(log q0, Δ)`` evaluator.

    Subclasses implement :meth:`_evaluate`. The public :meth:`evaluate` raises
    :class:`InfiniteDensityError` on a ``+inf`` log-density (``Δ`` only where
    ``q0 > 0``), sanitizes the outputs (NaN
    and ``-inf`` log-densities become ``-inf``, gradients of such particles zero) and
    counts particle evaluations in :attr:`n_evals`.

    Attributes
    ----------
    dim : int
        Number of (unconstrained, raveled) coordinates ``d``.
    n_evals : int
        Particle-evaluations so far (a batched call on ``N`` particles adds ``N``).
    """

    dim: int
    n_evals: int = field(default=0, init=False)

    def _evaluate(self, x: np.ndarray, gradient: bool) -> Evaluation:
        raise NotImplementedError

    def for_chain(self) -> BatchedDensity:
        """The density one chain evaluates: ``self``, or a copy with per-chain state (a
        density whose evaluations depend on how many it has made returns a fresh copy, so
        that a chain's results do not depend on the chains that ran before it)."""
        return self

    def evaluate(self, x: np.ndarray, gradient: bool = False) -> Evaluation:
        """Evaluate all particles in ``x`` (shape ``(N, d)``) in one call.

        Parameters
        ----------
        x : numpy.ndarray, shape (N, d)
            Particles.
        gradient : bool, default False
            Also return ``∇ log q0`` and ``∇Δ``.

        Returns
        -------
        Evaluation
        """
        x = self._checked_points(x)
        out = self._evaluate(x, gradient)
        self.n_evals += x.shape[0]
        return self._sanitized(x, out, gradient)

    def evaluate_grouped(self, points: np.ndarray, block: np.ndarray) -> Evaluation:
        """:meth:`evaluate` of groups of points that share every coordinate outside ``block``,
        with the gradients in the coordinates ``block`` alone.

        A subclass may evaluate such groups more cheaply (by overriding
        ``_evaluate_grouped``): what depends only on the shared coordinates once a group (a
        matrix factorization, say), and no derivative with respect to them. By default the
        points are evaluated in one call, with the whole gradient, and its columns selected.
        Each point counts as one evaluation.

        Parameters
        ----------
        points : numpy.ndarray, shape (M, k, d)
            ``M`` groups of ``k`` points; the coordinates outside ``block`` are read from each
            group's first point.
        block : numpy.ndarray of int, shape (b,)
            Coordinates, in the order the gradient columns are wanted.

        Returns
        -------
        Evaluation
            Log-densities of shape ``(M, k)``, gradients ``(M, k, b)``.
        """
        points = np.asarray(points, dtype=np.float64)
        if points.ndim != 3 or points.shape[2] != self.dim:
            raise ValueError(f"points must have shape (M, k, {self.dim}), got {points.shape}")
        m, k, _ = points.shape
        block = np.asarray(block)
        if block.ndim != 1 or (block.size and block.dtype.kind not in "iu"):
            raise ValueError(f"block must be a 1-D array of coordinate indices, got {block!r}")
        block = block.astype(int)
        out = self._evaluate_grouped(points, block)
        self.n_evals += m * k
        ev = self._sanitized(points.reshape(m * k, self.dim), out, True)
        g0, g1 = (g.reshape(m, k, block.size) for g in (ev.grad_log_q0, ev.grad_delta))
        return Evaluation(ev.log_q0.reshape(m, k), ev.delta.reshape(m, k), g0, g1)

    def _evaluate_grouped(self, points: np.ndarray, block: np.ndarray) -> Evaluation:
        """The flat evaluation of ``points`` (rows ``M · k``) with the ``block`` columns of
        its gradients."""
        out = self._evaluate(points.reshape(-1, self.dim), True)
        return Evaluation(out.log_q0, out.delta, np.asarray(out.grad_log_q0)[:, block],
                          np.asarray(out.grad_delta)[:, block])  # fmt: skip

    def _checked_points(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(f"x must have shape (N, {self.dim}), got {x.shape}")
        return x

    @staticmethod
    def _sanitized(x: np.ndarray, out: Evaluation, gradient: bool) -> Evaluation:
        lq = np.asarray(out.log_q0, dtype=np.float64)
        # Δ is checked only where q0 > 0: elsewhere it is dropped below, and Δ = log π̃ −
        # log q0 is +inf there whenever log q0 is -inf, e.g. where a Student-t start's
        # z·z overflows at the 1e154 coordinates of a diverging HMC trajectory (the
        # leapfrog is then rejected, not the run)
        for pos_inf, which in (
            (np.isposinf(lq), "initial (prior)"),
            (np.isposinf(np.asarray(out.delta, dtype=np.float64)) & np.isfinite(lq), "likelihood"),
        ):
            if pos_inf.any():
                raise InfiniteDensityError(x[pos_inf][:8], which)
        log_q0 = sanitize_log_density(out.log_q0)
        delta = sanitize_log_density(out.delta)
        # Δ is only meaningful where q0 > 0: a particle outside q0's support has no weight.
        delta = np.where(np.isfinite(log_q0), delta, -np.inf)
        gq, gd = out.grad_log_q0, out.grad_delta
        if gradient:
            bad = ~(np.isfinite(log_q0) & np.isfinite(delta))
            gq = np.asarray(gq, dtype=np.float64)
            gd = np.asarray(gd, dtype=np.float64)
            if bad.any() or not (np.isfinite(gq).all() and np.isfinite(gd).all()):
                gq = np.where(bad[:, None] | ~np.isfinite(gq), 0.0, gq)
                gd = np.where(bad[:, None] | ~np.isfinite(gd), 0.0, gd)
        return Evaluation(log_q0, delta, gq, gd)


@dataclass
class FunctionDensity(BatchedDensity):
    """A :class:`BatchedDensity` from NumPy callables (tests, benchmarks, synthetic targets).

    Parameters
    ----------
    dim : int
        Dimension ``d``.
    log_q0 : callable
        ``(N, d) -> (N,)`` log-density of the (normalized) initial distribution.
    log_target : callable
        ``(N, d) -> (N,)`` unnormalized target log-density ``log π̃``.
    grad_log_q0, grad_log_target : callable, optional
        ``(N, d) -> (N, d)`` gradients; required for gradient kernels.
    sample_q0 : callable, optional
        ``(rng, n) -> (n, d)`` exact draws from ``q0``.
    """

    log_q0: Callable[[np.ndarray], np.ndarray] | None = None
    log_target: Callable[[np.ndarray], np.ndarray] | None = None
    grad_log_q0: Callable[[np.ndarray], np.ndarray] | None = None
    grad_log_target: Callable[[np.ndarray], np.ndarray] | None = None
    sample_q0: Callable[[np.random.Generator, int], np.ndarray] | None = None

    def _evaluate(self, x: np.ndarray, gradient: bool) -> Evaluation:
        lq = np.asarray(self.log_q0(x), dtype=np.float64)
        with np.errstate(invalid="ignore"):
            delta = np.asarray(self.log_target(x), dtype=np.float64) - lq
        if not gradient:
            return Evaluation(lq, delta)
        if self.grad_log_q0 is None or self.grad_log_target is None:
            raise ValueError("this density has no gradients; use a gradient-free kernel")
        gq = np.asarray(self.grad_log_q0(x), dtype=np.float64)
        gd = np.asarray(self.grad_log_target(x), dtype=np.float64) - gq
        return Evaluation(lq, delta, gq, gd)
