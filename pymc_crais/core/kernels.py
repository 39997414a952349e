"""Batched MCMC mutation kernels: every particle moves at once, one model call per step.

Each kernel keeps three things apart (BlackJAX style):

* ``init(state)`` -> parameters from the initial population,
* ``tune(params, state, info, log_weights)`` -> parameters for the next stage,
* ``step(rng, state, density, path, tau, params)`` -> ``(new_state, KernelInfo)``, one
  transition that leaves ``γ_τ`` invariant for *fixed* parameters.

Tempered sampling moves particles that sit at different levels of a ladder in one call, so
a kernel also owns its parameters *per level* (:class:`LevelParams`) through four hooks:
``level_params`` (the same parameters at every level), ``stack_level_params`` (one set per
level, e.g. from an AIS pass over the ladder), ``select_level_params`` (the parameter object
for particles at given levels, per-particle arrays where the kernel allows them) and
``adapt_level_params`` (the per-level step-size update after a sweep). A kernel without
them cannot be used by RTS (:class:`NotImplementedError` names the hooks).

Parameters are adapted only between transitions, from the population, so every transition
is an exact Metropolis-Hastings move for the current ``γ_τ`` *given* its parameters
(docs/algorithms.md, "Kernels"). The parameters that move a particle never depend on that particle's own
current position: ``tune`` gives every particle its own leave-one-out moments (diagonal
kernels) or the moments of the other half of the population (covariance kernels). A kernel
tuned with the moving particle included is not invariant for ``γ_τ`` (its proposal depends
on the current state without a Hastings correction); with HMC on a d = 5 regression this
biased AIS ``log Z`` upward by ~0.4 nats at N = 300 (docs/algorithms.md, "Adaptation bias").
What remains, the dependence through the *other* particles, is an O(1/N) bias.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, replace

import numpy as np

from .density import BatchedDensity
from .particles import ParticleState
from .paths import AnnealingPath
from .weights import normalized_weights

__all__ = [
    "HMC",
    "MALA",
    "IndependentMetropolis",
    "KERNELS",
    "KernelInfo",
    "LevelParams",
    "MutationKernel",
    "RandomWalkMetropolis",
    "floor_variance",
    "make_kernel",
    "particle_covariance",
    "particle_variance",
    "particle_variance_loo",
]


@dataclass(frozen=True)
class KernelInfo:
    """What one transition did.

    Attributes
    ----------
    acceptance_rate : float
        Mean Metropolis acceptance probability over the particles.
    n_evals : int
        Particle-evaluations of the model spent (``N`` per batched call).
    """

    acceptance_rate: float
    n_evals: int


def _moments_weights(log_weights: np.ndarray | None) -> np.ndarray | None:
    if log_weights is None:
        return None
    try:
        return normalized_weights(log_weights)
    except FloatingPointError:
        return None


def floor_variance(var: np.ndarray) -> np.ndarray:
    """Variances floored at ``1e-10`` times their mean (and above 0)."""
    scale = max(float(np.mean(var)), 1e-12)
    return np.maximum(var, 1e-10 * scale + 1e-300)


def particle_variance(x: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Per-coordinate (weighted) variance of the particles, floored by :func:`floor_variance`."""
    if weights is None:
        var = x.var(axis=0)
    else:
        mean = weights @ x
        var = weights @ (x - mean) ** 2
    return floor_variance(var)


def particle_variance_loo(x: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Leave-one-out (weighted) per-coordinate variances, shape ``(N, d)``.

    Row ``i`` is :func:`particle_variance` of the population without particle ``i`` (the
    other weights renormalized), so that a kernel using row ``i`` to move particle ``i``
    does not depend on that particle's position. Closed form, ``O(N d)``. A particle that
    holds nearly all the weight (``1 − W_i < 10⁻³``) gets the unweighted leave-one-out row.
    """
    n = x.shape[0]
    if n < 3:
        return np.tile(particle_variance(x, weights), (n, 1))

    def loo(w):
        # without particle i: mean shifts by −W_i c_i / (1 − W_i), c the centred positions
        c = x - w @ x
        var = w @ (c * c)
        rest = np.maximum(1.0 - w, 1e-3)[:, None]
        wc = w[:, None] * c
        return (var - wc * c) / rest - (wc / rest) ** 2

    out = loo(np.full(n, 1.0 / n))
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        out = np.where((1.0 - w > 1e-3)[:, None], loo(w), out)
    scale = max(float(np.mean(particle_variance(x, weights))), 1e-12)
    return np.maximum(out, 1e-10 * scale + 1e-300)


def _halves(x: np.ndarray, weights: np.ndarray | None):
    """The two halves (even / odd rows) of the population with renormalized weights."""
    out = []
    for sl in (slice(0, None, 2), slice(1, None, 2)):
        w = None
        if weights is not None:
            w = np.asarray(weights[sl], dtype=np.float64)
            total = w.sum()
            w = w / total if total > 0 and np.isfinite(total) else None
        out.append((x[sl], w))
    return out


def _cross_fitted_chol(x: np.ndarray, weights: np.ndarray | None) -> np.ndarray | None:
    """Cholesky factors ``(2, d, d)``: [0] from the odd rows (moves the even ones), [1] from the even rows."""
    if x.shape[0] < 4:
        return None
    (xe, we), (xo, wo) = _halves(x, weights)
    return np.stack([_cholesky(particle_covariance(xo, wo)), _cholesky(particle_covariance(xe, we))])


def _apply_by_half(z: np.ndarray, mats: np.ndarray) -> np.ndarray:
    """``z[i] @ mats[i % 2].T`` for every row (two matrix products)."""
    out = np.empty_like(z)
    out[0::2] = z[0::2] @ mats[0].T
    out[1::2] = z[1::2] @ mats[1].T
    return out


def particle_covariance(x: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """(Weighted) covariance of the particles, regularized to be positive definite."""
    n, d = x.shape
    if weights is None:
        mean = x.mean(axis=0)
        xc = x - mean
        cov = xc.T @ xc / max(n - 1, 1)
    else:
        mean = weights @ x
        xc = x - mean
        cov = (xc * weights[:, None]).T @ xc
    # Shrink towards the diagonal when few particles support the estimate (N < ~2d).
    diag = np.diag(np.diag(cov))
    lam = min(1.0, d / max(n, 1))
    cov = (1.0 - 0.5 * lam) * cov + 0.5 * lam * diag
    jitter = 1e-10 * max(float(np.mean(np.diag(cov))), 1e-300)
    return cov + jitter * np.eye(d)


def _cholesky(cov: np.ndarray) -> np.ndarray:
    d = cov.shape[0]
    jitter = 1e-10 * max(float(np.mean(np.diag(cov))), 1e-300)
    for _ in range(12):
        try:
            return np.linalg.cholesky(cov)
        except np.linalg.LinAlgError:
            cov = cov + jitter * np.eye(d)
            jitter *= 10.0
    return np.diag(np.sqrt(np.maximum(np.diag(cov), 1e-300)))


def _accept(rng: np.random.Generator, log_ratio: np.ndarray) -> tuple[np.ndarray, float]:
    """Metropolis decisions for ``log_ratio``; NaN (both densities zero) means reject."""
    lr = np.where(np.isnan(log_ratio), -np.inf, log_ratio)
    accept = np.log(rng.random(lr.shape[0])) < lr
    prob = np.exp(np.minimum(lr, 0.0))
    return accept, float(prob.mean())


@dataclass
class LevelParams:
    """A kernel's parameters per level of a ladder, built and read by the kernel's hooks.

    Attributes
    ----------
    base : object
        A parameter object of the kernel: the template :meth:`MutationKernel.select_level_params`
        fills with per-particle values.
    n_levels : int
        ``K``.
    log_step : numpy.ndarray, shape (K,), or None
        Log step size (HMC, MALA) or proposal scale (random-walk Metropolis) per level,
        updated in place by :meth:`MutationKernel.adapt_level_params`; ``None`` when the
        kernel has no per-level step (the same parameters at every level).
    inv_mass : numpy.ndarray, shape (K, d), or None
        Per-level diagonal inverse mass, which tempered sampling re-estimates from
        ``q(k | θ)``-weighted moments; ``None`` when the kernel has none.
    """

    base: object
    n_levels: int
    log_step: np.ndarray | None = None
    inv_mass: np.ndarray | None = None

    def step_sizes(self) -> np.ndarray:
        """Step size (or scale) per level; NaN when the kernel has no per-level step."""
        if self.log_step is None:
            return np.full(self.n_levels, np.nan)
        return np.exp(self.log_step)


def _missing_level_hook(kernel, hook: str) -> NotImplementedError:
    return NotImplementedError(
        f"kernel {type(kernel).__name__} does not implement {hook}(), so it has no per-level "
        "parameters for tempered sampling (RTS). Implement level_params, stack_level_params, "
        "select_level_params and adapt_level_params on the kernel (see "
        "pymc_crais.core.kernels.IndependentMetropolis for kernels whose parameters are the "
        "same at every level), or use one of 'hmc', 'mala', 'rwmh', 'imh'."
    )


def _adapt_log_steps(lp: LevelParams, levels, moved, target: float, gain: float, lo: float, hi: float):
    """``log_step[k] += gain · (acceptance at level k − target)`` for the visited levels, clipped."""
    n = np.bincount(levels, minlength=lp.n_levels)
    acc = np.bincount(levels, weights=moved.astype(float), minlength=lp.n_levels)
    seen = n > 0
    lp.log_step[seen] += gain * (acc[seen] / n[seen] - target)
    np.clip(lp.log_step, lo, hi, out=lp.log_step)


class MutationKernel(ABC):
    """Interface of a batched mutation kernel (see the module docstring)."""

    name: str = "kernel"
    needs_gradient: bool = False

    @abstractmethod
    def init(self, state: ParticleState):
        """Initial parameters from the initial population."""

    @abstractmethod
    def tune(self, params, state: ParticleState, info: KernelInfo | None, log_weights=None):
        """Parameters for the next stage from the population and the last transition."""

    @abstractmethod
    def step(
        self,
        rng: np.random.Generator,
        state: ParticleState,
        density: BatchedDensity,
        path: AnnealingPath,
        tau: float,
        params,
    ) -> tuple[ParticleState, KernelInfo]:
        """One transition of every particle, invariant for ``γ_τ``."""

    def describe(self) -> dict:
        """Settings worth recording in the output's attributes."""
        return {"kernel": self.name}

    def population_params(self, params):
        """``params`` without their per-particle parts (what another run may replay)."""
        return params

    # --- per-level parameters (tempered sampling) -------------------------------------
    def level_params(self, params, n_levels: int) -> LevelParams:
        """``params`` at every one of ``n_levels`` levels."""
        raise _missing_level_hook(self, "level_params")

    def stack_level_params(self, params_per_level: list) -> LevelParams:
        """One parameter set per level (e.g. the stages of an AIS pass over the ladder)."""
        raise _missing_level_hook(self, "stack_level_params")

    def select_level_params(self, level_params: LevelParams, levels: np.ndarray):
        """A parameter object for :meth:`step` moving particles at ``levels`` (shape ``(N,)``)."""
        raise _missing_level_hook(self, "select_level_params")

    def adapt_level_params(self, level_params: LevelParams, levels, moved, gain: float) -> None:
        """Update ``level_params`` in place after a sweep in which the particles at ``levels``
        moved (``moved``, bool ``(N,)``); ``gain`` scales the update."""
        raise _missing_level_hook(self, "adapt_level_params")


class _StepMassLevels:
    """Per-level step size and diagonal inverse mass (:class:`HMCParams`: HMC and MALA)."""

    target_accept: float

    def level_params(self, params, n_levels):
        return LevelParams(
            params,
            n_levels,
            np.full(n_levels, np.log(float(params.step_size))),
            np.tile(np.asarray(params.inv_mass, dtype=np.float64), (n_levels, 1)),
        )

    def stack_level_params(self, params_per_level):
        return LevelParams(
            params_per_level[0],
            len(params_per_level),
            np.log([float(p.step_size) for p in params_per_level]),
            np.stack([np.asarray(p.inv_mass, dtype=np.float64) for p in params_per_level]),
        )

    def select_level_params(self, level_params, levels):
        return replace(
            level_params.base,
            step_size=np.exp(level_params.log_step)[levels][:, None],
            inv_mass=level_params.inv_mass[levels],
        )

    def adapt_level_params(self, level_params, levels, moved, gain):
        _adapt_log_steps(level_params, levels, moved, self.target_accept, gain, np.log(1e-6), np.log(10.0))


@dataclass(frozen=True)
class RWMHParams:
    """Random-walk proposal ``x' = x + scale · L z`` with ``L Lᵀ`` the particle covariance.

    ``split_chol`` (shape ``(2, d, d)``), when set by :meth:`RandomWalkMetropolis.tune`,
    replaces ``chol``: even-indexed particles move with the factor of the odd-indexed ones'
    covariance and vice versa, so no particle's proposal depends on its own position.
    """

    scale: float
    chol: np.ndarray
    split_chol: np.ndarray | None = None


class RandomWalkMetropolis(MutationKernel):
    """Random-walk Metropolis with a Gaussian proposal from the particle covariance.

    The proposal covariance is ``scale² · Σ``, with ``Σ`` the (weighted) covariance of the
    population at the start of the stage and ``scale`` starting at ``2.38/√d`` and adapted
    stage to stage towards ``target_accept`` (0.234).

    Parameters
    ----------
    target_accept : float, default 0.234
        Acceptance rate the scale is adapted towards.
    adapt_rate : float, default 1.0
        Gain of the log-scale update ``log s += rate · (acc − target)``.
    """

    name = "rwmh"
    needs_gradient = False

    def __init__(self, target_accept: float = 0.234, adapt_rate: float = 1.0):
        if not 0.0 < target_accept < 1.0:
            raise ValueError(f"target_accept must be in (0, 1), got {target_accept}")
        self.target_accept = float(target_accept)
        self.adapt_rate = float(adapt_rate)

    def init(self, state: ParticleState) -> RWMHParams:
        d = state.dim
        return RWMHParams(2.38 / np.sqrt(d), _cholesky(particle_covariance(state.x)))

    def tune(self, params: RWMHParams, state, info, log_weights=None) -> RWMHParams:
        w = _moments_weights(log_weights)
        chol = _cholesky(particle_covariance(state.x, w))
        scale = params.scale
        if info is not None:
            scale *= np.exp(self.adapt_rate * (info.acceptance_rate - self.target_accept))
            ref = 2.38 / np.sqrt(state.dim)
            scale = float(np.clip(scale, 1e-4 * ref, 10.0 * ref))
        return RWMHParams(scale, chol, _cross_fitted_chol(state.x, w))

    def population_params(self, params: RWMHParams) -> RWMHParams:
        return params if params.split_chol is None else replace(params, split_chol=None)

    def level_params(self, params: RWMHParams, n_levels: int) -> LevelParams:
        return LevelParams(params, n_levels, np.full(n_levels, np.log(float(params.scale))))

    def stack_level_params(self, params_per_level: list) -> LevelParams:
        # one covariance factor for all levels (the τ = 1 one); the scales of the other
        # levels are rescaled by the ratio of the factors' average standard deviations
        last = params_per_level[-1]
        ref = np.sqrt(np.mean(np.sum(last.chol**2, axis=1)))
        sd = np.array([np.sqrt(np.mean(np.sum(p.chol**2, axis=1))) for p in params_per_level])
        log_scale = np.log([float(p.scale) for p in params_per_level]) + np.log(sd / ref)
        return LevelParams(last, len(params_per_level), log_scale)

    def select_level_params(self, level_params: LevelParams, levels) -> RWMHParams:
        return replace(level_params.base, scale=np.exp(level_params.log_step)[levels][:, None])

    def adapt_level_params(self, level_params, levels, moved, gain) -> None:
        _adapt_log_steps(level_params, levels, moved, self.target_accept, gain, np.log(1e-5), np.log(1e3))

    def step(self, rng, state, density, path, tau, params: RWMHParams):
        z = rng.standard_normal(state.x.shape)
        if params.split_chol is not None and state.n >= 4:
            x_new = state.x + params.scale * _apply_by_half(z, params.split_chol)
        else:
            x_new = state.x + params.scale * z @ params.chol.T
        proposal = ParticleState.evaluate(density, x_new, gradient=False)
        with np.errstate(invalid="ignore"):
            log_ratio = proposal.log_density(path, tau) - state.log_density(path, tau)
        accept, acc = _accept(rng, log_ratio)
        return state.where(accept, proposal), KernelInfo(acc, state.n)

    def describe(self) -> dict:
        return {"kernel": self.name, "target_accept": self.target_accept}


@dataclass(frozen=True)
class HMCParams:
    """Step size and diagonal inverse mass matrix (the particles' variances).

    ``particle_inv_mass`` (shape ``(N, d)``), when set by ``tune``, replaces ``inv_mass`` in
    the transition: row ``i`` is the population variance without particle ``i``
    (:func:`particle_variance_loo`), so no particle's move depends on its own position.
    """

    step_size: float
    inv_mass: np.ndarray
    particle_inv_mass: np.ndarray | None = None

    def inv_mass_for(self, n: int) -> np.ndarray:
        """The inverse masses a transition of ``n`` particles uses."""
        pm = self.particle_inv_mass
        return self.inv_mass if pm is None or pm.shape[0] != n else pm


class HMC(_StepMassLevels, MutationKernel):
    """Hamiltonian Monte Carlo with ``n_leapfrog`` leapfrog steps, batched over particles.

    The diagonal mass matrix is the inverse of the population's per-coordinate variance;
    the step size is adapted stage to stage towards ``target_accept``. The trajectory
    length is fixed, so every transition is an exact MH move for ``γ_τ``.

    Parameters
    ----------
    n_leapfrog : int, default 3
        Leapfrog steps per transition (each costs one batched logp+gradient call).
    step_size : float, optional
        Initial step size; default ``0.5 · d^{-1/4}`` in whitened coordinates.
    target_accept : float, default 0.7
        Acceptance probability the step size is adapted towards.
    adapt_rate : float, default 1.0
        Gain of ``log ε += rate · (acc − target)``.
    """

    name = "hmc"
    needs_gradient = True

    def __init__(
        self,
        n_leapfrog: int = 3,
        step_size: float | None = None,
        target_accept: float = 0.7,
        adapt_rate: float = 1.0,
    ):
        if int(n_leapfrog) != n_leapfrog or n_leapfrog < 1:
            raise ValueError(f"n_leapfrog must be a positive integer, got {n_leapfrog}")
        if step_size is not None and not (np.isfinite(step_size) and step_size > 0):
            raise ValueError(f"step_size must be positive and finite, got {step_size}")
        if not 0.0 < target_accept < 1.0:
            raise ValueError(f"target_accept must be in (0, 1), got {target_accept}")
        self.n_leapfrog = int(n_leapfrog)
        self.step_size = step_size
        self.target_accept = float(target_accept)
        self.adapt_rate = float(adapt_rate)

    def init(self, state: ParticleState) -> HMCParams:
        eps = self.step_size if self.step_size is not None else 0.5 * state.dim ** -0.25
        return HMCParams(float(eps), particle_variance(state.x))

    def tune(self, params: HMCParams, state, info, log_weights=None) -> HMCParams:
        w = _moments_weights(log_weights)
        eps = params.step_size
        if info is not None:
            eps *= np.exp(self.adapt_rate * (info.acceptance_rate - self.target_accept))
            eps = float(np.clip(eps, 1e-6, 10.0))
        return HMCParams(eps, particle_variance(state.x, w), particle_variance_loo(state.x, w))

    def population_params(self, params: HMCParams) -> HMCParams:
        return params if params.particle_inv_mass is None else replace(params, particle_inv_mass=None)

    def step(self, rng, state, density, path, tau, params: HMCParams):
        eps, inv_mass = params.step_size, params.inv_mass_for(state.n)
        p0 = rng.standard_normal(state.x.shape) / np.sqrt(inv_mass)
        kinetic0 = 0.5 * np.sum(p0 * p0 * inv_mass, axis=1)
        x = state.x
        g = state.grad_log_density(path, tau)
        p = p0 + 0.5 * eps * g
        current = state
        with np.errstate(over="ignore", invalid="ignore"):  # diverging trajectories: rejected below
            for i in range(self.n_leapfrog):
                x = x + eps * inv_mass * p
                current = ParticleState.evaluate(density, x, gradient=True)
                g = current.grad_log_density(path, tau)
                p = p + (eps if i < self.n_leapfrog - 1 else 0.5 * eps) * g
            kinetic1 = 0.5 * np.sum(p * p * inv_mass, axis=1)
        with np.errstate(over="ignore", invalid="ignore"):
            log_ratio = (current.log_density(path, tau) - kinetic1) - (
                state.log_density(path, tau) - kinetic0
            )
        log_ratio = np.where(np.isfinite(x).all(axis=1), log_ratio, -np.inf)
        accept, acc = _accept(rng, log_ratio)
        return state.where(accept, current), KernelInfo(acc, state.n * self.n_leapfrog)

    def describe(self) -> dict:
        return {
            "kernel": self.name,
            "n_leapfrog": self.n_leapfrog,
            "target_accept": self.target_accept,
        }


@dataclass(frozen=True)
class IMHParams:
    """Gaussian independence proposal ``N(mean, L Lᵀ)``."""

    mean: np.ndarray
    chol: np.ndarray

    def log_proposal(self, x: np.ndarray) -> np.ndarray:
        """Log-density of the proposal at the rows of ``x`` (normalizing constant omitted)."""
        from scipy.linalg import solve_triangular

        z = solve_triangular(self.chol, (x - self.mean).T, lower=True).T
        return -0.5 * np.sum(z * z, axis=1)


class IndependentMetropolis(MutationKernel):
    """Independent Metropolis-Hastings with a Gaussian fitted to the population (PyMC's default).

    The proposal's mean and covariance are the (weighted) moments of the population at the
    start of the stage, the covariance inflated by ``scale²``; the acceptance ratio includes
    the proposal densities, so the move is exact for any fit.

    Parameters
    ----------
    scale : float, default 1.0
        Inflation of the fitted standard deviations.
    """

    name = "imh"
    needs_gradient = False

    def __init__(self, scale: float = 1.0):
        if not (np.isfinite(scale) and scale > 0):
            raise ValueError(f"scale must be positive, got {scale}")
        self.scale = float(scale)

    def _fit(self, state, log_weights) -> IMHParams:
        w = _moments_weights(log_weights)
        mean = state.x.mean(axis=0) if w is None else w @ state.x
        chol = _cholesky(particle_covariance(state.x, w)) * self.scale
        return IMHParams(mean, chol)

    def init(self, state):
        return self._fit(state, None)

    def tune(self, params, state, info, log_weights=None):
        return self._fit(state, log_weights)

    # the proposal is fitted to the whole population: the same at every level, not adapted
    def level_params(self, params, n_levels):
        return LevelParams(params, n_levels)

    def stack_level_params(self, params_per_level):
        return LevelParams(params_per_level[0], len(params_per_level))

    def select_level_params(self, level_params, levels):
        return level_params.base

    def adapt_level_params(self, level_params, levels, moved, gain):
        pass

    def step(self, rng, state, density, path, tau, params: IMHParams):
        x_new = params.mean + rng.standard_normal(state.x.shape) @ params.chol.T
        proposal = ParticleState.evaluate(density, x_new, gradient=False)
        with np.errstate(invalid="ignore"):
            log_ratio = (proposal.log_density(path, tau) - params.log_proposal(x_new)) - (
                state.log_density(path, tau) - params.log_proposal(state.x)
            )
        accept, acc = _accept(rng, log_ratio)
        return state.where(accept, proposal), KernelInfo(acc, state.n)

    def describe(self) -> dict:
        return {"kernel": self.name, "scale": self.scale}


class MALA(_StepMassLevels, MutationKernel):
    """Metropolis-adjusted Langevin with a diagonal preconditioner (the particle variances).

    Proposal ``x' = x + ½ε² M⁻¹∇log γ(x) + ε M^{-1/2} z``; the step size is adapted stage to
    stage towards ``target_accept`` (0.574).
    """

    name = "mala"
    needs_gradient = True

    def __init__(self, step_size: float | None = None, target_accept: float = 0.574, adapt_rate: float = 1.0):
        if step_size is not None and not (np.isfinite(step_size) and step_size > 0):
            raise ValueError(f"step_size must be positive and finite, got {step_size}")
        if not 0.0 < target_accept < 1.0:
            raise ValueError(f"target_accept must be in (0, 1), got {target_accept}")
        self.step_size = step_size
        self.target_accept = float(target_accept)
        self.adapt_rate = float(adapt_rate)

    def init(self, state):
        eps = self.step_size if self.step_size is not None else 1.0 * state.dim ** (-1.0 / 6.0)
        return HMCParams(float(eps), particle_variance(state.x))

    def tune(self, params, state, info, log_weights=None):
        w = _moments_weights(log_weights)
        eps = params.step_size
        if info is not None:
            eps = float(np.clip(eps * np.exp(self.adapt_rate * (info.acceptance_rate - self.target_accept)), 1e-6, 10.0))
        return HMCParams(eps, particle_variance(state.x, w), particle_variance_loo(state.x, w))

    def population_params(self, params: HMCParams) -> HMCParams:
        return params if params.particle_inv_mass is None else replace(params, particle_inv_mass=None)

    @staticmethod
    def _log_q(x_to, x_from, grad_from, eps, inv_mass):
        mean = x_from + 0.5 * eps**2 * inv_mass * grad_from
        r = x_to - mean
        return -0.5 * np.sum(r * r / (eps**2 * inv_mass), axis=1)

    def step(self, rng, state, density, path, tau, params: HMCParams):
        eps, inv_mass = params.step_size, params.inv_mass_for(state.n)
        g = state.grad_log_density(path, tau)
        with np.errstate(over="ignore", invalid="ignore"):  # non-finite proposals are rejected
            x_new = state.x + 0.5 * eps**2 * inv_mass * g + eps * np.sqrt(inv_mass) * rng.standard_normal(state.x.shape)
        proposal = ParticleState.evaluate(density, x_new, gradient=True)
        g_new = proposal.grad_log_density(path, tau)
        with np.errstate(over="ignore", invalid="ignore"):
            log_ratio = (
                proposal.log_density(path, tau)
                + self._log_q(state.x, x_new, g_new, eps, inv_mass)
                - state.log_density(path, tau)
                - self._log_q(x_new, state.x, g, eps, inv_mass)
            )
        log_ratio = np.where(np.isfinite(x_new).all(axis=1), log_ratio, -np.inf)
        accept, acc = _accept(rng, log_ratio)
        return state.where(accept, proposal), KernelInfo(acc, state.n)

    def describe(self) -> dict:
        return {"kernel": self.name, "target_accept": self.target_accept}


KERNELS = {
    "hmc": HMC,
    "rwmh": RandomWalkMetropolis,
    "mh": RandomWalkMetropolis,
    "imh": IndependentMetropolis,
    "mala": MALA,
}


def make_kernel(kernel, **kwargs) -> MutationKernel:
    """Build a kernel from a name (``"hmc"``, ``"rwmh"``/``"mh"``) or pass an instance through.

    Parameters
    ----------
    kernel : str or MutationKernel
        The kernel or its name.
    **kwargs
        Constructor arguments for a named kernel.
    """
    if isinstance(kernel, MutationKernel):
        if kwargs:
            raise TypeError("kernel_kwargs cannot be combined with a kernel instance")
        return kernel
    if isinstance(kernel, str):
        key = kernel.lower()
        if key in KERNELS:
            return KERNELS[key](**kwargs)
    raise ValueError(
        f"kernel={kernel!r} is unknown; choose one of {sorted(KERNELS)} or pass a "
        "MutationKernel instance"
    )


def with_step_size(params: HMCParams, step_size: float) -> HMCParams:
    """A copy of ``params`` with another step size (for tests and manual control)."""
    return replace(params, step_size=float(step_size))
