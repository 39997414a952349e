"""Tempered sampling over a ladder: the result and the run, phase by phase.

The options are in :mod:`.options`; the phases live in their own modules: :mod:`.warmup` (the start and the initial rounds),
:mod:`.final` (the frozen final run), :mod:`.levels` (``q(k | θ)`` and the Gibbs sweep);
the estimators (RTS, TI, RB-TI) in :mod:`pymc_crais.core.estimators`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from ...warnings import RTSInitialLoopWarning, user_stacklevel
from ..density import BatchedDensity
from ..estimators import rts_estimate, thermodynamic_integration
from ..kernels import MutationKernel
from ..kernels.moves import Moves
from ..particles import ParticleState
from ..paths import AnnealingPath
from ..schedules import validate_schedule
from .final import final_run
from .levels import TemperingSweep
from .options import RTSOptions
from .warmup import cold_start, initial_rounds, warm_start

__all__ = ["RTSResult", "rts"]

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


# ----------------------------------------------------------------------------- the run
def rts(
    rng: np.random.Generator,
    density: BatchedDensity,
    x0: np.ndarray,
    path: AnnealingPath,
    ladder,
    kernel: MutationKernel,
    options: RTSOptions | None = None,
    *,
    callback=None,
    **settings,
) -> RTSResult:
    """Rao-Blackwellized tempered sampling of ``N`` particles over a ladder.

    See docs/algorithms.md, "Rao-Blackwellized tempered sampling and thermodynamic
    integration" (Carlson, Stinson, Pakman & Paninski 2016).

    1. **Start** (:mod:`.warmup`). ``warm_start="ais"``: one AIS pass of the ``N`` particles
       over the ladder (population-tuned kernel, one move per level). Its running ``log Ẑ``
       at each level initializes ``log Ẑ_k``, its kernel parameters at each level the
       per-level parameters (:meth:`MutationKernel.stack_level_params`), and each particle
       starts from its own AIS state at a level drawn from ``r``. ``warm_start=None`` is the
       paper's cold start: ``log Ẑ_k = 0``, ``θ ~ q0`` and levels drawn from ``r``, the
       kernel's initial parameters at every level.
    2. **Initial rounds** of ``n_init_sweeps`` Gibbs sweeps (``ĉ`` from the last
       ``1 − init_burn`` of them): per-level step sizes adapt toward the kernel's
       ``target_accept`` after every sweep (:meth:`MutationKernel.adapt_level_params`; and,
       for kernels with per-level masses, the masses are re-estimated from
       ``q(k|θ)``-weighted moments after every round); at the end of a round ``log Ẑ_k``
       takes the RTS update. The loop stops once the round's ``max_k |r_k − ĉ_k| < tol / K``
       (then the update is still applied) or after ``max_init_rounds`` rounds (with a
       warning). Each new round restarts from the last ``θ`` with levels drawn from
       ``q(k | θ)`` or afresh from ``r`` as the paper recommends (``restart_levels``).
    3. **Final run** (:mod:`.final`) of ``n_sweeps`` sweeps with ``log Ẑ_k`` and the kernel
       parameters frozen (so it is a Markov chain with a fixed invariant law), starting from
       the last ``θ`` with levels drawn from ``q(k | θ)``. It gives ``ĉ``, the RTS estimate,
       TI and RB-TI (:mod:`pymc_crais.core.estimators`).

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
        The path (with its shift ``c``). TI needs :meth:`AnnealingPath.tau_derivative`
        (NaN otherwise).
    ladder : array_like, shape (K,)
        Increasing temperatures from exactly 0 to exactly 1 (``K >= 2``).
    kernel : MutationKernel
        Must implement the per-level hooks (HMC and MALA get per-level step sizes and
        masses, random-walk Metropolis per-level scales, IMH one parameter set).
    options : RTSOptions, optional
        The settings below as one object (then no keyword settings).
    callback : callable, optional
        ``callback(phase, round_or_sweep, info_dict)`` for progress reporting.
    **settings
        The fields of :class:`RTSOptions`:

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
            Levels at the start of initial rounds after the first: draws from ``q(k | θ)``
            under the updated ``log Ẑ_k``, or fresh draws from ``r`` (the paper's recipe).
            Fresh levels bias a short round's ``ĉ`` towards ``r`` when levels mix slowly, so
            the stopping rule can be met while the guesses are still off.
        init_burn : float, default 0.5
            Fraction of each initial round's sweeps left out of its ``ĉ`` (0 = the paper's
            recipe). The guesses change between rounds, so the chain needs a few sweeps to
            settle to the new joint law.

    Returns
    -------
    RTSResult
    """
    if options is None:
        options = RTSOptions(**settings)
    elif settings:
        raise TypeError(
            f"pass either options or keyword settings, not both (got {sorted(settings)})"
        )
    ladder = validate_schedule(ladder)
    K = ladder.size
    x0 = np.asarray(x0, dtype=np.float64)
    N = x0.shape[0]
    if N < 2:
        raise ValueError(f"need at least 2 particles, got {N}")
    r = options.level_probabilities(K)
    log_r = np.log(r)
    n_groups = min(int(options.n_groups), N)
    sweep = TemperingSweep(
        density, path, ladder, log_r, kernel, Moves.fixed(int(options.n_mcmc_steps), retune=False)
    )
    evals0 = density.n_evals

    if options.warm_start == "ais":
        start = warm_start(rng, density, x0, path, ladder, kernel, r)
    else:
        start = cold_start(rng, density, x0, ladder, kernel, r)
    init = initial_rounds(rng, sweep, start, options, r, callback)
    if not init.converged:
        warnings.warn(
            f"RTS initial loop hit max_init_rounds={options.max_init_rounds} with "
            f"max|r_k - c_k| = {init.deviation[-1]:.3g} >= tol/K = {options.tol / K:.3g}; the "
            "final run's log Z_k guesses are still off, so its temperatures may mix poorly. "
            "Increase max_init_rounds or n_init_sweeps, or use more temperatures.",
            RTSInitialLoopWarning,
            stacklevel=user_stacklevel(),
        )
    evals_init = density.n_evals - evals0

    run = final_run(rng, sweep, init.state, init.log_z, init.params, options, n_groups, callback)
    return _result(path, ladder, log_r, init, run, density.n_evals - evals0, evals_init, options)


def _result(path, ladder, log_r, init, run, n_evals, n_evals_init, options) -> RTSResult:
    """The estimates of the final run, packed with the run's diagnostics."""
    K = ladder.size
    n_groups = run.c_groups.shape[1]
    sizes = np.bincount(np.arange(run.state.n) % n_groups, minlength=n_groups).astype(float)
    est = rts_estimate(init.log_z, log_r, run.c_groups, sizes)
    ti = rbti = var_ti = var_rbti = float("nan")
    ti_means = rbti_means = np.full(K, np.nan)
    if path.has_tau_derivative:
        ti, var_ti, ti_means = thermodynamic_integration(ladder, run.ti_sums, run.ti_counts)
        rbti, var_rbti, rbti_means = thermodynamic_integration(ladder, run.rbti_sums, run.c_groups)
        ti, rbti = ti + path.c, rbti + path.c
    c_tot = run.c_groups.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ess = np.where(run.q_squares > 0, c_tot**2 / run.q_squares, 0.0)
        acc_rate = run.accepted / run.visits
    return RTSResult(
        log_marginal_likelihood=float(est.log_z_levels[-1] + path.c),
        log_z_variance=est.variance,
        log_z_ti=float(ti),
        log_z_ti_variance=var_ti,
        log_z_rbti=float(rbti),
        log_z_rbti_variance=var_rbti,
        ladder=ladder,
        log_prior=log_r,
        log_z_levels=init.log_z,
        log_z_rts_levels=est.log_z_levels,
        c_hat=est.c_hat,
        c_hat_mcse=est.c_hat_mcse,
        c_hat_init=np.array(init.c_hat).reshape(-1, K),
        init_deviation=np.array(init.deviation, dtype=np.float64),
        init_converged=bool(init.converged),
        transitions=run.transitions.reshape(K, K),
        acceptance_rate=acc_rate,
        ti_means=ti_means,
        rbti_means=rbti_means,
        ess=ess,
        step_size=init.params.step_sizes(),
        state=run.state,
        levels=run.levels,
        posterior_x=np.concatenate(run.snapshots_x),
        posterior_log_weights=np.concatenate(run.snapshots_log_w),
        n_logp_evals=int(n_evals),
        n_logp_evals_init=int(n_evals_init),
        c=float(path.c),
        n_sweeps=int(options.n_sweeps),
        extras={"level_visits": run.visits},
    )
