"""The first two phases of tempered sampling: the start, and the initial rounds that refine
the guesses ``log Ẑ_k`` and the kernel's per-level parameters (docs/algorithms.md,
"Rao-Blackwellized tempered sampling and thermodynamic integration")."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..anneal import anneal
from ..estimators import rts_update
from ..kernels import LevelParams, MutationKernel, floor_variance
from ..particles import ParticleState
from ..schedules import FixedSchedule, Schedule
from ..weights import logsumexp
from .levels import TemperingSweep, exp_flush, sample_levels
from .options import RTSOptions

__all__ = ["InitialRounds", "Start", "cold_start", "initial_rounds", "warm_start"]


@dataclass
class Start:
    """Particles, their levels, ``log Ẑ_k`` guesses and per-level kernel parameters."""

    state: ParticleState
    levels: np.ndarray
    log_z: np.ndarray
    params: LevelParams


class _RecordingSchedule(Schedule):
    """The ladder as a fixed schedule that keeps each particle's state at its assigned level."""

    name = "ladder"

    def __init__(self, ladder, assigned):
        self.inner = FixedSchedule(ladder)
        self.assigned = assigned
        self.x = None

    def next_tau(self, stage, tau, state, log_weights, path):
        if self.x is None:
            self.x = np.empty_like(state.x)
        pick = self.assigned == stage
        self.x[pick] = state.x[pick]
        return self.inner.next_tau(stage, tau, state, log_weights, path)


def warm_start(rng, density, x0, path, ladder, kernel: MutationKernel, level_prior) -> Start:
    """One AIS pass of the particles over the ladder (population-tuned kernel, one move per
    level): its running ``log Ẑ`` and kernel parameters at each level start the guesses, and
    each particle starts from its own AIS state at a level drawn from ``r``."""
    K = ladder.size
    assigned = rng.choice(K, size=x0.shape[0], p=level_prior)
    rec = _RecordingSchedule(ladder, assigned)
    res = anneal(rng, density, x0, path, rec, kernel, n_mcmc_steps=1, resample="never")
    x = rec.x
    last = assigned == K - 1
    x[last] = res.state.x[last]
    log_z = np.concatenate([[0.0], np.cumsum(res.stages["log_z_increment"])])
    params = kernel.stack_level_params([res.kernel_params[0], *res.kernel_params])
    state = ParticleState.evaluate(density, x, gradient=kernel.needs_gradient)
    return Start(state, assigned, log_z, params)


def cold_start(rng, density, x0, ladder, kernel: MutationKernel, level_prior) -> Start:
    """The paper's start: ``θ ~ q0``, ``log Ẑ_k = 0``, levels from ``r``, the kernel's
    initial parameters at every level."""
    K = ladder.size
    state = ParticleState.evaluate(density, x0, gradient=kernel.needs_gradient)
    params = kernel.level_params(kernel.init(state), K)
    return Start(state, rng.choice(K, size=x0.shape[0], p=level_prior), np.zeros(K), params)


class _LevelMoments:
    """``q(k | θ)``-weighted moments of the particles per level (for the per-level masses)."""

    def __init__(self, K: int, dim: int):
        self.s0 = np.zeros(K)
        self.s1 = np.zeros((K, dim))
        self.s2 = np.zeros((K, dim))
        self.sq = np.zeros(K)

    def add(self, log_q: np.ndarray, x: np.ndarray) -> None:
        q = exp_flush(log_q)
        self.s0 += q.sum(axis=1)
        self.sq += (q * q).sum(axis=1)
        self.s1 += q @ x
        self.s2 += q @ (x * x)

    def refit(self, inv_mass: np.ndarray) -> None:
        """Set ``inv_mass[k]`` to the level's variances where ``(Σq)²/Σq² ≥ max(10, 2d)``."""
        dim = inv_mass.shape[1]
        sq = self.sq
        ess = np.where(sq > 0, self.s0 * self.s0 / np.where(sq > 0, sq, 1.0), 0.0)
        for k in np.flatnonzero(ess >= max(10.0, 2.0 * dim)):
            m = self.s1[k] / self.s0[k]
            var = np.maximum(self.s2[k] / self.s0[k] - m * m, 0.0)
            inv_mass[k] = floor_variance(var)


@dataclass
class InitialRounds:
    """Outcome of the initial rounds.

    Attributes
    ----------
    state, levels, log_z, params
        As :class:`Start`, after the rounds (``log Ẑ_k`` updated after every round).
    c_hat : list of numpy.ndarray
        ``ĉ`` of each round.
    deviation : list of float
        ``max_k |r_k − ĉ_k|`` of each round.
    converged : bool
    """

    state: ParticleState
    levels: np.ndarray
    log_z: np.ndarray
    params: LevelParams
    c_hat: list = field(default_factory=list)
    deviation: list = field(default_factory=list)
    converged: bool = False


def _round(
    rng, sweep: TemperingSweep, out: InitialRounds, opts: RTSOptions, n_burn: int
) -> np.ndarray:
    """One round of ``n_init_sweeps`` sweeps; returns its ``log ĉ`` (normalized)."""
    K = sweep.ladder.size
    log_c_sum = np.full(K, -np.inf)
    moments = _LevelMoments(K, out.state.dim) if out.params.inv_mass is not None else None
    for i in range(int(opts.n_init_sweeps)):
        s = sweep(rng, out.state, out.levels, out.log_z, out.params)
        out.state, out.levels = s.state, s.levels
        sweep.kernel.adapt_level_params(out.params, s.used, s.moved, opts.adapt_gain)
        if i >= n_burn:
            log_c_sum = np.logaddexp(log_c_sum, logsumexp(s.log_q, axis=1))
        if moments is not None:
            moments.add(s.log_q, s.state.x)
    if moments is not None:
        moments.refit(out.params.inv_mass)
    return log_c_sum - logsumexp(log_c_sum)


def initial_rounds(
    rng,
    sweep: TemperingSweep,
    start: Start,
    opts: RTSOptions,
    level_prior: np.ndarray,
    callback=None,
) -> InitialRounds:
    """Rounds of ``n_init_sweeps`` sweeps until ``max_k |r_k − ĉ_k| < tol / K`` or
    ``max_init_rounds`` (see :func:`pymc_crais.core.rts.rts`, step 2)."""
    K = sweep.ladder.size
    out = InitialRounds(start.state, start.levels, start.log_z, start.params)
    out.converged = opts.max_init_rounds == 0
    # the first ``n_burn`` sweeps of a round do not enter its ĉ
    n_burn = min(int(opts.init_burn * int(opts.n_init_sweeps)), int(opts.n_init_sweeps) - 1)
    for rnd in range(int(opts.max_init_rounds)):
        if rnd > 0:
            if opts.restart_levels == "prior":
                out.levels = rng.choice(K, size=out.state.n, p=level_prior)
            else:
                out.levels = sample_levels(rng, sweep.log_conditional(out.state, out.log_z))
        log_c = _round(rng, sweep, out, opts, n_burn)
        c_hat = np.exp(log_c)
        dev = float(np.max(np.abs(level_prior - c_hat)))
        out.c_hat.append(c_hat)
        out.deviation.append(dev)
        out.log_z = rts_update(out.log_z, sweep.log_prior, log_c)
        if callback is not None:
            callback("init", rnd, {"deviation": dev, "tolerance": opts.tol / K})
        if dev < opts.tol / K:
            out.converged = True
            break
    return out
