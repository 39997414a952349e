"""Annealing paths between the initial density ``q0`` and the target ``π̃``.

A path is described by ``h(τ, Δ) = log γ_τ(θ) − log q0(θ)``, a function of the annealing
parameter ``τ ∈ [0, 1]`` and the cached per-particle ``Δ = log π̃ − log q0`` only. That is
all the engine needs: the weight increment between two τ's, the tempered log-density for
Metropolis ratios, and the coefficient ``w`` of ``∇Δ`` in ``∇ log γ_τ = ∇ log q0 + w ∇Δ``.
See ALGORITHMS.md §2.

Both paths use a fixed *scale shift* ``c``: the path ends at ``π̃ e^{−c}`` and the engine adds
``c`` back to ``log Z``. For the geometric path ``c`` only shifts the log-weights; for the
power-mean path it decides which path is followed (any fixed ``c`` keeps AIS unbiased).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

__all__ = ["AnnealingPath", "GeometricPath", "PowerMeanPath", "make_path"]

# Below this |α(Δ − c)| threshold the power-mean formula switches to the log1p/expm1 form.
_EXPM1_SWITCH = 1.0


def _as_float_array(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _clean_delta(delta) -> np.ndarray:
    """Δ as float64 with NaN read as −inf: an undefined target density is a zero density."""
    d = _as_float_array(delta)
    return np.where(np.isnan(d), -np.inf, d)


@dataclass(frozen=True)
class AnnealingPath:
    """Base class: subclasses implement :meth:`log_ratio` and :meth:`gradient_weight`.

    Attributes
    ----------
    alpha : float
        Power-mean exponent (0 = geometric).
    c : float
        Scale shift, fixed for a whole run.
    """

    alpha: float = 0.0
    c: float = 0.0

    name = "base"

    def log_ratio(self, tau: float, delta: np.ndarray) -> np.ndarray:
        """``h(τ, Δ) = log γ_τ − log q0`` per particle (``0`` at ``τ=0``, ``Δ − c`` at ``τ=1``)."""
        raise NotImplementedError

    def gradient_weight(self, tau: float, delta: np.ndarray) -> np.ndarray:
        """Coefficient ``w ∈ [0, 1]`` with ``∇ log γ_τ = ∇ log q0 + w ∇Δ``."""
        raise NotImplementedError

    def log_increment(self, tau_from: float, tau_to: float, delta: np.ndarray) -> np.ndarray:
        """Incremental log-weight ``log γ_{τ_to}(θ) − log γ_{τ_from}(θ)`` per particle.

        Particles whose ``Δ`` is ``-inf`` get ``-inf`` (zero weight) as soon as the path
        gives them zero density; a NaN never comes out.
        """
        with np.errstate(invalid="ignore"):
            inc = self.log_ratio(tau_to, delta) - self.log_ratio(tau_from, delta)
        return np.where(np.isnan(inc), -np.inf, inc)

    def log_density(self, tau: float, log_q0: np.ndarray, delta: np.ndarray) -> np.ndarray:
        """``log γ_τ = log q0 + h(τ, Δ)`` per particle (``-inf`` instead of NaN)."""
        with np.errstate(invalid="ignore"):
            out = _as_float_array(log_q0) + self.log_ratio(tau, delta)
        return np.where(np.isnan(out), -np.inf, out)

    def describe(self) -> str:
        """A short human-readable name such as ``"geometric"`` or ``"power_mean(alpha=0.5)"``."""
        return self.name


@dataclass(frozen=True)
class GeometricPath(AnnealingPath):
    """Geometric path ``log γ_τ = log q0 + τ (Δ − c)`` (α = 0, the inverse-KL path)."""

    name = "geometric"

    def __post_init__(self):
        if self.alpha != 0.0:
            raise ValueError("GeometricPath has alpha = 0; use PowerMeanPath for alpha != 0")
        if not np.isfinite(self.c):
            raise ValueError(f"c must be finite, got {self.c}")

    def log_ratio(self, tau: float, delta: np.ndarray) -> np.ndarray:
        d = _clean_delta(delta)
        if tau == 0.0:
            return np.zeros_like(d)
        return tau * (d - self.c)

    def gradient_weight(self, tau: float, delta: np.ndarray) -> np.ndarray:
        return np.full_like(_as_float_array(delta), float(tau))


@dataclass(frozen=True)
class PowerMeanPath(AnnealingPath):
    """Power-mean (q-) path ``γ_τ = ((1 − τ) q0^α + τ π̃_c^α)^{1/α}`` for ``α ≠ 0``.

    In terms of ``x = α(Δ − c)``: ``h = log((1 − τ) + τ e^x) / α``, computed as
    ``log1p(τ expm1(x)) / α`` when ``x`` is small (no cancellation as ``α → 0``) and as a
    ``logaddexp`` otherwise. ``α = 1`` is the arithmetic mixture path.
    """

    name = "power_mean"

    def __post_init__(self):
        if not np.isfinite(self.alpha) or self.alpha == 0.0:
            raise ValueError(
                f"alpha must be finite and non-zero for PowerMeanPath, got {self.alpha}; "
                "use GeometricPath (alpha=0) for the geometric path"
            )
        if not np.isfinite(self.c):
            raise ValueError(f"c must be finite, got {self.c}")

    def _log_mix(self, tau: float, delta: np.ndarray) -> np.ndarray:
        """``L = log((1 − τ) + τ e^x)`` with ``x = α(Δ − c)``, so that ``h = L / α``."""
        d = _clean_delta(delta)
        if tau == 0.0:
            return np.zeros_like(d)
        with np.errstate(invalid="ignore", over="ignore"):
            x = self.alpha * (d - self.c)
        if tau == 1.0:
            return x
        # log1p(τ·expm1(x)) is exact near x = 0 (the geometric limit) but cancels for very
        # negative x when τ ≈ 1; logaddexp is exact away from 0.
        small = np.abs(x) <= _EXPM1_SWITCH
        out = np.empty_like(x)
        xs = x[small]
        out[small] = np.log1p(tau * np.expm1(xs))
        xl = x[~small]
        out[~small] = np.logaddexp(np.log1p(-tau), np.log(tau) + xl)
        return out

    def log_ratio(self, tau: float, delta: np.ndarray) -> np.ndarray:
        if tau == 1.0:  # exactly Δ − c (no round trip through α)
            return _clean_delta(delta) - self.c
        return self._log_mix(tau, delta) / self.alpha

    def gradient_weight(self, tau: float, delta: np.ndarray) -> np.ndarray:
        d = _clean_delta(delta)
        if tau == 0.0:
            return np.zeros_like(d)
        if tau == 1.0:
            return np.ones_like(d)
        with np.errstate(invalid="ignore", over="ignore"):
            x = self.alpha * (d - self.c)
        with np.errstate(invalid="ignore"):
            w = np.exp(np.log(tau) + x - self._log_mix(tau, d))
        # x = +inf (α < 0, Δ = −inf): the particle has zero density; weight is irrelevant.
        return np.where(np.isnan(w), 1.0, np.clip(w, 0.0, 1.0))

    def describe(self) -> str:
        return f"power_mean(alpha={self.alpha:g})"


def make_path(alpha: float = 0.0, c: float = 0.0) -> AnnealingPath:
    """Build the annealing path for a power-mean exponent ``alpha``.

    Parameters
    ----------
    alpha : float, default 0.0
        ``0`` gives the geometric path; any other finite value the power-mean path
        (``1`` is arithmetic; negative values are allowed).
    c : float, default 0.0
        Scale shift (see the module docstring).

    Returns
    -------
    AnnealingPath
    """
    if isinstance(alpha, str | bytes | bool) or not isinstance(alpha, numbers.Real):
        raise TypeError(f"alpha must be a real number, got {alpha!r}")
    alpha = float(alpha)
    if not np.isfinite(alpha):
        raise ValueError(f"alpha must be finite, got {alpha}; use 0.0 for the geometric path")
    if alpha == 0.0:
        return GeometricPath(0.0, float(c))
    return PowerMeanPath(alpha, float(c))
