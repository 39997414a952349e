"""How many kernel transitions a stage makes, and when to stop: one move object.

A :class:`Moves` object runs the transitions of one stage (an annealing stage, one
``pm.sample_smc`` mutation, the ``θ | k`` half of a tempered-sampling sweep):

* ``n_transitions`` transitions, or, with a ``stopping_rule``, up to ``n_transitions``
  transitions that stop as soon as the rule says the particles have moved enough;
* between two transitions of a stage the kernel may be re-tuned from the population
  (``retune``; the caller supplies the tuning function, which knows the weights).

The stopping rule is a pluggable attribute. :class:`QuantileCorrelationStop` (``"auto"``)
is absolute: move until (nearly) every coordinate's correlation with the stage's start is
below a bound. :class:`CorrelationStop` (``"pymc"``) is PyMC's relative rule (stop when one
more transition lowers the mean correlation by less than a tolerance, or below a floor); it
stops after one transition when a kernel mixes slowly, because then every transition lowers
the correlation a little. Another rule needs only ``start(state) -> tracker`` with
``tracker.done(state) -> bool``.

:meth:`Moves.run_chains` is the move of waste-free SMC (Dau & Chopin 2022): ``M`` resampled
particles each start a chain of ``P`` states, and all ``M · P`` states are the population.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ...warnings import renamed_argument, renamed_property
from ..particles import ParticleState
from ..tails import coordinate_correlations
from .kernel_base import KernelInfo, MutationKernel

__all__ = [
    "CORRELATION_THRESHOLD",
    "MAX_CORRELATION",
    "MAX_MCMC_STEPS",
    "CorrelationStop",
    "MoveResult",
    "Moves",
    "QuantileCorrelationStop",
    "StoppingRule",
    "mean_correlation",
]

MAX_MCMC_STEPS = 20  # the cap on transitions per stage of the "auto" and "pymc" rules
MAX_CORRELATION = 0.1  # "auto": until the 0.9-quantile of the correlations is below this
CORRELATION_THRESHOLD = 0.01  # "pymc": until the mean correlation falls by less in one move


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
    tolerance : float, default :data:`CORRELATION_THRESHOLD`
        In ``[0, 1)``.
    floor : float, default 0.1
    """

    tolerance: float = CORRELATION_THRESHOLD
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


@dataclass(frozen=True)
class QuantileCorrelationStop(StoppingRule):
    """Stop once the ``quantile`` of the coordinates' absolute correlations between the
    particles and their positions at the start of the stage is below ``bound``, and at most
    a fraction ``max_unmoved`` of the particles is still where the stage started (the
    ``"auto"`` rule); with a ``horizon``, also stop once the correlation falls so slowly
    that the transitions left would neither reach the bound nor halve it.

    Unlike :class:`CorrelationStop` the rule is absolute: a kernel that lowers the
    correlation slowly keeps moving (up to the cap of :class:`Moves`), and a quantile over
    the coordinates (not their mean) keeps one slow coordinate from hiding behind fast ones.
    Absolute values, because a long trajectory can anti-correlate a particle with its start
    without mixing it; the unmoved fraction, because after resampling copies of a particle
    whose moves were all rejected are still copies, however low the correlation.

    The futility stop: let ``s_k`` be the larger of the quantile and the correlation of
    ``Δ`` after transition ``k``, and ``j`` the first transition that moved the particles
    (unmoved fraction at most ``max_unmoved``). From ``window`` moving transitions after
    ``j`` on, ``s`` fell at the geometric rate ``r = (s_k / s_j)^{1/(k − j)}`` (measured
    from ``j``, so that the sampling noise of the correlations does not pass for a
    stall), and the stage stops when the ``horizon − k`` transitions left are projected
    neither to bring it below ``bound`` nor to halve it: ``s_k r^(horizon − k) ≥ bound`` and
    ``r^(horizon − k) > 1/2`` (the latter about 4 % a transition with 16 left). For a reversible kernel at stationarity (the population near ``γ_τ``, as after
    reweighting) the correlation is a mixture of geometric decays, so its rate only slows:
    the projection from ``j`` is optimistic, and the rule stops only when even that
    projection fails. A kernel that cannot decorrelate the particles
    at this temperature (a funnel's neck, separated modes that local moves never cross)
    then makes a few transitions a stage instead of the cap; one that gets there, however
    slowly, is not stopped (``r = 0.9`` leaves ``0.9^16 = 0.19``).

    Parameters
    ----------
    bound : float, default 0.1
        In ``(0, 1]``.
    quantile : float, default 0.9
        In ``[0, 1]``; 1 is the largest coordinate correlation.
    max_unmoved : float, default 0.1
        In ``[0, 1]``.
    horizon : int or None, default None
        Transitions the stage may make (:meth:`Moves.auto` passes its cap); ``None``: no
        futility stop.
    window : int, default 3
        Moving transitions after the first before the rate is judged.
    """

    bound: float = 0.1
    quantile: float = 0.9
    max_unmoved: float = 0.1
    horizon: int | None = None
    window: int = 3

    def __post_init__(self):
        if not 0.0 < self.bound <= 1.0:
            raise ValueError(f"max_correlation must be in (0, 1], got {self.bound}")
        if not 0.0 <= self.quantile <= 1.0:
            raise ValueError(f"quantile must be in [0, 1], got {self.quantile}")
        if not 0.0 <= self.max_unmoved <= 1.0:
            raise ValueError(f"max_unmoved must be in [0, 1], got {self.max_unmoved}")
        if self.horizon is not None and int(self.horizon) < 1:
            raise ValueError(f"horizon must be a positive integer or None, got {self.horizon}")
        if int(self.window) < 1:
            raise ValueError(f"window must be a positive integer, got {self.window}")

    def start(self, state: ParticleState) -> _QuantileTracker:
        return _QuantileTracker(self, state.x, state.delta)


@dataclass
class _QuantileTracker:
    rule: QuantileCorrelationStop
    x_start: np.ndarray
    delta_start: np.ndarray
    k: int = 0
    history: list = field(default_factory=list)  # (k, s_k) of the transitions that moved

    def done(self, state: ParticleState) -> bool:
        self.k += 1
        unmoved = float(np.mean(np.all(state.x == self.x_start, axis=1)))
        if unmoved > self.rule.max_unmoved:
            return False
        corr = np.abs(coordinate_correlations(self.x_start, state.x))
        with np.errstate(invalid="ignore"):
            dcorr = np.abs(coordinate_correlations(self.delta_start[:, None], state.delta[:, None]))
        q = float(np.quantile(corr, self.rule.quantile)) if corr.size else 0.0
        d = (float(dcorr[0]) if np.isfinite(dcorr[0]) else 1.0) if dcorr.size else 0.0
        if q < self.rule.bound and d < self.rule.bound:
            return True
        self.history.append((self.k, max(q, d)))
        return self._futile()

    def _futile(self) -> bool:
        """Whether the transitions left are projected neither to bring the correlation
        below the bound nor to halve it."""
        w = int(self.rule.window)
        if self.rule.horizon is None or len(self.history) <= w:
            return False
        (k0, s0), (k1, s1) = self.history[0], self.history[-1]
        left = int(self.rule.horizon) - k1
        if left <= 0:
            return False
        if s1 >= s0:  # no progress since the first moving transition
            return True
        gain = np.exp(left * (np.log(s1) - np.log(s0)) / (k1 - k0))  # r^left
        return bool(gain > 0.5 and s1 * gain >= self.rule.bound)


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
    last: ParticleState | None = None

    @property
    def n_transitions(self) -> int:
        """Transitions made."""
        return len(self.acceptance_rates)

    n_steps = renamed_property("n_transitions", "MoveResult.n_steps")

    @property
    def acceptance_rate(self) -> float:
        """Mean acceptance over the transitions (NaN if none ran)."""
        return float(np.mean(self.acceptance_rates)) if self.acceptance_rates else np.nan


@dataclass(frozen=True)
class Moves:
    """The transitions of one stage (see the module docstring).

    Attributes
    ----------
    n_transitions : int
        Transitions per stage, or the cap when ``stopping_rule`` is set (was ``n_steps``).
    stopping_rule : StoppingRule or None
        ``None``: exactly ``n_transitions`` transitions.
    retune : bool, default True
        Re-tune the kernel between the transitions of a stage (when the caller gives a
        tuning function).
    """

    n_transitions: int = 1
    stopping_rule: StoppingRule | None = None
    retune: bool = True

    n_steps = renamed_property("n_transitions", "Moves.n_steps")

    @classmethod
    def fixed(cls, n_transitions: int, retune: bool = True) -> Moves:
        """Exactly ``n_transitions`` (≥ 0) transitions per stage."""
        if int(n_transitions) != n_transitions or n_transitions < 0:
            raise ValueError(
                f"n_mcmc_steps must be a non-negative integer or 'auto', got {n_transitions}"
            )
        return cls(int(n_transitions), None, retune)

    @classmethod
    def auto(cls, max_transitions=MAX_MCMC_STEPS, max_correlation=MAX_CORRELATION, retune=True, **old):
        """Up to ``max_transitions`` transitions, stopping by :class:`QuantileCorrelationStop`
        (with ``max_transitions`` as its horizon: its futility stop is on); ``max_steps`` is
        its old name."""
        cap = renamed_argument("Moves.auto", "max_steps", "max_transitions", max_transitions, old)
        _check_cap(cap)
        rule = QuantileCorrelationStop(float(max_correlation), horizon=int(cap))
        return cls(int(cap), rule, retune)

    @classmethod
    def pymc(
        cls, max_transitions=MAX_MCMC_STEPS, correlation_threshold=CORRELATION_THRESHOLD, retune=True, **old
    ):
        """Up to ``max_transitions`` transitions, stopping by :class:`CorrelationStop`
        (PyMC's rule); ``max_steps`` is its old name."""
        cap = renamed_argument("Moves.pymc", "max_steps", "max_transitions", max_transitions, old)
        _check_cap(cap)
        return cls(int(cap), CorrelationStop(float(correlation_threshold)), retune)

    @classmethod
    def from_setting(
        cls,
        n_mcmc_steps,
        max_mcmc_steps: int = MAX_MCMC_STEPS,
        correlation_threshold: float = CORRELATION_THRESHOLD,
        max_correlation: float = MAX_CORRELATION,
    ) -> Moves:
        """From the ``n_mcmc_steps`` argument of the samplers: an integer, ``"auto"``
        (:class:`QuantileCorrelationStop` with ``max_correlation``) or ``"pymc"``
        (:class:`CorrelationStop` with ``correlation_threshold``)."""
        if isinstance(n_mcmc_steps, str):
            if n_mcmc_steps == "auto":
                return cls.auto(max_mcmc_steps, max_correlation)
            if n_mcmc_steps == "pymc":
                return cls.pymc(max_mcmc_steps, correlation_threshold)
            raise ValueError(
                f"n_mcmc_steps must be an integer, 'auto' or 'pymc', got {n_mcmc_steps!r}"
            )
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
        for k in range(self.n_transitions):
            new = self._transition(k, rng, kernel, out, density, path, tau, tune)
            if tracker is not None and tracker.done(new):
                break
        out.last = out.state
        return out

    def run_chains(
        self,
        rng: np.random.Generator,
        kernel: MutationKernel,
        state: ParticleState,
        density,
        path,
        tau,
        params,
        n_total: int,
        *,
        tune: Callable | None = None,
        info: KernelInfo | None = None,
    ) -> MoveResult:
        """Waste-free move: each of the ``M`` particles of ``state`` starts a chain of
        ``P = ⌈n_total / M⌉`` states (itself and ``P − 1`` transitions at ``tau``); the
        result's state is all of them, chain step by chain step, cut to ``n_total``
        (particle ``j`` of block ``k`` is step ``k`` of chain ``j``).

        ``n_transitions`` and the stopping rule are not used; ``retune`` as in :meth:`run`.
        ``out.last`` holds the chains' last states.
        """
        m = state.n
        length = -(-int(n_total) // m)
        blocks = [state]
        out = MoveResult(state, params, info, [], np.zeros(state.n, dtype=bool))
        for k in range(length - 1):
            blocks.append(self._transition(k, rng, kernel, out, density, path, tau, tune))
        out.last = out.state
        out.state = ParticleState.concatenate(blocks).take(np.arange(int(n_total)))
        out.moved = np.tile(out.moved, length)[: int(n_total)]
        return out

    def _transition(self, k, rng, kernel, out: MoveResult, density, path, tau, tune):
        """Transition ``k`` of a stage: re-tune (after the first, if ``retune``), one kernel
        step from ``out.state``; ``out``'s state, info, moved flags and acceptance rates are
        updated. Returns the new state."""
        if k > 0 and self.retune and tune is not None:
            out.params = tune(out.params, out.state, out.info)
        new, out.info = kernel.step(rng, out.state, density, path, tau, out.params)
        out.moved |= np.any(new.x != out.state.x, axis=1)
        out.state = new
        out.acceptance_rates.append(out.info.acceptance_rate)
        return new


def _check_cap(max_transitions) -> None:
    if int(max_transitions) != max_transitions or max_transitions < 1:
        raise ValueError(f"max_mcmc_steps must be a positive integer, got {max_transitions}")
