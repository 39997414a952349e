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
in :mod:`.moments`, HMC and MALA in :mod:`.hmc`; random-walk and independence Metropolis,
the registry :data:`KERNELS` and :func:`make_kernel` here (import kernels from here).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .hmc import HMC, MALA, HMCParams, with_step_size
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
from .particles import ParticleState

__all__ = [
    "HMC",
    "IMHThenHMC",
    "KERNELS",
    "MALA",
    "HMCParams",
    "IMHParams",
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


@dataclass
class IMHParams:
    """Gaussian independence proposal ``N(mean, L Lᵀ)``.

    With ``cross_fit`` (what ``init`` and ``tune`` return) a transition does not use
    ``mean``/``chol`` (the whole population's fit, kept for the record): it moves the two
    halves of the population in turn, each with a Gaussian fitted to the other half
    (:meth:`IndependentMetropolis.step`). ``weights`` are the population's normalized
    moment weights at tuning (``None``: equal). Without ``cross_fit`` (parameters replayed
    from another run, :meth:`IndependentMetropolis.population_params`) the proposal is
    ``N(mean, L Lᵀ)`` for every particle.
    """

    mean: np.ndarray
    chol: np.ndarray
    cross_fit: bool = False
    weights: np.ndarray | None = None

    def log_proposal(self, x: np.ndarray) -> np.ndarray:
        """Log-density of the proposal at the rows of ``x`` (normalizing constant omitted)."""
        from scipy.linalg import solve_triangular

        z = solve_triangular(self.chol, (x - self.mean).T, lower=True).T
        return -0.5 * np.sum(z * z, axis=1)


def _halves(state: ParticleState) -> tuple[np.ndarray, np.ndarray] | None:
    """The two groups of a cross-fitted transition (row indices): particles of even and odd
    families (a particle and its copies from resampling stay together), else even and odd
    rows; ``None`` when a group would have fewer than 2 particles."""
    n = state.n
    if state.family is not None:
        odd = state.family % 2 == 1
        groups = (np.flatnonzero(~odd), np.flatnonzero(odd))
        if min(len(g) for g in groups) >= 2:
            return groups
    groups = (np.arange(0, n, 2), np.arange(1, n, 2))
    return groups if n >= 4 else None


def _put_rows(state: ParticleState, rows: np.ndarray, sub: ParticleState) -> ParticleState:
    """``state`` with its ``rows`` replaced by ``sub``'s particles (in order)."""
    mask = np.zeros(state.n, dtype=bool)
    mask[rows] = True
    rest = np.flatnonzero(~mask)
    order = np.empty(state.n, dtype=np.intp)
    order[np.concatenate([rows, rest])] = np.arange(state.n)
    return ParticleState.concatenate([sub, state.take(rest)]).take(order)


class IndependentMetropolis(MutationKernel):
    """Independent Metropolis-Hastings with Gaussians fitted to the population (as in PyMC).

    A transition moves the population in two halves, one after the other: each half with a
    Gaussian proposal whose mean and covariance are the (weighted) moments of the *other*
    half, its current positions, the covariance inflated by ``scale²``. The halves are the
    particles of even and of odd families (initial ancestors) where the population has
    both, so neither a particle nor its copies from resampling enter its own proposal; the
    acceptance ratio includes the proposal densities. Each half-move is then an exact
    Metropolis-Hastings move for ``γ_τ`` given the other half, and the transition leaves
    the population's target invariant. (A proposal fitted to the whole population, moving
    particle ``i``, depends on ``i``'s own position without a Hastings correction: with a
    2000-particle SMC on the suite's d = 120 regression it biased ``log Z`` by +0.43 nat,
    32 times its MCSE; docs/validation.md, "Independence moves".)

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

    def _fit(self, x: np.ndarray, w: np.ndarray | None) -> IMHParams:
        mean = x.mean(axis=0) if w is None else w @ x
        return IMHParams(mean, cholesky(particle_covariance(x, w)) * self.scale)

    def _tuned(self, state, log_weights) -> IMHParams:
        w = moments_weights(log_weights)
        return replace(self._fit(state.x, w), cross_fit=True, weights=w)

    def init(self, state):
        return self._tuned(state, None)

    def tune(self, params, state, info, log_weights=None):
        return self._tuned(state, log_weights)

    def population_params(self, params: IMHParams) -> IMHParams:
        return replace(params, cross_fit=False, weights=None)

    # the proposal is fitted to the whole population: the same at every level, not adapted
    def level_params(self, params, n_levels):
        return LevelParams(params, n_levels)

    def stack_level_params(self, params_per_level):
        return LevelParams(params_per_level[0], len(params_per_level))

    def select_level_params(self, level_params, levels):
        return level_params.base

    def adapt_level_params(self, level_params, levels, moved, gain):
        pass

    def _move(self, rng, state, density, path, tau, proposal: IMHParams):
        """One independence move of every particle of ``state`` with ``proposal``; returns
        the new state and the acceptance probabilities."""
        x_new = proposal.mean + rng.standard_normal(state.x.shape) @ proposal.chol.T
        moved = ParticleState.evaluate(density, x_new, gradient=False)
        with np.errstate(invalid="ignore"):
            log_ratio = (moved.log_density(path, tau) - proposal.log_proposal(x_new)) - (
                state.log_density(path, tau) - proposal.log_proposal(state.x)
            )
        accept, _ = metropolis_accept(rng, log_ratio)
        prob = np.exp(np.minimum(np.where(np.isnan(log_ratio), -np.inf, log_ratio), 0.0))
        return state.where(accept, moved), prob

    def step(self, rng, state, density, path, tau, params: IMHParams):
        halves = _halves(state) if params.cross_fit else None
        if halves is None:  # a replayed (fixed) proposal, or too few particles to split
            new, prob = self._move(rng, state, density, path, tau, params)
            return new, KernelInfo(float(prob.mean()), state.n)
        w = (
            params.weights
            if params.weights is not None and len(params.weights) == state.n
            else None
        )
        prob = np.empty(state.n)
        for rows, other in (halves, halves[::-1]):
            wo = None
            if w is not None and w[other].sum() > 0:
                wo = w[other] / w[other].sum()
            proposal = self._fit(state.x[other], wo)
            tau_rows = tau[rows] if np.ndim(tau) else tau
            sub, prob[rows] = self._move(rng, state.take(rows), density, path, tau_rows, proposal)
            state = _put_rows(state, rows, sub)
        return state, KernelInfo(float(prob.mean()), state.n)

    def describe(self) -> dict:
        return {"kernel": self.name, "scale": self.scale}


@dataclass(frozen=True)
class FallbackInfo(KernelInfo):
    """:class:`KernelInfo` of :class:`IMHThenHMC`: which kernel made the transition."""

    primary: bool = True


@dataclass
class FallbackParams:
    """Parameters of :class:`IMHThenHMC`: the kernel in use (``primary``) and its parameters."""

    primary: bool
    params: object


class IMHThenHMC(MutationKernel):
    """Independence Metropolis until it stops moving the particles, then HMC.

    Moves with :class:`IndependentMetropolis` until one of its transitions accepts, on
    average, fewer than ``min_acceptance`` of its proposals; from the next transition on,
    for the rest of the run, with :class:`HMC` (gradients are evaluated then, once, for the
    particles IMH left without them). The default ``min_acceptance = 0.5 / 20`` is where
    even the 20 transitions a stage may take (``max_mcmc_steps``) would move fewer than half
    of the particles once: an independence proposal that far from the target does not mix,
    while HMC's local moves still do. Each transition is an exact move for ``γ_τ`` given its
    parameters; the switch is decided between transitions from the last one's acceptance.

    Parameters
    ----------
    min_acceptance : float, default 0.025
        IMH's mean acceptance probability below which HMC takes over.
    scale : float, default 1.0
        :class:`IndependentMetropolis`'s ``scale``.
    **hmc_kwargs
        Options of :class:`HMC`.
    """

    name = "imh_then_hmc"
    needs_gradient = False  # IMH's first; HMC evaluates gradients when it takes over

    def __init__(self, min_acceptance: float = 0.025, scale: float = 1.0, **hmc_kwargs):
        if not (0.0 <= min_acceptance < 1.0):
            raise ValueError(f"min_acceptance must be in [0, 1), got {min_acceptance}")
        self.min_acceptance = float(min_acceptance)
        self.imh = IndependentMetropolis(scale=scale)
        self.hmc = HMC(**hmc_kwargs)

    def init(self, state):
        return FallbackParams(True, self.imh.init(state))

    def tune(self, params: FallbackParams, state, info, log_weights=None) -> FallbackParams:
        if params.primary:
            stuck = isinstance(info, FallbackInfo) and info.primary
            if not (stuck and info.acceptance_rate < self.min_acceptance):
                return FallbackParams(True, self.imh.tune(params.params, state, info, log_weights))
            # HMC starts from its own initial step size: IMH's acceptance says nothing of it
            return FallbackParams(False, self.hmc.tune(self.hmc.init(state), state, None, log_weights))
        return FallbackParams(False, self.hmc.tune(params.params, state, info, log_weights))

    def step(self, rng, state, density, path, tau, params: FallbackParams):
        if params.primary:
            new, info = self.imh.step(rng, state, density, path, tau, params.params)
            return new, FallbackInfo(info.acceptance_rate, info.n_evals, True)
        extra = 0
        if not state.has_gradient:
            state = ParticleState.evaluate(density, state.x, gradient=True).with_family(state.family)
            extra = state.n
        new, info = self.hmc.step(rng, state, density, path, tau, params.params)
        return new, FallbackInfo(info.acceptance_rate, info.n_evals + extra, False)

    def population_params(self, params: FallbackParams) -> FallbackParams:
        kernel = self.imh if params.primary else self.hmc
        return FallbackParams(params.primary, kernel.population_params(params.params))

    def describe(self) -> dict:
        return {"kernel": self.name, "min_acceptance": self.min_acceptance, "scale": self.imh.scale,
                **{f"hmc_{k}": v for k, v in self.hmc.describe().items() if k != "kernel"}}


KERNELS = {
    "hmc": HMC,
    "rwmh": RandomWalkMetropolis,
    "mh": RandomWalkMetropolis,
    "imh": IndependentMetropolis,
    "imh_then_hmc": IMHThenHMC,
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
