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
(docs/algorithms.md, "Kernels"). The parameters that move a particle never depend on that
particle's own current position: ``tune`` gives every particle its own leave-one-out moments (diagonal
kernels) or the moments of the other half of the population (covariance kernels). A kernel
tuned with the moving particle included is not invariant for ``γ_τ`` (its proposal depends
on the current state without a Hastings correction); with HMC on a d = 5 regression this
biased AIS ``log Z`` upward by ~0.4 nats at N = 300 (docs/algorithms.md, "Adaptation bias").
What remains, the dependence through the *other* particles, is an O(1/N) bias.

Homes: the interface and :class:`LevelParams` in :mod:`.kernel_base`, the population moments
in :mod:`.moments`, HMC and MALA in :mod:`.hmc`, independence Metropolis in :mod:`.imh`;
random-walk Metropolis, the registry :data:`KERNELS` and :func:`make_kernel` here (import
kernels from here); :mod:`.moves` runs a stage's transitions (how many, re-tuning, the
waste-free chains) with any of them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..particles import ParticleState
from .hmc import HMC, MALA, HMCParams, with_step_size
from .imh import FinalIMH, IMHParams, IMHThenHMC, IndependentMetropolis
from .kernel_base import (
    KernelInfo,
    LevelParams,
    MutationKernel,
    adapt_log_steps,
    metropolis_accept,
)
from .moments import (
    apply_by_half,
    cholesky,
    cross_fitted_chol,
    floor_variance,
    moments_weights,
    particle_covariance,
    particle_variance,
    particle_variance_loo,
)

__all__ = [
    "HMC",
    "KERNELS",
    "MALA",
    "FinalIMH",
    "HMCParams",
    "IMHParams",
    "IMHThenHMC",
    "IndependentMetropolis",
    "KernelInfo",
    "LevelParams",
    "MutationKernel",
    "RWMHParams",
    "RandomWalkMetropolis",
    "floor_variance",
    "make_kernel",
    "particle_covariance",
    "particle_variance",
    "particle_variance_loo",
    "with_step_size",
]


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
        return RWMHParams(2.38 / np.sqrt(d), cholesky(particle_covariance(state.x)))

    def tune(self, params: RWMHParams, state, info, log_weights=None) -> RWMHParams:
        w = moments_weights(log_weights)
        chol = cholesky(particle_covariance(state.x, w))
        scale = params.scale
        if info is not None:
            scale *= np.exp(self.adapt_rate * (info.acceptance_rate - self.target_accept))
            ref = 2.38 / np.sqrt(state.dim)
            scale = float(np.clip(scale, 1e-4 * ref, 10.0 * ref))
        return RWMHParams(scale, chol, cross_fitted_chol(state.x, w))

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
        adapt_log_steps(
            level_params, levels, moved, self.target_accept, gain, np.log(1e-5), np.log(1e3)
        )

    def step(self, rng, state, density, path, tau, params: RWMHParams):
        z = rng.standard_normal(state.x.shape)
        if params.split_chol is not None and state.n >= 4:
            x_new = state.x + params.scale * apply_by_half(z, params.split_chol)
        else:
            x_new = state.x + params.scale * z @ params.chol.T
        proposal = ParticleState.evaluate(density, x_new, gradient=False)
        with np.errstate(invalid="ignore"):
            log_ratio = proposal.log_density(path, tau) - state.log_density(path, tau)
        accept, acc = metropolis_accept(rng, log_ratio)
        return state.where(accept, proposal), KernelInfo(acc, state.n)

    def describe(self) -> dict:
        return {"kernel": self.name, "target_accept": self.target_accept}


KERNELS = {
    "hmc": HMC,
    "rwmh": RandomWalkMetropolis,
    "mh": RandomWalkMetropolis,
    "imh": IndependentMetropolis,
    "imh_then_hmc": IMHThenHMC,
    "hmc_final_imh": FinalIMH,
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
