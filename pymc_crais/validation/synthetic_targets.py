"""The CR-AIS paper's synthetic high-dimensional targets, normalized so that log Z = 0.

Goshtasbpour et al. (ICML 2023), Section 5.3 / Appendix E: ``q0 = N(0, I_d)`` and four
targets in ``d`` dimensions. Every density below is normalized, so the exact
``log Z = 0`` and ``|log Ẑ|`` is the estimation error.

* ``normal``: ``N(0, 0.01 I)`` (standard deviation 0.1 per coordinate).
* ``mixture``: an equal-weight mixture of 8 Gaussians ``N(μ_k, I)``. The paper does not give
  the means; here ``μ_k ~ N(0, I_d)`` i.i.d., drawn once from
  ``numpy.random.default_rng(MIXTURE_SEED)`` (``MIXTURE_SEED = 20231``) as an ``(8, d)``
  array, so the placement is reproducible and depends only on ``d``. Components are then
  about ``√(2d)`` apart (16 at d = 128, 32 at d = 512) and ``KL(q0 ‖ N(μ_k, I)) = |μ_k|²/2``.
* ``mixture_wide`` (not in the paper; a harder variant): the same mixture with the means
  scaled by 3 (``3 μ_k``), so the modes lie outside ``q0``'s typical set
  (``KL(q0 ‖ N(3μ_k, I)) ≈ 4.5 d``). Not in :data:`TARGETS`; see :data:`EXTRA_TARGETS`.
* ``laplace``: product of independent standard Laplace(0, 1), ``log p = −Σ|x_i| − d log 2``.
* ``student_t``: product of independent Student-t with ν = 3 degrees of freedom.

The gradients are analytic (the Laplace one is ``−sign(x)``, the a.e. derivative).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln, logsumexp

from pymc_crais.core import FunctionDensity

__all__ = ["EXTRA_TARGETS", "MIXTURE_SEED", "TARGETS", "Target", "make_density", "make_target", "mixture_means"]

MIXTURE_SEED = 20231
MIXTURE_COMPONENTS = 8
NORMAL_SD = 0.1
STUDENT_NU = 3.0
_LOG_2PI = np.log(2.0 * np.pi)


@dataclass(frozen=True)
class Target:
    """A normalized target density on ``R^d`` with its exact ``log Z``.

    Attributes
    ----------
    name : str
        Short name (``normal``, ``mixture``, ``laplace``, ``student_t``).
    dim : int
        Dimension ``d``.
    log_density : callable
        ``(N, d) -> (N,)`` log-density.
    grad_log_density : callable
        ``(N, d) -> (N, d)`` its gradient.
    log_z : float
        Exact log normalizing constant of ``exp(log_density)`` (0 for all targets here).
    """

    name: str
    dim: int
    log_density: Callable[[np.ndarray], np.ndarray]
    grad_log_density: Callable[[np.ndarray], np.ndarray]
    log_z: float = 0.0


def mixture_means(d: int, scale: float = 1.0) -> np.ndarray:
    """The ``(8, d)`` component means of the mixture target (seeded, see module docstring)."""
    return scale * np.random.default_rng(MIXTURE_SEED).standard_normal((MIXTURE_COMPONENTS, d))


def _normal(d: int) -> Target:
    s2 = NORMAL_SD**2
    const = -d * np.log(NORMAL_SD) - 0.5 * d * _LOG_2PI

    def logp(x):
        return -0.5 * np.einsum("ij,ij->i", x, x) / s2 + const

    def grad(x):
        return -x / s2

    return Target("normal", d, logp, grad)


def _mixture(d: int, scale: float = 1.0, name: str = "mixture") -> Target:
    mu = mixture_means(d, scale)
    mu_sq = np.einsum("kj,kj->k", mu, mu)
    const = -np.log(MIXTURE_COMPONENTS) - 0.5 * d * _LOG_2PI

    def comp(x):
        # log N(x; μ_k, I) without the constant: −|x − μ_k|²/2, shape (N, K)
        x_sq = np.einsum("ij,ij->i", x, x)
        return -0.5 * (x_sq[:, None] - 2.0 * x @ mu.T + mu_sq[None, :])

    def logp(x):
        return logsumexp(comp(x), axis=1) + const

    def grad(x):
        c = comp(x)
        r = np.exp(c - logsumexp(c, axis=1, keepdims=True))  # responsibilities
        return r @ mu - x

    return Target(name, d, logp, grad)


def _laplace(d: int) -> Target:
    const = -d * np.log(2.0)

    def logp(x):
        return -np.abs(x).sum(axis=1) + const

    def grad(x):
        return -np.sign(x)

    return Target("laplace", d, logp, grad)


def _student_t(d: int) -> Target:
    nu = STUDENT_NU
    const1 = gammaln(0.5 * (nu + 1.0)) - gammaln(0.5 * nu) - 0.5 * np.log(nu * np.pi)

    def logp(x):
        return d * const1 - 0.5 * (nu + 1.0) * np.log1p(x * x / nu).sum(axis=1)

    def grad(x):
        return -(nu + 1.0) * x / (nu + x * x)

    return Target("student_t", d, logp, grad)


TARGETS = {"normal": _normal, "mixture": _mixture, "laplace": _laplace, "student_t": _student_t}
"""The paper's four targets, in the paper's order."""

EXTRA_TARGETS = {"mixture_wide": lambda d: _mixture(d, 3.0, "mixture_wide")}
"""Targets not in the paper."""


def make_target(name: str, d: int) -> Target:
    """The target ``name`` (from :data:`TARGETS` or :data:`EXTRA_TARGETS`) in ``d`` dimensions."""
    table = {**TARGETS, **EXTRA_TARGETS}
    if name not in table:
        raise ValueError(f"unknown target {name!r}; choose one of {sorted(table)}")
    return table[name](int(d))


def _log_q0(x):
    return -0.5 * np.einsum("ij,ij->i", x, x) - 0.5 * x.shape[1] * _LOG_2PI


def _grad_log_q0(x):
    return -x


def make_density(target: Target) -> FunctionDensity:
    """A :class:`~pymc_crais.core.FunctionDensity` annealing ``q0 = N(0, I)`` to ``target``."""
    return FunctionDensity(
        dim=target.dim,
        log_q0=_log_q0,
        log_target=target.log_density,
        grad_log_q0=_grad_log_q0,
        grad_log_target=target.grad_log_density,
        sample_q0=lambda rng, n: rng.standard_normal((n, target.dim)),
    )
