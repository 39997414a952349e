"""The final run of tempered sampling: sweeps with ``log Ẑ_k`` and the kernel's parameters
frozen, accumulating per level and per particle group what the estimators need."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..kernels import LevelParams
from ..particles import ParticleState
from .levels import TemperingSweep, exp_flush, sample_levels
from .options import RTSOptions

__all__ = ["FinalRun", "final_run"]


@dataclass
class FinalRun:
    """Accumulators of the final run (``K`` levels, ``G`` particle groups).

    Attributes
    ----------
    c_groups : numpy.ndarray, shape (K, G)
        Sums of ``q(k | θ)`` over the sweeps and the particles of each group.
    q_squares : numpy.ndarray, shape (K,)
        Sums of ``q(k | θ)²``.
    visits, accepted : numpy.ndarray, shape (K,)
        Moves made at each level and how many changed the particle.
    transitions : numpy.ndarray, shape (K * K,)
        Counts of level moves ``k → k'``.
    ti_sums, ti_counts : numpy.ndarray, shape (K, G)
        Sums of ``∂_τ log γ`` of the particles at each level, and their numbers (plain TI).
    rbti_sums : numpy.ndarray, shape (K, G)
        Sums of ``q(k | θ) ∂_τ log γ_{τ_k}`` (Rao-Blackwellized TI).
    snapshots_x, snapshots_log_w : list of numpy.ndarray
        Particles of the kept sweeps and their ``log q(K | θ)``.
    state, levels
        The particles and their levels after the last sweep.
    """

    c_groups: np.ndarray
    q_squares: np.ndarray
    visits: np.ndarray
    accepted: np.ndarray
    transitions: np.ndarray
    ti_sums: np.ndarray
    ti_counts: np.ndarray
    rbti_sums: np.ndarray
    snapshots_x: list = field(default_factory=list)
    snapshots_log_w: list = field(default_factory=list)
    state: ParticleState | None = None
    levels: np.ndarray | None = None

    @classmethod
    def zeros(cls, K: int, n_groups: int) -> FinalRun:
        return cls(
            c_groups=np.zeros((K, n_groups)),
            q_squares=np.zeros(K),
            visits=np.zeros(K),
            accepted=np.zeros(K),
            transitions=np.zeros(K * K, dtype=np.int64),
            ti_sums=np.zeros((K, n_groups)),
            ti_counts=np.zeros((K, n_groups)),
            rbti_sums=np.zeros((K, n_groups)),
        )


class _Accumulator:
    """Adds one sweep to a :class:`FinalRun`."""

    def __init__(self, sweep: TemperingSweep, n: int, n_groups: int):
        self.path = sweep.path
        self.ladder = sweep.ladder
        self.K = sweep.ladder.size
        self.n_groups = n_groups
        self.groups = np.arange(n) % n_groups
        self.onehot = np.zeros((n, n_groups))
        self.onehot[np.arange(n), self.groups] = 1.0
        self.with_ti = self.path.has_tau_derivative

    def add(self, out: FinalRun, s) -> None:
        K, G, onehot = self.K, self.n_groups, self.onehot
        q = exp_flush(s.log_q)
        out.c_groups += q @ onehot
        out.q_squares += (q * q).sum(axis=1)
        out.visits += np.bincount(s.used, minlength=K)
        out.accepted += np.bincount(s.used, weights=s.moved.astype(float), minlength=K)
        out.transitions += np.bincount(s.used * K + s.levels, minlength=K * K)
        if not self.with_ti:
            return
        dk = self.path.ladder_tau_derivative(self.ladder, s.state.delta)  # (K, N)
        if self.path.constant_tau_derivative and np.all(np.isfinite(dk[0])):
            out.rbti_sums += q @ (onehot * dk[0][:, None])  # the same row at every level
        else:
            out.rbti_sums += (q * np.where(q > 0, dk, 0.0)) @ onehot
        own = dk[s.used, np.arange(s.used.size)]
        flat = s.used * G + self.groups
        out.ti_sums += np.bincount(flat, weights=own, minlength=K * G).reshape(K, G)
        out.ti_counts += np.bincount(flat, minlength=K * G).reshape(K, G)


def final_run(
    rng,
    sweep: TemperingSweep,
    state: ParticleState,
    log_z: np.ndarray,
    params: LevelParams,
    opts: RTSOptions,
    n_groups: int,
    callback=None,
) -> FinalRun:
    """``n_sweeps`` sweeps from ``state`` with levels drawn from ``q(k | θ)``; keeps
    ``n_snapshots`` evenly spaced sweeps for posterior draws."""
    K = sweep.ladder.size
    n_sweeps = int(opts.n_sweeps)
    levels = sample_levels(rng, sweep.log_conditional(state, log_z))
    out = FinalRun.zeros(K, n_groups)
    acc = _Accumulator(sweep, state.n, n_groups)
    keep = np.linspace(n_sweeps - 1, 0, min(opts.n_snapshots, n_sweeps)).round().astype(int)
    snap_at = set(np.unique(keep).tolist())
    for i in range(n_sweeps):
        s = sweep(rng, state, levels, log_z, params)
        state, levels = s.state, s.levels
        acc.add(out, s)
        if i in snap_at:
            out.snapshots_x.append(state.x.copy())
            out.snapshots_log_w.append(s.log_q[-1].copy())
        if callback is not None and (i + 1) % max(1, n_sweeps // 10) == 0:
            callback("final", i, {})
    out.state, out.levels = state, levels
    return out
