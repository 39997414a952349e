"""Independence Metropolis: Gaussians fitted to the population, cross-fitted between its
halves (:class:`IndependentMetropolis`), the funnel default of SMC that falls back to HMC
when independence proposals stop being accepted (:class:`IMHThenHMC`), and SMC's default
that moves with HMC and, at the target itself, with independence proposals while they are
accepted (:class:`FinalIMH`). Registered, with the other kernels, in :mod:`.kernels` (import
kernels from there)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..particles import ParticleState
from .hmc import HMC
from .kernel_base import KernelInfo, LevelParams, MutationKernel, metropolis_accept
from .moments import cholesky, moments_weights, particle_covariance, split_halves

__all__ = [
    "FallbackInfo",
    "FallbackParams",
    "FinalIMH",
    "FinalIMHParams",
    "IMHParams",
    "IMHThenHMC",
    "IndependentMetropolis",
]


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

    @classmethod
    def cross_fitted(cls, dim: int) -> IMHParams:
        """Parameters of a cross-fitted transition with equal weights (each half's Gaussian
        is fitted in :meth:`IndependentMetropolis.step`; ``mean``/``chol`` are placeholders)."""
        return cls(np.zeros(dim), np.eye(dim), cross_fit=True)

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
    32 times its MCSE; benchmarks/reports/validation.md, "Independence moves".)

    Parameters
    ----------
    scale : float, default 1.0
        Inflation of the fitted standard deviations.
    keep_gradients : bool, default False
        Evaluate the proposals with gradients when the particles carry them, so that a
        gradient kernel can take over without evaluating them again (:class:`FinalIMH`);
        by default proposals are evaluated without gradients.
    """

    name = "imh"
    needs_gradient = False

    def __init__(self, scale: float = 1.0, keep_gradients: bool = False):
        if not (np.isfinite(scale) and scale > 0):
            raise ValueError(f"scale must be positive, got {scale}")
        self.scale = float(scale)
        self.keep_gradients = bool(keep_gradients)

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
        the new state and the mean acceptance probability."""
        x_new = proposal.mean + rng.standard_normal(state.x.shape) @ proposal.chol.T
        gradient = self.keep_gradients and state.has_gradient
        moved = ParticleState.evaluate(density, x_new, gradient=gradient)
        with np.errstate(invalid="ignore"):
            log_ratio = (moved.log_density(path, tau) - proposal.log_proposal(x_new)) - (
                state.log_density(path, tau) - proposal.log_proposal(state.x)
            )
        accept, acc = metropolis_accept(rng, log_ratio)
        return state.where(accept, moved), acc

    def step(self, rng, state, density, path, tau, params: IMHParams):
        halves = _halves(state) if params.cross_fit else None
        if halves is None:  # a replayed (fixed) proposal, or too few particles to split
            new, acc = self._move(rng, state, density, path, tau, params)
            return new, KernelInfo(acc, state.n)
        w = (
            params.weights
            if params.weights is not None and len(params.weights) == state.n
            else None
        )
        groups = np.zeros(state.n, dtype=np.intp)
        groups[halves[1]] = 1
        acc = 0.0
        for g, rows in enumerate(halves):
            other_x, other_w = split_halves(state.x, w, groups)[1 - g]  # current positions
            proposal = self._fit(other_x, other_w)
            tau_rows = tau[rows] if np.ndim(tau) else tau
            sub, acc_g = self._move(rng, state.take(rows), density, path, tau_rows, proposal)
            state = _put_rows(state, rows, sub)
            acc += acc_g * len(rows) / state.n
        return state, KernelInfo(float(acc), state.n)

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


class _IMHAndHMC(MutationKernel):
    """Shared construction of the kernels that combine :class:`IndependentMetropolis` and
    :class:`HMC`, switching to HMC when IMH's acceptance falls under ``min_acceptance``."""

    default_min_acceptance: float
    keep_gradients = False

    def __init__(self, min_acceptance: float | None = None, scale: float = 1.0, **hmc_kwargs):
        if min_acceptance is None:
            min_acceptance = self.default_min_acceptance
        if not (0.0 <= min_acceptance < 1.0):
            raise ValueError(f"min_acceptance must be in [0, 1), got {min_acceptance}")
        self.min_acceptance = float(min_acceptance)
        self.imh = IndependentMetropolis(scale=scale, keep_gradients=self.keep_gradients)
        self.hmc = HMC(**hmc_kwargs)

    def describe(self) -> dict:
        return {
            "kernel": self.name,
            "min_acceptance": self.min_acceptance,
            "scale": self.imh.scale,
            **{f"hmc_{k}": v for k, v in self.hmc.describe().items() if k != "kernel"},
        }


class IMHThenHMC(_IMHAndHMC):
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
    default_min_acceptance = 0.5 / 20

    def init(self, state):
        return FallbackParams(True, self.imh.init(state))

    def tune(self, params: FallbackParams, state, info, log_weights=None) -> FallbackParams:
        if params.primary:
            stuck = isinstance(info, FallbackInfo) and info.primary
            if not (stuck and info.acceptance_rate < self.min_acceptance):
                return FallbackParams(True, self.imh.tune(params.params, state, info, log_weights))
            # HMC starts from its own initial step size: IMH's acceptance says nothing of it
            return FallbackParams(
                False, self.hmc.tune(self.hmc.init(state), state, None, log_weights)
            )
        return FallbackParams(False, self.hmc.tune(params.params, state, info, log_weights))

    def step(self, rng, state, density, path, tau, params: FallbackParams):
        if params.primary:
            new, info = self.imh.step(rng, state, density, path, tau, params.params)
            return new, FallbackInfo(info.acceptance_rate, info.n_evals, True)
        extra = 0
        if not state.has_gradient:
            state = ParticleState.evaluate(density, state.x, gradient=True).with_family(
                state.family
            )
            extra = state.n
        new, info = self.hmc.step(rng, state, density, path, tau, params.params)
        return new, FallbackInfo(info.acceptance_rate, info.n_evals + extra, False)

    def population_params(self, params: FallbackParams) -> FallbackParams:
        kernel = self.imh if params.primary else self.hmc
        return FallbackParams(params.primary, kernel.population_params(params.params))


@dataclass
class FinalIMHParams:
    """Parameters of :class:`FinalIMH`: HMC's (``hmc``), and whether independence moves may
    still be made at ``τ = 1`` in this run (``imh``)."""

    hmc: object
    imh: bool = True


class FinalIMH(_IMHAndHMC):
    """HMC, and at the target (``τ = 1``) independence Metropolis while it is accepted.

    Below ``τ = 1`` every transition is :class:`HMC`'s. At ``τ = 1`` (the last stage of an
    annealing run; with SMC its ``log Z`` is complete before these moves, which change only
    the posterior draws and the cost) the transitions are cross-fitted
    :class:`IndependentMetropolis` moves, until one accepts on average fewer than
    ``min_acceptance`` of its proposals; the stage's remaining transitions are HMC's. Where
    the posterior is close to Gaussian an accepted independence proposal is a fresh draw
    from it for one model evaluation, against HMC's trajectory of several. The proposals are
    evaluated with gradients (the particles carry them), so that HMC can take over without
    evaluating them again and no second function of the model is compiled. Each transition
    is an exact move for ``γ_τ`` given its parameters; the switch is decided between
    transitions from the last one's acceptance.

    The default ``min_acceptance = 1 − 0.1^(3/20) ≈ 0.29`` is the acceptance at which, if
    every particle were accepted at that rate, a third of the 20 transitions a stage may
    take (``max_mcmc_steps``) would bring the particles' correlation with the stage's start
    below the ``"auto"`` rule's bound of 0.1. Acceptance varies between particles (those in
    the target's tails, where the Gaussian fits worst, stay longest), so the transitions
    needed were about twice that prediction on the validation suite: a 10-d mixture at 0.26
    took 12–14, a d = 61 regression at 0.16 did not reach the bound in 20 (HMC: 3). Since
    ``sample_smc`` makes one transition at ``τ = 1`` where no copies are left to break up
    (``AnnealOptions.final_moves``), the switch matters only after a start drawn in families
    or moves that ran to their cap.

    Parameters
    ----------
    min_acceptance : float, default 0.29
        Independence Metropolis's mean acceptance probability below which HMC takes over.
    scale : float, default 1.0
        :class:`IndependentMetropolis`'s ``scale``.
    **hmc_kwargs
        Options of :class:`HMC`.
    """

    name = "hmc_final_imh"
    needs_gradient = True
    default_min_acceptance = 1.0 - 0.1 ** (3.0 / 20)
    keep_gradients = True  # HMC takes over without evaluating the particles again

    def init(self, state):
        return FinalIMHParams(self.hmc.init(state))

    def tune(self, params: FinalIMHParams, state, info, log_weights=None) -> FinalIMHParams:
        if isinstance(info, FallbackInfo) and info.primary:  # the last move was IMH's
            keep = info.acceptance_rate >= self.min_acceptance
            return FinalIMHParams(params.hmc, params.imh and keep)
        return FinalIMHParams(self.hmc.tune(params.hmc, state, info, log_weights), params.imh)

    def step(self, rng, state, density, path, tau, params: FinalIMHParams):
        if params.imh and np.ndim(tau) == 0 and tau >= 1.0:
            # fitted to the other half's positions with equal weights: where the last stage
            # was not resampled (a start close to the posterior) the unweighted population
            # is wider than the target, and the proposal's heavier tails let the particles
            # in the target's tails move (fitted with the weights, the acceptance was higher
            # but those particles stayed put: pima_sd5 took 5-7 transitions, not 2-5)
            new, info = self.imh.step(
                rng, state, density, path, tau, IMHParams.cross_fitted(state.dim)
            )
            return new, FallbackInfo(info.acceptance_rate, info.n_evals, True)
        return self.hmc.step(rng, state, density, path, tau, params.hmc)

    def population_params(self, params: FinalIMHParams) -> FinalIMHParams:
        # a replay (fixed parameters per stage) moves with HMC throughout
        return FinalIMHParams(self.hmc.population_params(params.hmc), False)
