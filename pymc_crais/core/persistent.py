"""Persistent sampling (Karamanis et al. 2025): SMC that keeps its past populations.

A stage strategy for :func:`~pymc_crais.core.anneal.anneal_stages`
(docs/algorithms.md, "Persistent sampling"). Population ``s`` (``N_s`` particles, moved by
the kernel at ``τ_s``; population 0 is the draws of ``q0``, ``τ_0 = 0``, ``Ẑ_0 = 1``) is
treated as a sample of ``γ_{τ_s} / Ẑ_s``. At stage ``t`` every kept particle ``x`` gets the
balance-heuristic multiple-importance weight

    ``w_t(x) = γ_{τ_t}(x) / Σ_s (N_s / M) γ_{τ_s}(x) / Ẑ_s``,   ``M = Σ_s N_s``,

and ``Ẑ_t = (1/M) Σ_x w_t(x)`` over the kept pool (a recursion: each ``Ẑ_s`` was estimated
the same way). On a path ``log γ_τ = log q0 + h(τ, Δ)``, ``log q0`` cancels: only each
particle's cached ``Δ`` is needed, so reweighting the pool costs no model evaluation.

Each stage then

1. picks ``τ_t``: with the ESS rule, the largest τ whose pooled weights have
   ``ESS ≥ ρ N`` (``N`` the population size; the pooled ESS can exceed ``N``); with a
   fixed schedule, its next τ;
2. resamples ``N`` particles from the whole pool (every stage, ``τ = 1`` included);
3. moves them with the kernel at ``τ_t``; they join the pool as population ``t``.

``log Ẑ`` is the last stage's ``log Ẑ_T``. The pool's particles are correlated (they descend
from one another), so no within-chain error is computed: the run's MCSE is the spread of
independent chains (``log_z_variance`` is NaN).

Memory: the pool holds ``(stages + 1) × N`` particles with their cached values (positions
and, for gradient kernels, two gradients). :class:`PersistentSampling` keeps at most
``max_populations`` populations and at most ``max_bytes`` of them, dropping the oldest
first; the mixture then runs over the kept populations only, which is still a valid
multiple-importance estimator of ``Z_t``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .particles import ParticleState
from .paths import AnnealingPath
from .records import AnnealResult, WeightsVanishedError
from .schedules.adaptive import bisect_step
from .stages import StageStrategy, capped_tau
from .weights import clean_log_weights, ess_from_log_weights, logsumexp

__all__ = ["PersistentHistory", "PersistentRun", "PersistentSampling", "mixture_log_density"]
__all__ += ["pooled_ess_tau", "pooled_log_weights"]


def mixture_log_density(path: AnnealingPath, delta: np.ndarray, taus, log_zs, sizes) -> np.ndarray:
    """``log Σ_s N_s exp(h(τ_s, Δ) − log Ẑ_s)`` per particle (one pass per population)."""
    out = np.full(np.shape(delta), -np.inf)
    for tau, log_z, n in zip(taus, log_zs, sizes, strict=True):
        out = np.logaddexp(out, np.log(n) + path.log_ratio(tau, delta) - log_z)
    return clean_log_weights(out)


def pooled_log_weights(
    path: AnnealingPath, tau: float, delta: np.ndarray, log_mixture: np.ndarray, m: int
) -> np.ndarray:
    """The persistent weights ``log w_τ(x)`` of the pooled particles (``Δ`` per particle).

    Parameters
    ----------
    path : AnnealingPath
    tau : float
        The τ the pool is weighted to.
    delta : numpy.ndarray, shape (M,)
        The pooled particles' cached ``Δ``.
    log_mixture : numpy.ndarray, shape (M,)
        ``log Σ_s N_s γ_{τ_s}(x) / (q0(x) Ẑ_s)`` (see :class:`PersistentHistory`).
    m : int
        ``M = Σ_s N_s``.

    Returns
    -------
    numpy.ndarray, shape (M,)
        ``log w``, whose mean over the pool estimates ``Z_τ`` (non-finite: ``−inf``).
    """
    with np.errstate(invalid="ignore"):
        lw = path.log_ratio(tau, delta) - (log_mixture - np.log(m))
    return clean_log_weights(lw)


@dataclass
class PersistentHistory:
    """The kept populations: their particles, ``τ_s``, ``log Ẑ_s``, Eves, and each pooled
    particle's log mixture density (relative to ``q0``), kept up to date as populations
    join (one pass over the pool) and leave (recomputed)."""

    path: AnnealingPath
    max_populations: int | None = None
    max_bytes: float = np.inf
    states: list = field(default_factory=list)
    eves: list = field(default_factory=list)
    taus: list = field(default_factory=list)
    log_zs: list = field(default_factory=list)
    delta: np.ndarray = field(default_factory=lambda: np.empty(0))
    log_mixture: np.ndarray = field(default_factory=lambda: np.empty(0))
    n_dropped: int = 0

    @property
    def sizes(self) -> list[int]:
        """``N_s`` of each kept population."""
        return [s.n for s in self.states]

    @property
    def m(self) -> int:
        """``M``: the pooled particles."""
        return int(self.delta.size)

    @staticmethod
    def nbytes(state: ParticleState) -> int:
        """Bytes of one population's arrays."""
        arrays = (state.x, state.log_q0, state.delta, state.grad_log_q0, state.grad_delta)
        return int(sum(a.nbytes for a in arrays if a is not None))

    def add(self, state: ParticleState, eve: np.ndarray, tau: float, log_z: float) -> None:
        """Population ``state`` (a sample of ``γ_τ / Ẑ``, ``log Ẑ = log_z``) joins the pool;
        the oldest leave while more than the caps are kept (the newest always stays)."""
        self.states.append(state)
        self.eves.append(np.asarray(eve))
        self.taus.append(float(tau))
        self.log_zs.append(float(log_z))
        cap = self.max_populations or len(self.states)
        dropped = False
        while len(self.states) > 1 and (
            len(self.states) > cap or sum(map(self.nbytes, self.states)) > self.max_bytes
        ):
            for hist in (self.states, self.eves, self.taus, self.log_zs):
                hist.pop(0)
            self.n_dropped += 1
            dropped = True
        if dropped:  # the mixture changed for every particle: recompute it
            self.delta = np.concatenate([s.delta for s in self.states])
            self.log_mixture = mixture_log_density(self.path, self.delta, self.taus, self.log_zs, self.sizes)
            return
        # the new population's term for the old particles, the whole mixture for the new
        new_term = np.log(state.n) + self.path.log_ratio(tau, self.delta) - log_z
        old = clean_log_weights(np.logaddexp(self.log_mixture, new_term))
        new = mixture_log_density(self.path, state.delta, self.taus, self.log_zs, self.sizes)
        self.delta = np.concatenate([self.delta, state.delta])
        self.log_mixture = np.concatenate([old, new])

    def log_weights(self, tau: float) -> np.ndarray:
        """The pooled particles' persistent log-weights at ``tau``."""
        return pooled_log_weights(self.path, tau, self.delta, self.log_mixture, self.m)

    def take(self, idx: np.ndarray) -> tuple[ParticleState, np.ndarray]:
        """The pooled particles ``idx`` (in that order) and their Eves."""
        bounds = np.cumsum([0, *self.sizes])
        pop = np.searchsorted(bounds, idx, side="right") - 1
        order = np.argsort(pop, kind="stable")
        parts, eves = [], []
        for k in np.unique(pop):
            local = idx[order][pop[order] == k] - bounds[k]
            parts.append(self.states[k].take(local))
            eves.append(self.eves[k][local])
        back = np.argsort(order, kind="stable")
        state = ParticleState.concatenate(parts) if len(parts) > 1 else parts[0]
        return state.take(back), np.concatenate(eves)[back]


@dataclass(frozen=True)
class PersistentSampling(StageStrategy):
    """Persistent sampling as a stage strategy (see the module docstring).

    Parameters
    ----------
    max_populations : int, optional
        Keep at most this many populations (the start's included); ``None``: all, within
        ``max_bytes``.
    max_bytes : float, default inf
        Keep at most this many bytes of populations (the oldest leave first; the newest
        population always stays).
    """

    max_populations: int | None = None
    max_bytes: float = np.inf

    def __post_init__(self):
        if self.max_populations is not None and (
            int(self.max_populations) != self.max_populations or self.max_populations < 2
        ):
            raise ValueError(
                f"max_populations must be an integer >= 2 or None (all), got {self.max_populations!r}"
            )
        if not self.max_bytes > 0:
            raise ValueError(f"max_bytes must be positive, got {self.max_bytes!r}")

    def begin(self, loop) -> PersistentRun:
        return PersistentRun(self, loop)


class PersistentRun(StageStrategy):
    """One run of :class:`PersistentSampling`: its history and the current pooled weights."""

    def __init__(self, config: PersistentSampling, loop):
        self.config = config
        self.history: PersistentHistory | None = None
        self.pool_log_w: np.ndarray | None = None
        self.loop = loop

    def _history(self, path: AnnealingPath) -> PersistentHistory:
        if self.history is None:  # the start: draws of q0, τ = 0, Ẑ_0 = 1
            cfg = self.config
            self.history = PersistentHistory(path, cfg.max_populations, cfg.max_bytes)
            self.history.add(self.loop.state, self.loop.eve, 0.0, 0.0)
        return self.history

    def next_tau(self, loop, schedule, path, max_stages) -> float:
        hist = self._history(path)
        return capped_tau(loop, lambda: self._schedule_tau(loop, schedule, path, hist), max_stages)

    @staticmethod
    def _schedule_tau(loop, schedule, path, hist: PersistentHistory) -> float:
        if getattr(schedule, "name", None) != "ess":  # fixed schedules ignore the weights
            return schedule.next_tau(loop.stage, loop.tau, loop.state, loop.log_w, path)
        return pooled_ess_tau(
            hist, loop.tau, schedule.rho * loop.state.n, schedule.min_dtau, schedule.max_dtau
        )

    def reweight(self, loop, path, tau_new) -> tuple[float, float]:
        hist = self._history(path)
        lw = hist.log_weights(tau_new)
        log_z = logsumexp(lw) - np.log(hist.m)
        if not np.isfinite(log_z):
            raise WeightsVanishedError(loop.stage, loop.tau, tau_new)
        inc = float(log_z - loop.log_z)
        loop.log_z = float(log_z)
        self.pool_log_w = lw
        # the stage's log-weights are the pool's (the diagnostics keep a population's width)
        return inc, ess_from_log_weights(lw), lw

    def resample(self, loop, rng, policy, ess, tau_new) -> bool:
        """Draw the population's ``N`` particles from the pool (every stage) with the
        policy's scheme."""
        n = loop.state.n
        w = np.exp(self.pool_log_w - logsumexp(self.pool_log_w))
        idx = policy.indices(rng, w, n)
        loop.state, loop.eve = self.history.take(idx)
        loop.log_w = np.zeros(n)
        loop.n_resamplings += 1
        loop.resampled = True
        return True

    def move(self, loop, rng, kernel, density, path, tau_new, options, n_total):
        moved = super().move(loop, rng, kernel, density, path, tau_new, options, n_total)
        self.history.add(loop.state, loop.eve, tau_new, loop.log_z)
        return moved

    def result(self, loop, path, options, n_evals) -> AnnealResult:
        nan = float("nan")  # no within-chain error: the chains' spread
        return loop.records.result(loop, path, n_evals, log_z_variance=nan, log_z_variance_segments=nan)


def pooled_ess_tau(
    hist: PersistentHistory,
    tau: float,
    target_ess: float,
    min_dtau: float = 0.0,
    max_dtau: float = 1.0,
    tol: float = 1e-8,
) -> float:
    """The largest τ' in ``(τ, min(1, τ + max_dtau)]`` whose pooled weights have
    ``ESS ≥ target_ess`` (bisection on ``log(τ' − τ)``, as
    :class:`~pymc_crais.core.adaptive.ESSSchedule`); at least ``τ + min_dtau``.

    Parameters
    ----------
    hist : PersistentHistory
    tau : float
        The current τ.
    target_ess : float
        ``ρ N``.
    min_dtau, max_dtau : float
        Bounds on the step.
    tol : float
        Relative precision of the step.

    Returns
    -------
    float
    """
    log_target = np.log(target_ess)

    def ok(t):
        lw = hist.log_weights(t)
        total = logsumexp(lw)
        return np.isfinite(total) and 2.0 * total - logsumexp(2.0 * lw) >= log_target

    return bisect_step(ok, tau, min_dtau, max_dtau, tol)
