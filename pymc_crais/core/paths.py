"""Annealing paths between the initial density ``q0`` and the target ``π̃``.

A path is described by ``h(τ, Δ) = log γ_τ(θ) − log q0(θ)``, a function of the annealing
parameter ``τ ∈ [0, 1]`` and the cached per-particle ``Δ = log π̃ − log q0`` only. That is
all the engine needs: the weight increment between two τ's, the tempered log-density for
Metropolis ratios, and the coefficient ``w`` of ``∇Δ`` in ``∇ log γ_τ = ∇ log q0 + w ∇Δ``.
See docs/algorithms.md, "Paths".

Tempered sampling (RTS) also needs each quantity at one τ *per particle* (particles sit at
different levels of a ladder), over a whole ladder at once, and the τ-derivative
``∂_τ h`` that thermodynamic integration integrates. The base class provides all of them
from the scalar :meth:`AnnealingPath.log_ratio` and :meth:`AnnealingPath.gradient_weight`
(one call per distinct τ, no loop over particles); a path overrides them where a closed form
is faster (the geometric path) and implements :meth:`AnnealingPath.tau_derivative` if
thermodynamic integration should be available on it. :class:`ArrayTauPath` is the view of
a path that kernels are given when their ``tau`` is an ``(N,)`` array.

Both paths use a fixed *scale shift* ``c``: the path ends at ``π̃ e^{−c}`` and the engine adds
``c`` back to ``log Z``. For the geometric path ``c`` only shifts the log-weights; for the
power-mean path it decides which path is followed (any fixed ``c`` keeps AIS unbiased).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

__all__ = ["AnnealingPath", "ArrayTauPath", "GeometricPath", "PowerMeanPath", "make_path"]

# Below this |α(Δ − c)| threshold the power-mean formula switches to the log1p/expm1 form.
_EXPM1_SWITCH = 1.0


def _as_float_array(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _clean_delta(delta) -> np.ndarray:
    """Δ as float64 with NaN read as −inf: an undefined target density is a zero density."""
    d = _as_float_array(delta)
    return np.where(np.isnan(d), -np.inf, d)


def _increment(h_to: np.ndarray, h_from: np.ndarray) -> np.ndarray:
    """``h_to − h_from`` with NaN (``−inf − (−inf)``) read as ``−inf``."""
    with np.errstate(invalid="ignore"):
        inc = h_to - h_from
    return np.where(np.isnan(inc), -np.inf, inc)


def _density(log_q0, h: np.ndarray) -> np.ndarray:
    """``log q0 + h`` with NaN read as ``−inf``."""
    with np.errstate(invalid="ignore"):
        out = _as_float_array(log_q0) + h
    return np.where(np.isnan(out), -np.inf, out)


def _by_level(fn, taus: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """``fn(τ, Δ_j)`` at each particle's own τ: one call of the scalar ``fn`` per distinct τ."""
    out = np.empty(delta.shape, dtype=np.float64)
    uniq, inv = np.unique(taus, return_inverse=True)
    order = np.argsort(inv, kind="stable")
    bounds = np.searchsorted(inv[order], np.arange(uniq.size + 1))
    for i, t in enumerate(uniq):
        idx = order[bounds[i] : bounds[i + 1]]
        out[idx] = fn(float(t), delta[idx])
    return out


def _state_gradient(path, tau, state) -> np.ndarray:
    w = path.gradient_weight(tau, state.delta)
    return state.grad_log_q0 + np.reshape(w, (-1, 1)) * state.grad_delta


def _per_particle_args(taus, delta) -> tuple[np.ndarray, np.ndarray]:
    """Cleaned ``Δ`` and the τ's broadcast to its shape."""
    d = _clean_delta(delta)
    return np.broadcast_to(_as_float_array(taus), d.shape), d


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
        return _increment(self.log_ratio(tau_to, delta), self.log_ratio(tau_from, delta))

    def log_density(self, tau: float, log_q0: np.ndarray, delta: np.ndarray) -> np.ndarray:
        """``log γ_τ = log q0 + h(τ, Δ)`` per particle (``-inf`` instead of NaN)."""
        return _density(log_q0, self.log_ratio(tau, delta))

    def describe(self) -> str:
        """A short human-readable name such as ``"geometric"`` or ``"power_mean(alpha=0.5)"``."""
        return self.name

    # --- from a ParticleState: what the annealing loop and the kernels call ---------------
    #: Whether ``log γ_τ`` needs the particles' positions besides ``(log q0, Δ)`` (then only
    #: the ``state_*`` methods work: :mod:`pymc_crais.core.ma_path`).
    uses_positions = False

    def state_log_increment(self, tau_from: float, tau_to: float, state) -> np.ndarray:
        """:meth:`log_increment` of a :class:`~pymc_crais.core.particles.ParticleState`."""
        return self.log_increment(tau_from, tau_to, state.delta)

    def state_log_density(self, tau: float, state) -> np.ndarray:
        """:meth:`log_density` of a :class:`~pymc_crais.core.particles.ParticleState`."""
        return self.log_density(tau, state.log_q0, state.delta)

    def state_grad_log_density(self, tau: float, state) -> np.ndarray:
        """``∇ log γ_τ = ∇ log q0 + w ∇Δ`` of a state with cached gradients."""
        return _state_gradient(self, tau, state)

    # --- one τ per particle, ladders, τ-derivative (tempered sampling, TI) ---------------
    #: Whether ``∂_τ h`` is the same at every τ (``h`` linear in τ), so that a ladder's
    #: derivatives are one row broadcast over the levels.
    constant_tau_derivative = False

    def log_ratio_per_particle(self, taus: np.ndarray, delta: np.ndarray) -> np.ndarray:
        """``h(τ_j, Δ_j)`` with one τ per particle (``taus`` broadcast against ``delta``).

        The default calls :meth:`log_ratio` once per distinct τ, so it equals the scalar
        method exactly; a path may override it with a closed form.
        """
        t, d = _per_particle_args(taus, delta)
        return _by_level(self.log_ratio, t, d)

    def gradient_weight_per_particle(self, taus: np.ndarray, delta: np.ndarray) -> np.ndarray:
        """:meth:`gradient_weight` with one τ per particle (see :meth:`log_ratio_per_particle`)."""
        t, d = _per_particle_args(taus, delta)
        return _by_level(self.gradient_weight, t, d)

    def log_increment_per_particle(self, taus_from, taus_to, delta: np.ndarray) -> np.ndarray:
        """``log γ_{τ_to,j} − log γ_{τ_from,j}`` per particle (``-inf`` instead of NaN)."""
        return _increment(
            self.log_ratio_per_particle(taus_to, delta), self.log_ratio_per_particle(taus_from, delta)
        )

    def ladder_log_ratio(self, ladder, delta: np.ndarray) -> np.ndarray:
        """``h(τ_k, Δ_j)`` for every level ``k`` of ``ladder`` and particle ``j``: ``(K, N)``."""
        d = _clean_delta(delta)
        return np.stack([self.log_ratio(float(t), d) for t in _as_float_array(ladder)])

    def tau_derivative(self, tau, delta: np.ndarray) -> np.ndarray:
        """``∂_τ h(τ, Δ) = ∂_τ log γ_τ(θ)``, the integrand of thermodynamic integration.

        ``tau`` (scalar or array) is broadcast against ``delta``. Paths without a closed
        form raise :class:`TypeError`; :attr:`has_tau_derivative` says which is the case.
        """
        raise TypeError(
            f"thermodynamic integration needs the derivative of the path in tau; "
            f"{type(self).__name__} has none (use GeometricPath or PowerMeanPath, or "
            "implement tau_derivative on the path)"
        )

    @property
    def has_tau_derivative(self) -> bool:
        """Whether the path implements :meth:`tau_derivative`."""
        return type(self).tau_derivative is not AnnealingPath.tau_derivative

    def ladder_tau_derivative(self, ladder, delta: np.ndarray) -> np.ndarray:
        """:meth:`tau_derivative` at every level of ``ladder`` and particle: ``(K, N)``."""
        return self.tau_derivative(_as_float_array(ladder)[:, None], _as_float_array(delta)[None, :])


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

    constant_tau_derivative = True

    def log_ratio_per_particle(self, taus, delta):
        t, d = _per_particle_args(taus, delta)
        with np.errstate(invalid="ignore"):
            out = t * (d - self.c)
        return np.where(t == 0.0, 0.0, out)

    def gradient_weight_per_particle(self, taus, delta):
        t, _ = _per_particle_args(taus, delta)
        return np.array(t, dtype=np.float64)

    def ladder_log_ratio(self, ladder, delta):
        taus = _as_float_array(ladder)
        d = _clean_delta(delta)
        with np.errstate(invalid="ignore"):
            out = taus[:, None] * (d - self.c)[None, :]
        return np.where(taus[:, None] == 0.0, 0.0, out)

    def tau_derivative(self, tau, delta):
        """``Δ − c``, whatever τ."""
        d = _clean_delta(delta)
        t = _as_float_array(tau)
        return np.broadcast_to(d - self.c, np.broadcast_shapes(t.shape, d.shape)).copy()

    def ladder_tau_derivative(self, ladder, delta):
        # a read-only view: the same row Δ − c at every level
        d = _clean_delta(delta)
        return np.broadcast_to(d - self.c, (_as_float_array(ladder).size, d.size))


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

    def tau_derivative(self, tau, delta):
        """``(e^x − 1) / (α ((1 − τ) + τ e^x))`` with ``x = α(Δ − c)``, without overflow for
        either sign of ``x``."""
        d = _clean_delta(delta)
        t = _as_float_array(tau)
        a = self.alpha
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            x = a * (d - self.c)
            x, t = np.broadcast_arrays(x, t)
            neg = x <= 0
            xn = np.where(neg, x, 0.0)
            # x ≤ 0: both terms of (1 − τ) + τ e^x are ≥ 0, so no cancellation (1 + τ·expm1(x)
            # would round to 0 at τ = 1 for x < −37)
            low = np.expm1(xn) / (a * ((1.0 - t) + t * np.exp(xn)))
            e_pos = np.exp(-np.where(neg, 1.0, x))  # e^{−x} for x > 0
            high = -np.expm1(-np.where(neg, 1.0, x)) / (a * (t + (1.0 - t) * e_pos))
        return np.where(neg, low, high)

    def describe(self) -> str:
        return f"power_mean(alpha={self.alpha:g})"


class ArrayTauPath:
    """A path evaluated at one τ per particle: what a kernel is given to move particles
    that sit at different levels in one batched call.

    Kernels call ``path.log_density(tau, log_q0, delta)`` and ``path.gradient_weight(tau,
    delta)`` with the ``tau`` they were given; with an ``(N,)`` array of the particles'
    temperatures and this view, one transition leaves every particle's own ``γ_{τ_j}``
    invariant. A scalar τ goes to the wrapped path unchanged. The maths is the path's own
    (:meth:`AnnealingPath.log_ratio_per_particle` and friends).

    Parameters
    ----------
    path : AnnealingPath
        The path (with its scale shift ``c``).
    """

    def __init__(self, path: AnnealingPath):
        self.path = path
        self.alpha = path.alpha
        self.c = path.c
        self.name = path.name

    def log_ratio(self, tau, delta) -> np.ndarray:
        """``h(τ_j, Δ_j) = log γ_{τ_j}(θ_j) − log q0(θ_j)`` per particle."""
        if np.ndim(tau) == 0:
            return self.path.log_ratio(float(tau), delta)
        return self.path.log_ratio_per_particle(tau, delta)

    def gradient_weight(self, tau, delta) -> np.ndarray:
        """Coefficient ``w_j`` of ``∇Δ`` in ``∇ log γ_{τ_j}`` per particle."""
        if np.ndim(tau) == 0:
            return self.path.gradient_weight(float(tau), delta)
        return self.path.gradient_weight_per_particle(tau, delta)

    def log_increment(self, tau_from, tau_to, delta) -> np.ndarray:
        """``log γ_{τ_to} − log γ_{τ_from}`` per particle (``-inf`` instead of NaN)."""
        return _increment(self.log_ratio(tau_to, delta), self.log_ratio(tau_from, delta))

    def log_density(self, tau, log_q0, delta) -> np.ndarray:
        """``log γ_{τ_j}(θ_j)`` per particle (``-inf`` instead of NaN)."""
        return _density(log_q0, self.log_ratio(tau, delta))

    def state_log_density(self, tau, state) -> np.ndarray:
        """:meth:`log_density` of a :class:`~pymc_crais.core.particles.ParticleState`."""
        return self.log_density(tau, state.log_q0, state.delta)

    def state_grad_log_density(self, tau, state) -> np.ndarray:
        """``∇ log γ_{τ_j}`` per particle of a state with cached gradients."""
        return _state_gradient(self, tau, state)

    def describe(self) -> str:
        return self.path.describe()


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
