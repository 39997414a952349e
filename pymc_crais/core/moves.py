"""How many kernel transitions a stage makes, and when to stop: one move object.

A :class:`Moves` object runs the transitions of one stage (an annealing stage, one
``pm.sample_smc`` mutation, the ``θ | k`` half of a tempered-sampling sweep):

* ``n_steps`` transitions, or, with a ``stopping_rule``, up to ``n_steps`` transitions that
  stop as soon as the rule says the particles have moved enough;
* between two transitions of a stage the kernel may be re-tuned from the population
  (``retune``; the caller supplies the tuning function, which knows the weights).

The stopping rule is a pluggable attribute: :class:`CorrelationStop` is PyMC's rule (stop
when one more transition lowers the mean correlation between the particles and their
positions at the start of the stage by less than a tolerance, or below a floor). Another
rule needs only ``start(state) -> tracker`` with ``tracker.done(state) -> bool``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .kernels import KernelInfo, MutationKernel
from .particles import ParticleState

__all__ = ["CorrelationStop", "MoveResult", "Moves", "StoppingRule", "mean_correlation"]


def mean_correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Mean over coordinates of the Pearson correlation between two populations' columns."""
    ac = a - a.mean(axis=0)
    bc = b - b.mean(axis=0)
    den = np.sqrt(np.sum(ac * ac, axis=0) * np.sum(bc * bc, axis=0))
    ok = den > 0
    if not ok.any():
        return 0.0
    return float(np.mean(np.sum(ac * bc, axis=0)[ok] / den[ok]))


class StoppingRule:
    """Interface: ``start(state)`` at the start of a stage returns a tracker whose
    ``done(state)`` says, after each transition, whether the stage should stop."""

    def start(self, state: ParticleState):
        raise NotImplementedError


@dataclass(frozen=True)
class CorrelationStop(StoppingRule):
    """Stop once a transition lowers the mean correlation with the stage's start by less
    than ``tolerance``, or the correlation is below ``floor`` (PyMC's rule).

    Parameters
    ----------
    tolerance : float, default 0.01
        In ``[0, 1)``.
    floor : float, default 0.1
    """

    tolerance: float = 0.01
    floor: float = 0.1

    def __post_init__(self):
        if not 0.0 <= self.tolerance < 1.0:
            raise ValueError(f"correlation_threshold must be in [0, 1), got {self.tolerance}")

    def start(self, state: ParticleState) -> _CorrelationTracker:
        return _CorrelationTracker(self, state.x)


@dataclass
class _CorrelationTracker:
    rule: CorrelationStop
    x_start: np.ndarray
    previous: float = 1.0

    def done(self, state: ParticleState) -> bool:
        corr = mean_correlation(self.x_start, state.x)
        if self.previous - corr < self.rule.tolerance or corr < self.rule.floor:
            return True
        self.previous = corr
        return False


@dataclass
class MoveResult:
    """What the transitions of one stage did.

    Attributes
    ----------
    state : ParticleState
    params : object
        The kernel parameters of the last transition.
    info : KernelInfo or None
        The last transition's info (the incoming one if no transition ran).
    acceptance_rates : list of float
        One per transition.
    moved : numpy.ndarray of bool, shape (N,)
        Whether any transition changed each particle's position.
    """

    state: ParticleState
    params: object
    info: KernelInfo | None
    acceptance_rates: list = field(default_factory=list)
    moved: np.ndarray | None = None

    @property
    def n_steps(self) -> int:
        """Transitions made."""
        return len(self.acceptance_rates)

    @property
    def acceptance_rate(self) -> float:
        """Mean acceptance over the transitions (NaN if none ran)."""
        return float(np.mean(self.acceptance_rates)) if self.acceptance_rates else np.nan


@dataclass(frozen=True)
class Moves:
    """The transitions of one stage (see the module docstring).

    Attributes
    ----------
    n_steps : int
        Transitions per stage, or the cap when ``stopping_rule`` is set.
    stopping_rule : StoppingRule or None
        ``None``: exactly ``n_steps`` transitions.
    retune : bool, default True
        Re-tune the kernel between the transitions of a stage (when the caller gives a
        tuning function).
    """

    n_steps: int = 1
    stopping_rule: StoppingRule | None = None
    retune: bool = True

    @classmethod
    def fixed(cls, n_steps: int, retune: bool = True) -> Moves:
        """Exactly ``n_steps`` (≥ 0) transitions per stage."""
        if int(n_steps) != n_steps or n_steps < 0:
            raise ValueError(
                f"n_mcmc_steps must be a non-negative integer or 'auto', got {n_steps}"
            )
        return cls(int(n_steps), None, retune)

    @classmethod
    def auto(
        cls, max_steps: int = 20, correlation_threshold: float = 0.01, retune: bool = True
    ) -> Moves:
        """Up to ``max_steps`` transitions, stopping by :class:`CorrelationStop`."""
        if int(max_steps) != max_steps or max_steps < 1:
            raise ValueError(f"max_mcmc_steps must be a positive integer, got {max_steps}")
        return cls(int(max_steps), CorrelationStop(float(correlation_threshold)), retune)

    @classmethod
    def from_setting(
        cls, n_mcmc_steps, max_mcmc_steps: int = 20, correlation_threshold: float = 0.01
    ) -> Moves:
        """From the ``n_mcmc_steps`` argument of the samplers: an integer or ``"auto"``."""
        if isinstance(n_mcmc_steps, str):
            if n_mcmc_steps != "auto":
                raise ValueError(f"n_mcmc_steps must be an integer or 'auto', got {n_mcmc_steps!r}")
            return cls.auto(max_mcmc_steps, correlation_threshold)
        return cls.fixed(n_mcmc_steps)

    def run(
        self,
        rng: np.random.Generator,
        kernel: MutationKernel,
        state: ParticleState,
        density,
        path,
        tau,
        params,
        *,
        tune: Callable | None = None,
        info: KernelInfo | None = None,
    ) -> MoveResult:
        """Make the stage's transitions at ``tau`` (a float, or one τ per particle with an
        :class:`~pymc_crais.core.paths.ArrayTauPath`).

        ``tune(params, state, info) -> params`` re-tunes the kernel before every transition
        after the first (if ``retune``); ``info`` is the last transition's info before this
        stage.
        """
        tracker = self.stopping_rule.start(state) if self.stopping_rule is not None else None
        out = MoveResult(state, params, info, [], np.zeros(state.n, dtype=bool))
        for k in range(self.n_steps):
            if k > 0 and self.retune and tune is not None:
                out.params = tune(out.params, out.state, out.info)
            new, out.info = kernel.step(rng, out.state, density, path, tau, out.params)
            out.moved |= np.any(new.x != out.state.x, axis=1)
            out.state = new
            out.acceptance_rates.append(out.info.acceptance_rate)
            if tracker is not None and tracker.done(new):
                break
        return out
