"""Gradient kernels with a step size and a mass matrix: HMC and MALA (batched).

Both take :class:`HMCParams` (step size and the population's per-coordinate variances as
inverse mass, leave-one-out per particle) and own per-level versions of them for tempered
sampling (:class:`_StepMassLevels`). HMC also uses a dense metric (the population's
covariance, cross-fitted between the two halves of the population) while the dimension
allows, and chooses its number of leapfrog steps from the step size so that a trajectory
covers about the population's scale. See :mod:`pymc_crais.core.kernels` for the interface.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..particles import ParticleState
from .kernel_base import KernelInfo, LevelParams, MutationKernel, adapt_log_steps, metropolis_accept
from .moments import (
    apply_by_half,
    cholesky,
    cross_fitted_chol,
    moments_weights,
    particle_covariance,
    particle_variance,
    particle_variance_loo,
)
from .scale_moves import ScaleMoves, adapt_log_c, fit_scale_moves, scale_move_step

__all__ = [
    "DENSE_MAX_DIM_CAP",
    "DENSE_PARTICLES_PER_DIM",
    "HMC",
    "MALA",
    "HMCInfo",
    "HMCParams",
    "with_step_size",
]


DENSE_PARTICLES_PER_DIM = 2
"""Above ``dense_max_dim``, a dense metric when each half of the population has this many
particles per dimension (:meth:`HMC.dense_for`). On a ``pm.GaussianRandomWalk`` of 150
states (d = 152) per-coordinate variances left the particles in place (mean correlation with
the stage's start 0.96–0.98 for τ ≤ 0.5; ``log Z`` −0.67 ± 0.67, flagged); the dense metric
made it right (−0.02 ± 0.07; docs/validation.md, applied tier)."""
DENSE_MAX_DIM_CAP = 1000
"""No dense metric above this dimension (a ``d × d`` product per particle and leapfrog step)."""


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
        # per-level diagonal masses: no dense factor, and (HMC) the trajectory length from
        # the particles' own step sizes
        return replace(
            level_params.base,
            step_size=np.exp(level_params.log_step)[levels][:, None],
            inv_mass=level_params.inv_mass[levels],
            particle_inv_mass=None,
            chol=None,
            split_chol=None,
            groups=None,
            n_leapfrog=getattr(self, "fixed_leapfrog", None),
            scale=None,
        )

    def adapt_level_params(self, level_params, levels, moved, gain):
        adapt_log_steps(
            level_params, levels, moved, self.target_accept, gain, np.log(1e-6), np.log(10.0)
        )


@dataclass(frozen=True)
class HMCInfo(KernelInfo):
    """An HMC transition with scale moves: also their mean acceptance probability."""

    scale_acceptance: float = np.nan


@dataclass(frozen=True)
class HMCParams:
    """Step size and inverse mass matrix (the particles' variances or covariance).

    ``particle_inv_mass`` (shape ``(N, d)``), when set by ``tune``, replaces ``inv_mass`` in
    the transition: row ``i`` is the population variance without particle ``i``
    (:func:`particle_variance_loo`), so no particle's move depends on its own position.
    ``chol`` (``(d, d)``) is the Cholesky factor of the population's covariance: a dense
    inverse mass, replacing the diagonal one; ``split_chol`` (``(2, d, d)``, set by
    ``tune``) replaces it for a population: even particles move with the factor of the odd
    ones' covariance and vice versa (:func:`cross_fitted_chol`), or, when the particles carry
    families (``groups``: the parity of each particle's family), the particles of even
    families with the factor of the odd families' covariance, so that neither a particle
    nor its copies from resampling enter its own metric. ``n_leapfrog`` (HMC) is
    the trajectory's number of leapfrog steps; ``None``: the kernel's rule.
    """

    step_size: float
    inv_mass: np.ndarray
    particle_inv_mass: np.ndarray | None = None
    chol: np.ndarray | None = None
    split_chol: np.ndarray | None = None
    n_leapfrog: int | None = None
    groups: np.ndarray | None = None
    scale: ScaleMoves | None = None

    def inv_mass_for(self, n: int) -> np.ndarray:
        """The inverse masses a transition of ``n`` particles uses."""
        pm = self.particle_inv_mass
        return self.inv_mass if pm is None or pm.shape[0] != n else pm


class HMC(_StepMassLevels, MutationKernel):
    """Hamiltonian Monte Carlo, batched over particles, with a metric from the population.

    The inverse mass matrix is the population's covariance (dense, cross-fitted between
    halves) while ``d ≤ dense_max_dim`` or the population has ``4 d`` particles or more
    (:meth:`dense_for`), its per-coordinate variances (leave-one-out) otherwise;
    the step size is adapted stage to stage towards ``target_accept``. With
    ``n_leapfrog="auto"`` the number of leapfrog steps is ``⌈trajectory_length / ε⌉`` (at
    most ``max_leapfrog``): in whitened coordinates a trajectory then covers about
    ``trajectory_length`` standard deviations of the population, whatever the step size;
    the step size of each transition is jittered by a factor in ``[0.8, 1.2]`` (drawn once
    per transition, independently of the particles) against periodic trajectories. Within a
    transition the trajectory length is fixed, so every transition is an exact MH move for
    ``γ_τ``.

    Parameters
    ----------
    n_leapfrog : int or "auto", default "auto"
        Leapfrog steps per transition (each costs one batched logp+gradient call).
    step_size : float, optional
        Initial step size; default ``0.5 · d^{-1/4}`` in whitened coordinates.
    target_accept : float, default 0.7
        Acceptance probability the step size is adapted towards.
    adapt_rate : float, default 1.0
        Gain of ``log ε += rate · (acc − target)``.
    trajectory_length : float, default 1.25
        ``ε · n_leapfrog`` of ``"auto"``, in whitened units.
    max_leapfrog : int, default 10
        Cap of ``"auto"``.
    dense_max_dim : int, default 150
        Largest dimension with a dense metric whatever the number of particles (0: always
        diagonal); above it, dense while each half of the population has
        :data:`DENSE_PARTICLES_PER_DIM` particles per dimension (up to
        :data:`DENSE_MAX_DIM_CAP`).
    scale_moves : bool, default False
        After each trajectory, make the scale moves fitted to the population
        (:mod:`~pymc_crais.core.kernels.scale_moves`: a hierarchical scale and the block it
        scales moved together, one model evaluation per move and particle). Off by default:
        on the applied tier they did not make ``pmc.sample_smc`` right where it was wrong
        (docs/validation.md, "Scale moves").
    """

    name = "hmc"
    needs_gradient = True

    def __init__(
        self,
        n_leapfrog: int | str = "auto",
        step_size: float | None = None,
        target_accept: float = 0.7,
        adapt_rate: float = 1.0,
        trajectory_length: float = 1.25,
        max_leapfrog: int = 10,
        dense_max_dim: int = 150,
        scale_moves: bool = False,
    ):
        auto = isinstance(n_leapfrog, str) and n_leapfrog == "auto"
        if not auto and (isinstance(n_leapfrog, str) or int(n_leapfrog) != n_leapfrog or n_leapfrog < 1):
            raise ValueError(f"n_leapfrog must be a positive integer or 'auto', got {n_leapfrog!r}")
        if step_size is not None and not (np.isfinite(step_size) and step_size > 0):
            raise ValueError(f"step_size must be positive and finite, got {step_size}")
        if not 0.0 < target_accept < 1.0:
            raise ValueError(f"target_accept must be in (0, 1), got {target_accept}")
        if not (np.isfinite(trajectory_length) and trajectory_length > 0):
            raise ValueError(f"trajectory_length must be positive, got {trajectory_length}")
        if int(max_leapfrog) != max_leapfrog or max_leapfrog < 1:
            raise ValueError(f"max_leapfrog must be a positive integer, got {max_leapfrog}")
        if int(dense_max_dim) != dense_max_dim or dense_max_dim < 0:
            raise ValueError(f"dense_max_dim must be an integer >= 0, got {dense_max_dim}")
        self.fixed_leapfrog = None if auto else int(n_leapfrog)
        self.n_leapfrog = "auto" if auto else int(n_leapfrog)
        self.step_size = step_size
        self.target_accept = float(target_accept)
        self.adapt_rate = float(adapt_rate)
        self.trajectory_length = float(trajectory_length)
        self.max_leapfrog = int(max_leapfrog)
        self.dense_max_dim = int(dense_max_dim)
        self.scale_moves = bool(scale_moves)

    def leapfrogs_for(self, step_size) -> int:
        """Leapfrog steps of a transition with ``step_size`` (a float, or one per particle:
        their median)."""
        if self.fixed_leapfrog is not None:
            return self.fixed_leapfrog
        eps = float(np.median(step_size))
        return int(np.clip(np.ceil(self.trajectory_length / eps), 1, self.max_leapfrog))

    def dense_for(self, d: int, n: int) -> bool:
        """Whether ``n`` particles in dimension ``d`` move with a dense metric: ``d ≤
        dense_max_dim``, or each half of the population has at least
        :data:`DENSE_PARTICLES_PER_DIM` particles per dimension (up to
        :data:`DENSE_MAX_DIM_CAP`), so that its covariance is shrunk towards the diagonal by a
        weight ``d / (2 n_half)`` of at most 1/4 (:func:`particle_covariance`)."""
        if d <= self.dense_max_dim:
            return True
        return (
            self.dense_max_dim > 0
            and d <= DENSE_MAX_DIM_CAP
            and n // 2 >= DENSE_PARTICLES_PER_DIM * d
        )

    def init(self, state: ParticleState) -> HMCParams:
        eps = self.step_size if self.step_size is not None else 0.5 * state.dim**-0.25
        return HMCParams(float(eps), particle_variance(state.x), n_leapfrog=self.leapfrogs_for(eps))

    def tune(self, params: HMCParams, state, info, log_weights=None) -> HMCParams:
        w = moments_weights(log_weights)
        eps = params.step_size
        if info is not None:
            eps *= np.exp(self.adapt_rate * (info.acceptance_rate - self.target_accept))
            eps = float(np.clip(eps, 1e-6, 10.0))
        chol = split = loo = None
        groups = None if state.family is None else state.family % 2
        if 2 <= state.dim and state.n >= 8 and self.dense_for(state.dim, state.n):
            chol = cholesky(particle_covariance(state.x, w))
            split = cross_fitted_chol(state.x, w, groups)
        else:
            loo = particle_variance_loo(state.x, w)
        var = particle_variance(state.x, w)
        scale = None
        if self.scale_moves:
            log_c = params.scale.log_c if params.scale is not None else 0.0
            if isinstance(info, HMCInfo):
                log_c = adapt_log_c(log_c, info.scale_acceptance, self.adapt_rate)
            scale = fit_scale_moves(state.x, w, groups, log_c)
        groups = groups if split is not None else None
        return HMCParams(eps, var, loo, chol, split, self.leapfrogs_for(eps), groups, scale)

    def population_params(self, params: HMCParams) -> HMCParams:
        if params.particle_inv_mass is None and params.split_chol is None and params.scale is None:
            return params
        return replace(params, particle_inv_mass=None, split_chol=None, groups=None, scale=None)

    @staticmethod
    def _metric(params: HMCParams, n: int):
        """``(lift, pull)``: ``v ↦ L v`` and ``g ↦ Lᵀ g`` row by row, ``L Lᵀ`` the inverse
        mass each particle moves with (momentum ``p = L^{-T} v``, kinetic energy ``|v|²/2``)."""
        groups = params.groups
        if params.split_chol is not None and (groups is None or groups.shape[0] == n):
            split, split_t = params.split_chol, np.swapaxes(params.split_chol, 1, 2)
            return (lambda v: apply_by_half(v, split, groups)), (
                lambda g: apply_by_half(g, split_t, groups)
            )
        if params.chol is not None:
            chol = params.chol
            return (lambda v: v @ chol.T), (lambda g: g @ chol)
        scale = np.sqrt(params.inv_mass_for(n))
        return (lambda v: scale * v), (lambda g: scale * g)

    def step(self, rng, state, density, path, tau, params: HMCParams):
        n_leap = params.n_leapfrog or self.leapfrogs_for(params.step_size)
        eps = params.step_size
        if self.fixed_leapfrog is None:
            eps = eps * rng.uniform(0.8, 1.2)
        lift, pull = self._metric(params, state.n)
        v = rng.standard_normal(state.x.shape)
        kinetic0 = 0.5 * np.sum(v * v, axis=1)
        x = state.x
        v = v + 0.5 * eps * pull(state.grad_log_density(path, tau))
        current = state
        with np.errstate(over="ignore", invalid="ignore"):  # diverging trajectories: rejected below
            for i in range(n_leap):
                x = x + eps * lift(v)
                current = ParticleState.evaluate(density, x, gradient=True)
                g = pull(current.grad_log_density(path, tau))
                v = v + (eps if i < n_leap - 1 else 0.5 * eps) * g
            kinetic1 = 0.5 * np.sum(v * v, axis=1)
            log_ratio = (current.log_density(path, tau) - kinetic1) - (
                state.log_density(path, tau) - kinetic0
            )
        log_ratio = np.where(np.isfinite(x).all(axis=1), log_ratio, -np.inf)
        accept, acc = metropolis_accept(rng, log_ratio)
        new = state.where(accept, current)
        if params.scale is None:
            return new, KernelInfo(acc, state.n * n_leap)
        new, scale_acc, extra = scale_move_step(rng, new, density, path, tau, params.scale)
        return new, HMCInfo(acc, state.n * n_leap + extra, scale_acc)

    def describe(self) -> dict:
        return {
            "kernel": self.name,
            "n_leapfrog": str(self.n_leapfrog),
            "trajectory_length": self.trajectory_length,
            "max_leapfrog": self.max_leapfrog,
            "dense_max_dim": self.dense_max_dim,
            "target_accept": self.target_accept,
            "scale_moves": self.scale_moves,
        }


class MALA(_StepMassLevels, MutationKernel):
    """Metropolis-adjusted Langevin with a diagonal preconditioner (the particle variances).

    Proposal ``x' = x + ½ε² M⁻¹∇log γ(x) + ε M^{-1/2} z``; the step size is adapted stage to
    stage towards ``target_accept`` (0.574).
    """

    name = "mala"
    needs_gradient = True

    def __init__(
        self, step_size: float | None = None, target_accept: float = 0.574, adapt_rate: float = 1.0
    ):
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
        w = moments_weights(log_weights)
        eps = params.step_size
        if info is not None:
            eps = float(
                np.clip(
                    eps * np.exp(self.adapt_rate * (info.acceptance_rate - self.target_accept)),
                    1e-6,
                    10.0,
                )
            )
        return HMCParams(eps, particle_variance(state.x, w), particle_variance_loo(state.x, w))

    def population_params(self, params: HMCParams) -> HMCParams:
        return (
            params if params.particle_inv_mass is None else replace(params, particle_inv_mass=None)
        )

    @staticmethod
    def _log_q(x_to, x_from, grad_from, eps, inv_mass):
        mean = x_from + 0.5 * eps**2 * inv_mass * grad_from
        r = x_to - mean
        return -0.5 * np.sum(r * r / (eps**2 * inv_mass), axis=1)

    def step(self, rng, state, density, path, tau, params: HMCParams):
        eps, inv_mass = params.step_size, params.inv_mass_for(state.n)
        g = state.grad_log_density(path, tau)
        with np.errstate(over="ignore", invalid="ignore"):  # non-finite proposals are rejected
            x_new = (
                state.x
                + 0.5 * eps**2 * inv_mass * g
                + eps * np.sqrt(inv_mass) * rng.standard_normal(state.x.shape)
            )
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
        accept, acc = metropolis_accept(rng, log_ratio)
        return state.where(accept, proposal), KernelInfo(acc, state.n)

    def describe(self) -> dict:
        return {"kernel": self.name, "target_accept": self.target_accept}


def with_step_size(params: HMCParams, step_size: float) -> HMCParams:
    """A copy of ``params`` with another step size (for tests and manual control)."""
    return replace(params, step_size=float(step_size))
