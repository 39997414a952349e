"""A moment-averaging path from any ``q0`` to any target (issue 15, seed 004).

Three legs over ``τ ∈ [0, 1]``, cut at ``0 < t1 < t2 < 1``:

1. ``[0, t1]``, geometric from ``q0`` to ``G0 = N(m0, S0)``, a Gaussian with ``q0``'s moments:
   ``log γ = (1 − a) log q0 + a log G0`` with ``a = τ / t1``;
2. ``[t1, t2]``, the moment-averaging (MA) path of Grosse, Maddison & Salakhutdinov (2013)
   from ``G0`` to ``G1 = N(m1, S1)``, a Gaussian fit of the posterior: the exact Gaussians
   ``G_s = N(m_s, S_s)``, ``m_s = (1 − s) m0 + s m1``,
   ``S_s = (1 − s) S0 + s S1 + s (1 − s) (m1 − m0)(m1 − m0)ᵀ`` with ``s = (τ − t1)/(t2 − t1)``;
3. ``[t2, 1]``, geometric from ``G1`` to the target ``π̃ e^{−c}``:
   ``log γ = (1 − b) log G1 + b (log q0 + Δ − c)`` with ``b = (τ − t2)/(1 − t2)``.

Every intermediate density is normalizable (leg 2: exact Gaussians; legs 1 and 3: geometric
means of two normalizable densities), ``γ_0 = q0`` and ``γ_1 = π̃ e^{−c}``, so AIS and SMC
stay unbiased for ``Z`` whatever ``G0`` and ``G1`` are; they decide only how good the path is.
If ``q0`` is itself Gaussian with moments ``(m0, S0)`` the first leg is flat.

Unlike the geometric and power-mean paths, ``log γ_τ`` is not a function of ``(log q0, Δ)``
alone: ``log G_s(θ)`` needs the position. The path therefore implements only the ``state_*``
methods of :class:`~pymc_crais.core.paths.AnnealingPath` (the annealing loop, the adaptive
schedules and the kernels call those), reading ``x``, ``log q0``, ``Δ`` and their gradients
from the :class:`~pymc_crais.core.particles.ParticleState`; nothing new is cached.

Batched, ``O(N d)`` per τ after one ``O(N d²)`` product: with ``A`` such that
``A S0 Aᵀ = I`` and ``A S1 Aᵀ = diag(D)`` (a generalized eigendecomposition, once), the
whitened ``z = A (θ − m0)`` sees ``A S_s Aᵀ = diag(λ_s) + s(1 − s) v vᵀ`` with
``λ_s = 1 + s (D − 1)`` and ``v = A (m1 − m0)``: diagonal plus rank one, inverted by
Sherman–Morrison and its determinant by the matrix determinant lemma.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import linalg

from .paths import AnnealingPath

__all__ = ["MomentAveragingPath"]

_LOG_2PI = float(np.log(2.0 * np.pi))


def _nan_to_neg_inf(v: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(v), -np.inf, v)


@dataclass(frozen=True, eq=False)
class MomentAveragingPath(AnnealingPath):
    """``q0 → G0`` (geometric), ``G0 → G1`` (moment averaging), ``G1 → π̃`` (geometric).

    Parameters
    ----------
    mean0, cov0 : array_like, shapes (d,), (d, d)
        ``G0``: usually ``q0``'s mean and covariance.
    mean1, cov1 : array_like, shapes (d,), (d, d)
        ``G1``: usually the Laplace fit of the posterior.
    breaks : tuple of two floats, default (1/3, 2/3)
        ``t1 < t2`` in ``(0, 1)``: where the legs meet.
    c : float, default 0.0
        Scale shift (the path ends at ``π̃ e^{−c}``; ``c`` is added back to ``log Z``).
    """

    mean0: np.ndarray = None
    cov0: np.ndarray = None
    mean1: np.ndarray = None
    cov1: np.ndarray = None
    breaks: tuple = (1.0 / 3.0, 2.0 / 3.0)
    _w: dict = field(default_factory=dict, repr=False)

    name = "moment_averaging"
    uses_positions = True

    def __post_init__(self):
        if self.alpha != 0.0:
            raise ValueError("the moment-averaging path has no power-mean exponent; use alpha=0")
        if not np.isfinite(self.c):
            raise ValueError(f"c must be finite, got {self.c}")
        t1, t2 = (float(b) for b in self.breaks)
        if not 0.0 < t1 < t2 < 1.0:
            raise ValueError(f"breaks must satisfy 0 < t1 < t2 < 1, got {self.breaks!r}")
        m0 = np.atleast_1d(np.asarray(self.mean0, dtype=np.float64))
        m1 = np.atleast_1d(np.asarray(self.mean1, dtype=np.float64))
        d = m0.size
        s0 = np.asarray(self.cov0, dtype=np.float64).reshape(d, d)
        s1 = np.asarray(self.cov1, dtype=np.float64).reshape(d, d)
        if m1.shape != (d,) or not all(np.all(np.isfinite(a)) for a in (m0, m1, s0, s1)):
            raise ValueError("mean0, mean1 (d,) and cov0, cov1 (d, d) must be finite and agree in d")
        try:
            l0 = linalg.cholesky(0.5 * (s0 + s0.T), lower=True)
            # generalized eigenproblem S1 u = D S0 u, eigenvectors S0-orthonormal: A = Uᵀ
            dvals, u = linalg.eigh(0.5 * (s1 + s1.T), 0.5 * (s0 + s0.T))
        except linalg.LinAlgError as err:
            raise ValueError("cov0 and cov1 must be symmetric positive definite") from err
        if not np.all(dvals > 0):
            raise ValueError("cov1 must be positive definite")
        a = u.T
        self._w.update(
            d=d, m0=m0, a=a, dvals=dvals, v=a @ (m1 - m0), t1=t1, t2=t2,
            logdet0=2.0 * float(np.sum(np.log(np.diag(l0)))),
        )  # fmt: skip

    # --- the Gaussians G_s ---------------------------------------------------------------
    def whiten(self, x: np.ndarray) -> np.ndarray:
        """``z = A (θ − m0)`` for each row of ``x``: ``(N, d)``."""
        w = self._w
        return (np.asarray(x, dtype=np.float64) - w["m0"]) @ w["a"].T

    def gaussian(self, s: float, x: np.ndarray, gradient: bool = False):
        """``log G_s(θ)`` per row of ``x`` (and ``∇_θ log G_s`` when ``gradient``)."""
        w = self._w
        z = self.whiten(x)
        lam = 1.0 + s * (w["dvals"] - 1.0)
        bb = s * (1.0 - s)
        vl = w["v"] / lam
        kappa = bb / (1.0 + bb * float(w["v"] @ vl))
        r = z - s * w["v"]
        rl = r / lam
        rv = rl @ w["v"]
        quad = np.einsum("ij,ij->i", r, rl) - kappa * rv**2
        logdet = w["logdet0"] + float(np.sum(np.log(lam))) + np.log1p(bb * float(w["v"] @ vl))
        logp = -0.5 * (quad + logdet + w["d"] * _LOG_2PI)
        if not gradient:
            return logp
        return logp, -(rl - kappa * rv[:, None] * vl) @ w["a"]

    def _leg(self, tau: float) -> tuple[int, float]:
        t1, t2 = self._w["t1"], self._w["t2"]
        tau = float(tau)
        if tau <= t1:
            return 0, tau / t1
        if tau <= t2:
            return 1, (tau - t1) / (t2 - t1)
        return 2, (tau - t2) / (1.0 - t2)

    # --- the path, from a ParticleState --------------------------------------------------
    def state_log_density(self, tau: float, state) -> np.ndarray:
        leg, u = self._leg(tau)
        lq = np.asarray(state.log_q0, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            if leg == 0:
                out = lq if u == 0.0 else (1.0 - u) * lq + u * self.gaussian(0.0, state.x)
            elif leg == 1:
                out = self.gaussian(u, state.x)
            else:
                g1 = self.gaussian(1.0, state.x)
                out = g1 if u == 0.0 else (1.0 - u) * g1 + u * (lq + state.delta - self.c)
                if u == 1.0:
                    out = lq + state.delta - self.c
        return _nan_to_neg_inf(out)

    def state_log_increment(self, tau_from: float, tau_to: float, state) -> np.ndarray:
        if tau_from == tau_to:
            return np.zeros(state.n)
        with np.errstate(invalid="ignore"):
            inc = self.state_log_density(tau_to, state) - self.state_log_density(tau_from, state)
        return _nan_to_neg_inf(inc)

    def state_grad_log_density(self, tau: float, state) -> np.ndarray:
        if not state.has_gradient:
            raise ValueError("no gradients cached; evaluate the density with gradient=True")
        leg, u = self._leg(tau)
        gq = state.grad_log_q0
        if leg == 0:
            return gq if u == 0.0 else (1.0 - u) * gq + u * self.gaussian(0.0, state.x, True)[1]
        if leg == 1:
            return self.gaussian(u, state.x, True)[1]
        g1 = self.gaussian(1.0, state.x, True)[1]
        return (1.0 - u) * g1 + u * (gq + state.grad_delta)

    # --- what a (log q0, Δ)-only path offers is not available ---------------------------
    def _needs_positions(self, *_args, **_kwargs):
        raise TypeError(
            "the moment-averaging path needs the particles' positions: use its state_* methods "
            "(it works with AIS and SMC over ESS, CESS or fixed schedules, not with the "
            "constant-rate rule or tempered sampling)"
        )

    log_ratio = gradient_weight = log_increment = log_density = _needs_positions

    def describe(self) -> str:
        t1, t2 = self._w["t1"], self._w["t2"]
        return f"moment_averaging(breaks=({t1:g}, {t2:g}))"
