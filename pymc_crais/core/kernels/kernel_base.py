"""The interface of a batched mutation kernel and of its per-level parameters.

See :mod:`pymc_crais.core.kernels` for what a kernel does and the kernels themselves.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from ..density import BatchedDensity
from ..particles import ParticleState
from ..paths import AnnealingPath

__all__ = [
    "KernelInfo",
    "LevelParams",
    "MutationKernel",
    "ParamsByTau",
    "adapt_log_steps",
    "metropolis_accept",
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


def metropolis_accept(rng: np.random.Generator, log_ratio: np.ndarray) -> tuple[np.ndarray, float]:
    """Metropolis decisions for ``log_ratio``; NaN (both densities zero) means reject."""
    lr = np.where(np.isnan(log_ratio), -np.inf, log_ratio)
    accept = np.log(rng.random(lr.shape[0])) < lr
    prob = np.exp(np.minimum(lr, 0.0))
    return accept, float(prob.mean())


def adapt_log_steps(
    lp: LevelParams, levels, moved, target: float, gain: float, lo: float, hi: float
):
    """``log_step[k] += gain · (acceptance at level k − target)`` for the visited levels, clipped."""
    n = np.bincount(levels, minlength=lp.n_levels)
    acc = np.bincount(levels, weights=moved.astype(float), minlength=lp.n_levels)
    seen = n > 0
    lp.log_step[seen] += gain * (acc[seen] / n[seen] - target)
    np.clip(lp.log_step, lo, hi, out=lp.log_step)


class ParamsByTau:
    """Kernel parameters of a previous run, looked up by τ (the last stage at or below τ).

    Lets a final run re-use a tuning run's kernels on a different (e.g. interpolated) grid,
    so that its kernels are fixed before its particles exist.
    """

    def __init__(self, taus, params: list):
        if len(params) != len(taus) or not params:
            raise ValueError("need one parameter set per stage")
        self.taus = np.asarray(taus, dtype=np.float64)
        self.params = list(params)

    def __call__(self, tau: float):
        i = int(np.searchsorted(self.taus, tau, side="right")) - 1
        return self.params[min(max(i, 0), len(self.params) - 1)]
