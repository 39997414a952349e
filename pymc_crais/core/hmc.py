"""Gradient kernels with a step size and a diagonal mass: HMC and MALA (batched).

Both take :class:`HMCParams` (step size and the population's per-coordinate variances as
inverse mass, leave-one-out per particle) and own per-level versions of them for tempered
sampling (:class:`_StepMassLevels`). See :mod:`pymc_crais.core.kernels` for the interface.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .kernel_base import KernelInfo, LevelParams, MutationKernel, adapt_log_steps, metropolis_accept
from .moments import moments_weights, particle_variance, particle_variance_loo
from .particles import ParticleState

__all__ = ["HMC", "MALA", "HMCParams", "with_step_size"]


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
        adapt_log_steps(
            level_params, levels, moved, self.target_accept, gain, np.log(1e-6), np.log(10.0)
        )


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
        eps = self.step_size if self.step_size is not None else 0.5 * state.dim**-0.25
        return HMCParams(float(eps), particle_variance(state.x))

    def tune(self, params: HMCParams, state, info, log_weights=None) -> HMCParams:
        w = moments_weights(log_weights)
        eps = params.step_size
        if info is not None:
            eps *= np.exp(self.adapt_rate * (info.acceptance_rate - self.target_accept))
            eps = float(np.clip(eps, 1e-6, 10.0))
        return HMCParams(eps, particle_variance(state.x, w), particle_variance_loo(state.x, w))

    def population_params(self, params: HMCParams) -> HMCParams:
        return (
            params if params.particle_inv_mass is None else replace(params, particle_inv_mass=None)
        )

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
        accept, acc = metropolis_accept(rng, log_ratio)
        return state.where(accept, current), KernelInfo(acc, state.n * self.n_leapfrog)

    def describe(self) -> dict:
        return {
            "kernel": self.name,
            "n_leapfrog": self.n_leapfrog,
            "target_accept": self.target_accept,
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
