"""Rao-Blackwellized tempered sampling (RTS) and thermodynamic integration (ALGORITHMS.md §8).

Simulated tempering over a ladder ``0 = τ_1 < … < τ_K = 1`` of one annealing path: the
state of each of ``N`` particles is a pair ``(θ, k)``, updated by Gibbs steps

* ``θ | k``: a mutation kernel invariant for ``γ_{τ_k}``, with the kernel's step size (and,
  for HMC/MALA, its diagonal mass) chosen per level; all particles move in one batched call
  although they sit at different temperatures (:class:`ArrayTauPath`);
* ``k | θ``: an exact draw from ``q(k | θ) ∝ r_k γ_k(θ) / Ẑ_k`` over all ``K`` levels.

The Rao-Blackwellized statistics ``ĉ_k`` (the average over draws of ``q(k | θ)``) estimate
the marginal ``q(k) ∝ r_k Z_k / Ẑ_k``, so ``Z_k / Z_1 = (Ẑ_k r_1 ĉ_k) / (Ẑ_1 r_k ĉ_1)``.
An initial loop of short rounds refines ``log Ẑ_k`` by that rule until ``ĉ`` is close to
``r``; a final run with ``Ẑ`` and the kernel parameters frozen gives the estimate. The same
draws give thermodynamic integration, ``log Z = ∫ E_τ[∂_τ log γ_τ] dτ`` by the trapezoid
rule, with the level means either from the draws at each level (plain TI) or weighted by
``q(k | θ)`` over all draws (RB-TI).

Since ``q0`` is normalized, ``Z_1 = 1`` and ``log Z = log Z_K`` (plus the path's shift ``c``).
Nothing here imports PyMC.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace

import numpy as np

from ..warnings import RTSInitialLoopWarning
from .anneal import anneal
from .density import BatchedDensity
from .kernels import HMCParams, MutationKernel, RWMHParams
from .particles import ParticleState
from .paths import AnnealingPath, GeometricPath, PowerMeanPath
from .schedules import FixedSchedule, Schedule, validate_schedule
from .weights import logsumexp

__all__ = [
    "WARM_STARTS",
    "ArrayTauPath",
    "LevelParams",
    "RTSResult",
    "ladder_log_ratio",
    "rts",
    "rts_update",
    "sample_levels",
    "tau_derivative",
    "temperature_log_conditional",
    "trapezoid",
]

WARM_STARTS = ("ais", None)


def _clean_delta(delta) -> np.ndarray:
    d = np.asarray(delta, dtype=np.float64)
    return np.where(np.isnan(d), -np.inf, d)


# ----------------------------------------------------------------------------- paths
class ArrayTauPath:
    """A path evaluated at one τ per particle, for kernels moving particles at several levels.

    Kernels call ``path.log_density(tau, log_q0, delta)`` and ``path.gradient_weight(tau,
    delta)`` with the ``tau`` they were given; passing an ``(N,)`` array of the particles'
    temperatures together with this wrapper makes one batched transition leave every
    particle's own ``γ_{τ_j}`` invariant. A scalar τ is passed to the wrapped path unchanged.

    The geometric path is evaluated in closed form; other paths are evaluated level by level
    (one call per distinct τ, no loop over particles), so they match the wrapped path exactly.

    Parameters
    ----------
    path : AnnealingPath
        The path (with its scale shift ``c``).
    """

    def __init__(self, path: AnnealingPath):
        self.path = path
        self.alpha = path.alpha
        self.c = path.c
        self.name = path.name

    def _by_level(self, fn, tau: np.ndarray, delta: np.ndarray) -> np.ndarray:
        out = np.empty(delta.shape, dtype=np.float64)
        uniq, inv = np.unique(tau, return_inverse=True)
        order = np.argsort(inv, kind="stable")
        bounds = np.searchsorted(inv[order], np.arange(uniq.size + 1))
        for i, t in enumerate(uniq):
            idx = order[bounds[i] : bounds[i + 1]]
            out[idx] = fn(float(t), delta[idx])
        return out

    def _per_particle(self, name: str, tau, delta, geometric) -> np.ndarray:
        """The path's ``name`` quantity at each particle's own τ: the path itself for a
        scalar τ, ``geometric(t, d)`` in closed form on the geometric path, else one call
        per distinct τ."""
        t = np.asarray(tau, dtype=np.float64)
        fn = getattr(self.path, name)
        if t.ndim == 0:
            return fn(float(t), delta)
        d = _clean_delta(delta)
        t = np.broadcast_to(t, d.shape)
        if isinstance(self.path, GeometricPath):
            return geometric(t, d)
        return self._by_level(fn, t, d)

    def log_ratio(self, tau, delta) -> np.ndarray:
        """``h(τ_j, Δ_j) = log γ_{τ_j}(θ_j) − log q0(θ_j)`` per particle."""

        def geometric(t, d):
            with np.errstate(invalid="ignore"):
                out = t * (d - self.c)
            return np.where(t == 0.0, 0.0, out)

        return self._per_particle("log_ratio", tau, delta, geometric)

    def gradient_weight(self, tau, delta) -> np.ndarray:
        """Coefficient ``w_j`` of ``∇Δ`` in ``∇ log γ_{τ_j}`` per particle."""
        return self._per_particle(
            "gradient_weight", tau, delta, lambda t, d: np.array(t, dtype=np.float64)
        )

    def log_increment(self, tau_from, tau_to, delta) -> np.ndarray:
        """``log γ_{τ_to} − log γ_{τ_from}`` per particle (``-inf`` instead of NaN)."""
        with np.errstate(invalid="ignore"):
            inc = self.log_ratio(tau_to, delta) - self.log_ratio(tau_from, delta)
        return np.where(np.isnan(inc), -np.inf, inc)

    def log_density(self, tau, log_q0, delta) -> np.ndarray:
        """``log γ_{τ_j}(θ_j)`` per particle (``-inf`` instead of NaN)."""
        with np.errstate(invalid="ignore"):
            out = np.asarray(log_q0, dtype=np.float64) + self.log_ratio(tau, delta)
        return np.where(np.isnan(out), -np.inf, out)

    def describe(self) -> str:
        return self.path.describe()


def ladder_log_ratio(path: AnnealingPath, taus, delta) -> np.ndarray:
    """``h(τ_k, Δ_j)`` for every level ``k`` and particle ``j``, shape ``(K, N)``.

    Parameters
    ----------
    path : AnnealingPath
    taus : array_like, shape (K,)
        The ladder.
    delta : array_like, shape (N,)
        Cached ``Δ`` of the particles.
    """
    taus = np.asarray(taus, dtype=np.float64)
    d = _clean_delta(delta)
    if isinstance(path, GeometricPath):
        with np.errstate(invalid="ignore"):
            out = taus[:, None] * (d - path.c)[None, :]
        return np.where(taus[:, None] == 0.0, 0.0, out)
    return np.stack([path.log_ratio(float(t), d) for t in taus])


def tau_derivative(path: AnnealingPath, tau, delta) -> np.ndarray:
    """``∂_τ log γ_τ(θ)`` — the integrand of thermodynamic integration.

    Geometric path: ``Δ − c`` (independent of τ). Power-mean path with ``x = α(Δ − c)``:
    ``(e^x − 1) / (α ((1 − τ) + τ e^x))``, evaluated without overflow for either sign of x.

    Parameters
    ----------
    path : GeometricPath or PowerMeanPath
    tau : float or array_like
        Broadcast against ``delta``.
    delta : array_like
    """
    d = _clean_delta(delta)
    t = np.asarray(tau, dtype=np.float64)
    if isinstance(path, GeometricPath):
        return np.broadcast_to(d - path.c, np.broadcast_shapes(t.shape, d.shape)).copy()
    if not isinstance(path, PowerMeanPath):
        raise TypeError(
            f"thermodynamic integration needs the derivative of the path in tau; "
            f"{type(path).__name__} has none (use GeometricPath or PowerMeanPath)"
        )
    a = path.alpha
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        x = a * (d - path.c)
        x, t = np.broadcast_arrays(x, t)
        neg = x <= 0
        xn = np.where(neg, x, 0.0)
        # x ≤ 0: both terms of (1 − τ) + τ e^x are ≥ 0, so no cancellation (1 + τ·expm1(x)
        # would round to 0 at τ = 1 for x < −37)
        low = np.expm1(xn) / (a * ((1.0 - t) + t * np.exp(xn)))
        e_pos = np.exp(-np.where(neg, 1.0, x))  # e^{−x} for x > 0
        high = -np.expm1(-np.where(neg, 1.0, x)) / (a * (t + (1.0 - t) * e_pos))
    return np.where(neg, low, high)


# ----------------------------------------------------------------------------- k | θ
def _exp_flush(log_p: np.ndarray) -> np.ndarray:
    """``exp`` with arguments below −340 flushed to exactly 0: subnormal floats (also from
    squaring or multiplying the results) make the later sums and matrix products many times
    slower, and such terms are below 1e-147 relative to the largest one (which is 1 where
    this is used)."""
    return np.exp(np.where(log_p < -340.0, -np.inf, log_p))


def temperature_log_conditional(log_ratio_kn: np.ndarray, log_prior: np.ndarray, log_z: np.ndarray) -> np.ndarray:
    """``log q(k | θ_j)`` for every level and particle, normalized over ``k``.

    ``q(k | θ) ∝ r_k γ_k(θ) / Ẑ_k``; ``log q0(θ)`` is common to all levels and cancels, so
    only ``h(τ_k, Δ) = log γ_k − log q0`` enters.

    Parameters
    ----------
    log_ratio_kn : numpy.ndarray, shape (K, N)
        :func:`ladder_log_ratio`.
    log_prior : numpy.ndarray, shape (K,)
        ``log r_k``.
    log_z : numpy.ndarray, shape (K,)
        Current ``log Ẑ_k``.
    """
    a = log_ratio_kn + (np.asarray(log_prior) - np.asarray(log_z))[:, None]
    a = np.where(np.isnan(a), -np.inf, a)
    m = np.max(a, axis=0, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        norm = np.log(np.sum(_exp_flush(a - m), axis=0, keepdims=True)) + m
    out = a - norm
    # A particle with zero density at every level (never produced by a valid chain) stays at
    # the first level rather than spreading NaN.
    bad = ~np.isfinite(norm[0])
    if bad.any():
        out[:, bad] = -np.inf
        out[0, bad] = 0.0
    return out


def sample_levels(rng: np.random.Generator, log_q: np.ndarray) -> np.ndarray:
    """Draw one level per particle from ``exp(log_q)`` (columns normalized), by inverse CDF."""
    q = _exp_flush(log_q)
    cum = np.cumsum(q, axis=0)
    u = rng.random(q.shape[1]) * cum[-1]
    k = np.sum(cum < u[None, :], axis=0)
    return np.minimum(k, q.shape[0] - 1).astype(np.int64)


def rts_update(log_z: np.ndarray, log_prior: np.ndarray, log_c: np.ndarray) -> np.ndarray:
    """The RTS estimate ``log Ẑ_k + log r_1 − log r_k + log ĉ_k − log ĉ_1`` (first entry 0).

    Parameters
    ----------
    log_z : numpy.ndarray, shape (K,)
        The ``log Ẑ_k`` the draws were made with.
    log_prior : numpy.ndarray, shape (K,)
        ``log r_k``.
    log_c : numpy.ndarray, shape (K,)
        ``log ĉ_k`` (any common additive constant cancels).
    """
    out = log_z - log_z[0] + log_prior[0] - log_prior + log_c - log_c[0]
    out[0] = 0.0
    return out


def trapezoid(taus, values) -> float:
    """Trapezoid rule ``Σ_k (τ_{k+1} − τ_k)(g_k + g_{k+1}) / 2`` (NaN if any ``g_k`` is)."""
    taus = np.asarray(taus, dtype=np.float64)
    g = np.asarray(values, dtype=np.float64)
    return float(np.sum(np.diff(taus) * 0.5 * (g[1:] + g[:-1])))


# ----------------------------------------------------------------------------- kernel params
@dataclass
class LevelParams:
    """Kernel parameters per ladder level.

    ``kind="step"`` (HMC, MALA): per-level step size and diagonal inverse mass;
    ``kind="scale"`` (random-walk Metropolis): per-level proposal scale with a common
    covariance factor; ``kind="fixed"``: the same parameters at every level (other kernels).

    Attributes
    ----------
    kind : str
    base : object
        A parameter object of the kernel (the template).
    log_step : numpy.ndarray, shape (K,)
        Log step size or log scale per level (unused for ``"fixed"``).
    inv_mass : numpy.ndarray, shape (K, d), or None
    """

    kind: str
    base: object
    log_step: np.ndarray
    inv_mass: np.ndarray | None = None

    @classmethod
    def from_params(cls, params, n_levels: int) -> LevelParams:
        """The same ``params`` at all levels."""
        if isinstance(params, HMCParams):
            return cls(
                "step", params, np.full(n_levels, np.log(float(params.step_size))),
                np.tile(np.asarray(params.inv_mass, dtype=np.float64), (n_levels, 1)),
            )
        if isinstance(params, RWMHParams):
            return cls("scale", params, np.full(n_levels, np.log(float(params.scale))))
        return cls("fixed", params, np.zeros(n_levels))

    @classmethod
    def from_stages(cls, params_list: list) -> LevelParams:
        """One parameter set per level (e.g. the stages of an AIS pass over the ladder)."""
        first = params_list[0]
        out = cls.from_params(first, len(params_list))
        if out.kind == "step":
            out.log_step = np.log([float(p.step_size) for p in params_list])
            out.inv_mass = np.stack([np.asarray(p.inv_mass, dtype=np.float64) for p in params_list])
        elif out.kind == "scale":
            # one covariance factor for all levels (the τ = 1 one); the scales of the other
            # levels are rescaled by the ratio of the factors' average standard deviations
            last = params_list[-1]
            ref = np.sqrt(np.mean(np.sum(last.chol**2, axis=1)))
            sd = np.array([np.sqrt(np.mean(np.sum(p.chol**2, axis=1))) for p in params_list])
            out.base = last
            out.log_step = np.log([float(p.scale) for p in params_list]) + np.log(sd / ref)
        return out

    def for_levels(self, levels: np.ndarray):
        """A parameter object whose step sizes (and masses) are per particle ``(N, 1)``."""
        if self.kind == "step":
            return replace(
                self.base,
                step_size=np.exp(self.log_step)[levels][:, None],
                inv_mass=self.inv_mass[levels],
            )
        if self.kind == "scale":
            return replace(self.base, scale=np.exp(self.log_step)[levels][:, None])
        return self.base

    def step_sizes(self) -> np.ndarray:
        """Step size (or scale) per level; NaN for fixed parameters."""
        return np.exp(self.log_step) if self.kind != "fixed" else np.full(self.log_step.size, np.nan)


# ----------------------------------------------------------------------------- result
@dataclass
class RTSResult:
    """The outcome of one RTS run (one chain).

    Attributes
    ----------
    log_marginal_likelihood : float
        RTS ``log Ẑ = log Ẑ_K − log Ẑ_1`` (plus the path's shift ``c``).
    log_z_variance : float
        Its within-run variance (see :func:`rts`, ``n_groups``).
    log_z_ti, log_z_ti_variance : float
        Trapezoid thermodynamic integration from the draws at each level, and its variance.
    log_z_rbti, log_z_rbti_variance : float
        The same with Rao-Blackwellized level means.
    ladder : numpy.ndarray, shape (K,)
    log_prior : numpy.ndarray, shape (K,)
        ``log r_k``.
    log_z_levels : numpy.ndarray, shape (K,)
        The frozen ``log Ẑ_k`` of the final run.
    log_z_rts_levels : numpy.ndarray, shape (K,)
        RTS estimates of ``log Z_k`` from the final run (first entry 0; path shift excluded).
    c_hat : numpy.ndarray, shape (K,)
        ``ĉ_k`` of the final run (sums to 1).
    c_hat_mcse : numpy.ndarray, shape (K,)
        Standard errors of ``ĉ_k`` from the particle groups.
    c_hat_init : numpy.ndarray, shape (rounds, K)
        ``ĉ`` of each initial round.
    init_deviation : numpy.ndarray, shape (rounds,)
        ``max_k |r_k − ĉ_k|`` of each initial round.
    init_converged : bool
        Whether the initial loop met ``max_k |r_k − ĉ_k| < tol / K``.
    transitions : numpy.ndarray, shape (K, K)
        Counts of level moves ``k → k'`` by the ``k | θ`` draws of the final run.
    acceptance_rate, ti_means, rbti_means, ess : numpy.ndarray, shape (K,)
        Per-level kernel acceptance, TI level means (plain and RB) and the Rao-Blackwellized
        effective number of draws ``(Σ q)² / Σ q²`` of the final run.
    step_size : numpy.ndarray, shape (K,)
        Kernel step size (or scale) per level in the final run.
    state, levels
        Final particles and their levels.
    posterior_x, posterior_log_weights : numpy.ndarray
        Pooled snapshots of the final run and their log weights ``log q(K | θ)`` for the
        target level (self-normalized importance weights for ``γ_K``).
    n_logp_evals, n_logp_evals_init : int
        Particle-evaluations of the model, in total and before the final run.
    c : float
    """

    log_marginal_likelihood: float
    log_z_variance: float
    log_z_ti: float
    log_z_ti_variance: float
    log_z_rbti: float
    log_z_rbti_variance: float
    ladder: np.ndarray
    log_prior: np.ndarray
    log_z_levels: np.ndarray
    log_z_rts_levels: np.ndarray
    c_hat: np.ndarray
    c_hat_mcse: np.ndarray
    c_hat_init: np.ndarray
    init_deviation: np.ndarray
    init_converged: bool
    transitions: np.ndarray
    acceptance_rate: np.ndarray
    ti_means: np.ndarray
    rbti_means: np.ndarray
    ess: np.ndarray
    step_size: np.ndarray
    state: ParticleState
    levels: np.ndarray
    posterior_x: np.ndarray
    posterior_log_weights: np.ndarray
    n_logp_evals: int
    n_logp_evals_init: int
    c: float
    n_sweeps: int
    extras: dict = field(default_factory=dict)

    @property
    def n_init_rounds(self) -> int:
        """Number of initial rounds run."""
        return int(self.init_deviation.size)


# ----------------------------------------------------------------------------- one sweep
class _Sampler:
    """The tempering state of one run and its Gibbs sweep."""

    def __init__(self, density, path, ladder, log_prior, kernel, n_mcmc_steps):
        self.density = density
        self.path = path
        self.apath = ArrayTauPath(path)
        self.ladder = ladder
        self.log_prior = log_prior
        self.kernel = kernel
        self.n_mcmc_steps = n_mcmc_steps
        self.K = ladder.size

    def sweep(self, rng, state, levels, log_z, params: LevelParams):
        """``θ | k`` moves then a ``k | θ`` draw. Returns the new state, the levels the
        move used, the new levels, per-particle move indicators and ``log q(k | θ)``."""
        taus = self.ladder[levels]
        p = params.for_levels(levels)
        moved = np.zeros(state.n, dtype=bool)
        for _ in range(self.n_mcmc_steps):
            new, _ = self.kernel.step(rng, state, self.density, self.apath, taus, p)
            moved |= np.any(new.x != state.x, axis=1)
            state = new
        log_q = temperature_log_conditional(
            ladder_log_ratio(self.path, self.ladder, state.delta), self.log_prior, log_z
        )
        new_levels = sample_levels(rng, log_q)
        return state, levels, new_levels, moved, log_q


def _adapt_steps(params: LevelParams, levels, moved, target, gain, K):
    if params.kind == "fixed" or target is None:
        return
    n = np.bincount(levels, minlength=K)
    acc = np.bincount(levels, weights=moved.astype(float), minlength=K)
    seen = n > 0
    params.log_step[seen] += gain * (acc[seen] / n[seen] - target)
    lo, hi = (np.log(1e-6), np.log(10.0)) if params.kind == "step" else (np.log(1e-5), np.log(1e3))
    np.clip(params.log_step, lo, hi, out=params.log_step)


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


# ----------------------------------------------------------------------------- the run
def rts(
    rng: np.random.Generator,
    density: BatchedDensity,
    x0: np.ndarray,
    path: AnnealingPath,
    ladder,
    kernel: MutationKernel,
    *,
    n_sweeps: int = 500,
    n_init_sweeps: int = 50,
    max_init_rounds: int = 20,
    tol: float = 0.1,
    level_prior=None,
    warm_start: str | None = "ais",
    n_mcmc_steps: int = 1,
    adapt_gain: float = 0.1,
    n_groups: int = 20,
    n_snapshots: int = 20,
    restart_levels: str = "conditional",
    init_burn: float = 0.5,
    callback=None,
) -> RTSResult:
    """Rao-Blackwellized tempered sampling of ``N`` particles over a ladder (ALGORITHMS.md §8).

    1. **Start.** ``warm_start="ais"``: one AIS pass of the ``N`` particles over the ladder
       (population-tuned kernel, one move per level). Its running ``log Ẑ`` at each level
       initializes ``log Ẑ_k``, its kernel parameters at each level initialize the per-level
       parameters, and each particle starts from its own AIS state at a level drawn from
       ``r``. ``warm_start=None`` is the paper's cold start: ``log Ẑ_k = 0``, ``θ ~ q0`` and
       levels drawn from ``r``, the kernel's initial parameters at every level.
    2. **Initial rounds** of ``n_init_sweeps`` Gibbs sweeps (``ĉ`` from the last
       ``1 − init_burn`` of them): per-level step sizes adapt toward
       the kernel's ``target_accept`` after every sweep (and, for HMC/MALA, the per-level
       masses are re-estimated from ``q(k|θ)``-weighted moments after every round); at the
       end of a round ``log Ẑ_k`` takes the RTS update. The loop stops once the round's
       ``max_k |r_k − ĉ_k| < tol / K`` (then the update is still applied) or after
       ``max_init_rounds`` rounds (with a warning). Each new round restarts from the last
       ``θ`` with levels drawn from ``q(k | θ)`` or afresh from ``r`` as the paper
       recommends (``restart_levels``).
    3. **Final run** of ``n_sweeps`` sweeps with ``log Ẑ_k`` and the kernel parameters
       frozen (so it is a Markov chain with a fixed invariant law), starting from the last
       ``θ`` with levels drawn from ``q(k | θ)``. It gives ``ĉ``, the RTS estimate, TI and
       RB-TI.

    **Error bars.** Given the frozen ``log Ẑ_k`` and kernel parameters, the particles of the
    final run are independent Markov chains. They are split into ``n_groups`` groups; each
    group gives its own ``ĉ`` (and TI estimates), and the variance of ``log Ẑ`` is the
    delta-method variance ``Var_g[ĉ_K^g/ĉ_K − ĉ_1^g/ĉ_1] / G`` (for TI, the variance of the
    group estimates over ``G``). It covers the autocorrelation of the chains without batch
    lengths to choose, but not the (small, if the initial loop converged) bias from starting
    the final run out of equilibrium.

    Parameters
    ----------
    rng : numpy.random.Generator
        The only source of randomness of this run.
    density : BatchedDensity
    x0 : numpy.ndarray, shape (N, d)
        Exact draws from ``q0``.
    path : AnnealingPath
        The path (with its shift ``c``).
    ladder : array_like, shape (K,)
        Increasing temperatures from exactly 0 to exactly 1 (``K >= 2``).
    kernel : MutationKernel
        HMC and MALA get per-level step sizes and masses, random-walk Metropolis per-level
        scales; other kernels one parameter set from the initial population.
    n_sweeps : int, default 500
        Gibbs sweeps of the final run.
    n_init_sweeps : int, default 50
        Sweeps per initial round.
    max_init_rounds : int, default 20
        Cap on the initial rounds (``0`` skips the loop).
    tol : float, default 0.1
        Stop the initial loop once ``max_k |r_k − ĉ_k| < tol / K``.
    level_prior : array_like, shape (K,), optional
        Prior ``r_k`` over levels (normalized here); uniform by default.
    warm_start : {"ais", None}, default "ais"
        See step 1.
    n_mcmc_steps : int, default 1
        Kernel transitions per sweep.
    adapt_gain : float, default 0.1
        Gain of the per-level log-step update ``+= gain · (accepted − target)`` per sweep.
    n_groups : int, default 20
        Particle groups for the error bars (at most ``N``).
    n_snapshots : int, default 20
        Final-run sweeps (evenly spaced) whose particles are kept for posterior draws.
    restart_levels : {"conditional", "prior"}, default "conditional"
        Levels at the start of initial rounds after the first: draws from ``q(k | θ)`` under
        the updated ``log Ẑ_k``, or fresh draws from ``r`` (the paper's recipe). Fresh levels
        bias a short round's ``ĉ`` towards ``r`` when levels mix slowly, so the stopping rule
        can be met while the guesses are still off.
    init_burn : float, default 0.5
        Fraction of each initial round's sweeps left out of its ``ĉ`` (0 = the paper's
        recipe). The guesses change between rounds, so the chain needs a few sweeps to
        settle to the new joint law.
    callback : callable, optional
        ``callback(phase, round_or_sweep, info_dict)`` for progress reporting.

    Returns
    -------
    RTSResult
    """
    ladder = validate_schedule(ladder)
    K = ladder.size
    x0 = np.asarray(x0, dtype=np.float64)
    N = x0.shape[0]
    if N < 2:
        raise ValueError(f"need at least 2 particles, got {N}")
    for name, val, lo in (("n_sweeps", n_sweeps, 1), ("n_init_sweeps", n_init_sweeps, 1),
                          ("max_init_rounds", max_init_rounds, 0), ("n_mcmc_steps", n_mcmc_steps, 1),
                          ("n_groups", n_groups, 2), ("n_snapshots", n_snapshots, 1)):
        if isinstance(val, bool) or int(val) != val or val < lo:
            raise ValueError(f"{name} must be an integer >= {lo}, got {val!r}")
    if not (np.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be positive, got {tol!r}; the paper uses 0.1")
    if warm_start not in WARM_STARTS:
        raise ValueError(f"warm_start must be 'ais' or None, got {warm_start!r}")
    if restart_levels not in ("prior", "conditional"):
        raise ValueError(f"restart_levels must be 'prior' or 'conditional', got {restart_levels!r}")
    if not 0.0 <= init_burn < 1.0:
        raise ValueError(f"init_burn must be in [0, 1), got {init_burn!r}")
    if level_prior is None:
        r = np.full(K, 1.0 / K)
    else:
        r = np.asarray(level_prior, dtype=np.float64)
        if r.shape != (K,) or not np.all(np.isfinite(r)) or np.any(r <= 0):
            raise ValueError(f"level_prior must be {K} positive finite numbers (one per level)")
        r = r / r.sum()
    log_r = np.log(r)
    n_groups = min(int(n_groups), N)
    target = getattr(kernel, "target_accept", None)
    sampler = _Sampler(density, path, ladder, log_r, kernel, int(n_mcmc_steps))
    evals0 = density.n_evals

    # 1. start
    if warm_start == "ais":
        assigned = rng.choice(K, size=N, p=r)
        rec = _RecordingSchedule(ladder, assigned)
        res = anneal(rng, density, x0, path, rec, kernel, n_mcmc_steps=1, resample="never")
        x = rec.x
        last = assigned == K - 1
        x[last] = res.state.x[last]
        log_z = np.concatenate([[0.0], np.cumsum(res.stages["log_z_increment"])])
        params = LevelParams.from_stages([res.kernel_params[0], *res.kernel_params])
        state = ParticleState.evaluate(density, x, gradient=kernel.needs_gradient)
        levels = assigned
    else:
        state = ParticleState.evaluate(density, x0, gradient=kernel.needs_gradient)
        log_z = np.zeros(K)
        params = LevelParams.from_params(kernel.init(state), K)
        levels = rng.choice(K, size=N, p=r)

    # 2. initial rounds (the first ``n_burn`` sweeps of a round do not enter its ĉ)
    n_burn = min(int(init_burn * int(n_init_sweeps)), int(n_init_sweeps) - 1)
    c_init, dev_init = [], []
    converged = max_init_rounds == 0
    for rnd in range(int(max_init_rounds)):
        if rnd > 0:
            if restart_levels == "prior":
                levels = rng.choice(K, size=N, p=r)
            else:
                levels = sample_levels(rng, temperature_log_conditional(
                    ladder_log_ratio(path, ladder, state.delta), log_r, log_z))
        log_c_sum = np.full(K, -np.inf)
        s0 = np.zeros(K)
        s1 = np.zeros((K, state.dim))
        s2 = np.zeros((K, state.dim))
        sq = np.zeros(K)
        for i in range(int(n_init_sweeps)):
            state, used, levels, moved, log_q = sampler.sweep(rng, state, levels, log_z, params)
            _adapt_steps(params, used, moved, target, adapt_gain, K)
            if i >= n_burn:
                log_c_sum = np.logaddexp(log_c_sum, logsumexp(log_q, axis=1))
            if params.kind == "step":
                q = _exp_flush(log_q)
                s0 += q.sum(axis=1)
                sq += (q * q).sum(axis=1)
                s1 += q @ state.x
                s2 += q @ (state.x * state.x)
        log_c = log_c_sum - logsumexp(log_c_sum)
        c_hat = np.exp(log_c)
        dev = float(np.max(np.abs(r - c_hat)))
        c_init.append(c_hat)
        dev_init.append(dev)
        log_z = rts_update(log_z, log_r, log_c)
        if params.kind == "step":
            ess = np.where(sq > 0, s0 * s0 / np.where(sq > 0, sq, 1.0), 0.0)
            for k in np.flatnonzero(ess >= max(10.0, 2.0 * state.dim)):
                m = s1[k] / s0[k]
                var = np.maximum(s2[k] / s0[k] - m * m, 0.0)
                params.inv_mass[k] = _floor(var)
        if callback is not None:
            callback("init", rnd, {"deviation": dev, "tolerance": tol / K})
        if dev < tol / K:
            converged = True
            break
    if not converged:
        warnings.warn(
            f"RTS initial loop hit max_init_rounds={max_init_rounds} with max|r_k - c_k| = "
            f"{dev_init[-1]:.3g} >= tol/K = {tol / K:.3g}; the final run's log Z_k guesses are "
            "still off, so its temperatures may mix poorly. Increase max_init_rounds or "
            "n_init_sweeps, or use more temperatures.",
            RTSInitialLoopWarning,
            stacklevel=2,
        )
    evals_init = density.n_evals - evals0

    # 3. final run, everything frozen
    log_q = temperature_log_conditional(ladder_log_ratio(path, ladder, state.delta), log_r, log_z)
    levels = sample_levels(rng, log_q)
    groups = np.arange(N) % n_groups
    onehot = np.zeros((N, n_groups))
    onehot[np.arange(N), groups] = 1.0
    c_grp = np.zeros((K, n_groups))
    rbti_num = np.zeros((K, n_groups))
    ti_sum = np.zeros((K, n_groups))
    ti_cnt = np.zeros((K, n_groups))
    sq = np.zeros(K)
    acc = np.zeros(K)
    visits = np.zeros(K)
    trans = np.zeros(K * K, dtype=np.int64)
    deriv_fn = _derivative_fn(path, ladder)
    snap_at = set(np.unique(np.linspace(n_sweeps - 1, 0, min(n_snapshots, n_sweeps)).round().astype(int)).tolist())
    snaps_x, snaps_w = [], []
    for s in range(int(n_sweeps)):
        state, used, levels, moved, log_q = sampler.sweep(rng, state, levels, log_z, params)
        q = _exp_flush(log_q)
        c_grp += q @ onehot
        sq += (q * q).sum(axis=1)
        visits += np.bincount(used, minlength=K)
        acc += np.bincount(used, weights=moved.astype(float), minlength=K)
        trans += np.bincount(used * K + levels, minlength=K * K)
        if deriv_fn is not None:
            dk = deriv_fn(state.delta)  # (K, N): ∂τ log γ at every level
            if isinstance(path, GeometricPath) and np.all(np.isfinite(dk[0])):
                rbti_num += q @ (onehot * dk[0][:, None])  # the same Δ − c at every level
            else:
                rbti_num += (q * np.where(q > 0, dk, 0.0)) @ onehot
            own = dk[used, np.arange(N)]
            flat = used * n_groups + groups
            ti_sum += np.bincount(flat, weights=own, minlength=K * n_groups).reshape(K, n_groups)
            ti_cnt += np.bincount(flat, minlength=K * n_groups).reshape(K, n_groups)
        if s in snap_at:
            snaps_x.append(state.x.copy())
            snaps_w.append(log_q[-1].copy())
        if callback is not None and (s + 1) % max(1, n_sweeps // 10) == 0:
            callback("final", s, {})

    # estimates
    c_tot = c_grp.sum(axis=1)
    c_hat = c_tot / c_tot.sum()
    with np.errstate(divide="ignore"):
        log_c = np.log(c_hat)
    log_z_rts = rts_update(log_z, log_r, log_c)
    log_zhat = float(log_z_rts[-1] + path.c)
    sizes = np.bincount(groups, minlength=n_groups).astype(float)
    cg = c_grp / sizes[None, :]  # per-group means (scaled like c_tot / N)
    cm = c_tot / N
    with np.errstate(divide="ignore", invalid="ignore"):
        lin = cg[-1] / cm[-1] - cg[0] / cm[0]
    var_rts = float(np.var(lin, ddof=1) / n_groups) if np.all(np.isfinite(lin)) else float("inf")

    ti = rbti = var_ti = var_rbti = float("nan")
    ti_means = rbti_means = np.full(K, np.nan)
    if deriv_fn is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            ti_means = ti_sum.sum(axis=1) / ti_cnt.sum(axis=1)
            rbti_means = rbti_num.sum(axis=1) / c_tot
            ti_g = np.array([trapezoid(ladder, ti_sum[:, g] / ti_cnt[:, g]) for g in range(n_groups)])
            rbti_g = np.array([trapezoid(ladder, rbti_num[:, g] / c_grp[:, g]) for g in range(n_groups)])
        ti = trapezoid(ladder, ti_means) + path.c
        rbti = trapezoid(ladder, rbti_means) + path.c
        var_ti = float(np.var(ti_g, ddof=1) / n_groups) if np.all(np.isfinite(ti_g)) else float("nan")
        var_rbti = float(np.var(rbti_g, ddof=1) / n_groups) if np.all(np.isfinite(rbti_g)) else float("nan")

    with np.errstate(divide="ignore", invalid="ignore"):
        ess = np.where(sq > 0, c_tot**2 / sq, 0.0)
        acc_rate = acc / visits
    return RTSResult(
        log_marginal_likelihood=log_zhat,
        log_z_variance=var_rts,
        log_z_ti=float(ti),
        log_z_ti_variance=var_ti,
        log_z_rbti=float(rbti),
        log_z_rbti_variance=var_rbti,
        ladder=ladder,
        log_prior=log_r,
        log_z_levels=log_z,
        log_z_rts_levels=log_z_rts,
        c_hat=c_hat,
        c_hat_mcse=np.std(c_grp / c_grp.sum(axis=0, keepdims=True), axis=1, ddof=1) / np.sqrt(n_groups),
        c_hat_init=np.array(c_init).reshape(-1, K),
        init_deviation=np.array(dev_init, dtype=np.float64),
        init_converged=bool(converged),
        transitions=trans.reshape(K, K),
        acceptance_rate=acc_rate,
        ti_means=ti_means,
        rbti_means=rbti_means,
        ess=ess,
        step_size=params.step_sizes(),
        state=state,
        levels=levels,
        posterior_x=np.concatenate(snaps_x),
        posterior_log_weights=np.concatenate(snaps_w),
        n_logp_evals=int(density.n_evals - evals0),
        n_logp_evals_init=int(evals_init),
        c=float(path.c),
        n_sweeps=int(n_sweeps),
        extras={"level_visits": visits},
    )


def _floor(var: np.ndarray) -> np.ndarray:
    scale = max(float(np.mean(var)), 1e-12)
    return np.maximum(var, 1e-10 * scale + 1e-300)


def _derivative_fn(path, ladder):
    if isinstance(path, GeometricPath):
        return lambda delta: np.broadcast_to(_clean_delta(delta) - path.c, (ladder.size, np.size(delta)))
    if isinstance(path, PowerMeanPath):
        return lambda delta: tau_derivative(path, ladder[:, None], np.asarray(delta)[None, :])
    return None
