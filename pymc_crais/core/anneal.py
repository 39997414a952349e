"""One annealing loop for AIS and SMC over an ``(N, d)`` particle population.

Stage ``k`` (ALGORITHMS.md §3, §6):

1. the schedule picks ``τ_k`` from ``τ_{k−1}`` (and, if adaptive, the population);
2. the weights take the increment ``log γ_{τ_k} − log γ_{τ_{k−1}}`` (before the move), and
   ``log Ẑ += log Σ_j W_j · exp(incr_j)`` with ``W`` the normalized weights;
3. optionally resample (``"never"`` = AIS, ``"always"``, or ``"ess"`` below ``κN``), after
   which ``W`` is uniform;
4. the kernel is tuned from the population, then moves every particle
   ``n_mcmc_steps`` times with transitions invariant for ``γ_{τ_k}``.

Without resampling the accumulated ``log Ẑ`` equals ``logsumexp(log w) − log N`` exactly
(the increments telescope), the AIS estimator. The scale shift ``c`` of the path is added
back at the end.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .density import BatchedDensity
from .estimators import ancestry_variance
from .kernels import KernelInfo, MutationKernel
from .particles import ParticleState
from .paths import AnnealingPath
from .resampling import get_resampler
from .schedules import Schedule
from .tails import coordinate_correlations, log_weight_tail
from .weights import clean_log_weights, ess_from_log_weights, logsumexp

__all__ = ["AnnealResult", "ParamsByTau", "WeightsVanishedError", "anneal", "RESAMPLE_POLICIES"]

RESAMPLE_POLICIES = ("never", "always", "ess")


class WeightsVanishedError(FloatingPointError):
    """Every particle's weight became zero (all log-weights ``-inf`` or NaN)."""

    def __init__(self, stage: int, tau_from: float, tau_to: float):
        self.stage, self.tau_from, self.tau_to = stage, tau_from, tau_to
        super().__init__(
            f"all particle weights vanished at stage {stage} (tau {tau_from:.6g} -> {tau_to:.6g}): "
            "every particle has a non-finite or zero tempered density there. Check the model "
            "for log-densities that are -inf/NaN on a large part of the initial distribution's "
            "support, or use more particles / a finer schedule."
        )


@dataclass
class StageRecord:
    """Per-stage diagnostics, one list entry per stage."""

    tau: list = field(default_factory=list)
    ess: list = field(default_factory=list)
    acceptance_rate: list = field(default_factory=list)
    log_z_increment: list = field(default_factory=list)
    mcmc_steps: list = field(default_factory=list)
    resampled: list = field(default_factory=list)
    # diagnostics (pymc_crais.diagnostics): mean and max over coordinates of the correlation
    # of the particles after the stage's moves with their positions before (NaN: no move),
    # and the M + 1 largest of the stage's incremental log-weights log W + incr (core.tails)
    move_correlation: list = field(default_factory=list)
    move_correlation_max: list = field(default_factory=list)
    weight_tail: list = field(default_factory=list)

    def as_arrays(self) -> dict[str, np.ndarray]:
        """The records as arrays (``resampled`` as bool, ``weight_tail`` as (stage, M + 1))."""
        out = {k: np.asarray(v, dtype=np.float64) for k, v in vars(self).items()}
        out["resampled"] = np.asarray(self.resampled, dtype=bool)
        return out


@dataclass
class AnnealResult:
    """The outcome of one annealing run (one chain).

    Attributes
    ----------
    state : ParticleState
        Final particles.
    log_weights : numpy.ndarray
        Final unnormalized log-weights (AIS: the importance weights of the particles).
    log_marginal_likelihood : float
        ``log Ẑ``, the scale shift ``c`` included.
    log_z_variance : float
        Within-run variance of ``log Ẑ`` from the final weights and the particles' Eve
        indices (:func:`pymc_crais.core.estimators.ancestry_variance`). Without resampling
        (AIS) it is the delta-method variance of the mean of the final weights
        (:func:`pymc_crais.core.weights.log_z_relative_variance`); with resampling it
        accounts for the dependence resampling creates.
    log_z_variance_segments : float
        The per-segment weight variances summed over the segments between resamplings
        (equal to ``log_z_variance`` for AIS); ignores resampling's dependence and is
        kept only as a diagnostic.
    eve : numpy.ndarray of int
        Index of each final particle's ancestor in the initial population.
    n_eves : int
        Number of distinct Eves left (a collapsed genealogy, ``n_eves == 1``, makes the
        ancestry variance uninformative).
    n_resamplings : int
        Number of resampling steps.
    stages : dict of numpy.ndarray
        ``tau``, ``ess``, ``acceptance_rate``, ``log_z_increment``, ``mcmc_steps``,
        ``resampled``.
    n_logp_evals : int
        Particle-evaluations of the model (initial population included).
    c : float
        The path's scale shift.
    hit_max_steps : bool
        Whether ``max_steps`` forced the last step to ``τ = 1``.
    kernel_params : list
        The kernel parameters of each stage's last transition, without per-particle parts
        (for replay by a later run).
    initial_weight_tail : numpy.ndarray
        The ``M + 1`` largest ``Δ`` of the initial particles: the tail of the importance
        weights of ``q0`` against the target (for the Pareto k̂ of the start).
    """

    state: ParticleState
    log_weights: np.ndarray
    log_marginal_likelihood: float
    log_z_variance: float
    stages: dict
    n_logp_evals: int
    c: float
    hit_max_steps: bool = False
    kernel_params: list = field(default_factory=list)
    log_z_variance_segments: float = float("nan")
    eve: np.ndarray | None = None
    n_resamplings: int = 0
    initial_weight_tail: np.ndarray | None = None

    @property
    def n_eves(self) -> int:
        """Number of distinct initial ancestors of the final particles."""
        return int(self.log_weights.size if self.eve is None else np.unique(self.eve).size)

    @property
    def n_stages(self) -> int:
        """Number of annealing stages run."""
        return int(self.stages["tau"].size)


def mean_correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Mean over coordinates of the Pearson correlation between two populations' columns."""
    ac = a - a.mean(axis=0)
    bc = b - b.mean(axis=0)
    den = np.sqrt(np.sum(ac * ac, axis=0) * np.sum(bc * bc, axis=0))
    ok = den > 0
    if not ok.any():
        return 0.0
    return float(np.mean(np.sum(ac * bc, axis=0)[ok] / den[ok]))


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


def _segment_variance(log_w: np.ndarray) -> float:
    n = log_w.size
    e = ess_from_log_weights(log_w)
    return float("inf") if e == 0.0 else max(1.0 / e - 1.0 / n, 0.0)


def anneal(
    rng: np.random.Generator,
    density: BatchedDensity,
    x0: np.ndarray,
    path: AnnealingPath,
    schedule: Schedule,
    kernel: MutationKernel,
    *,
    n_mcmc_steps: int | str = 1,
    max_mcmc_steps: int = 20,
    correlation_threshold: float = 0.01,
    resample: str = "never",
    threshold: float = 0.5,
    resampler: str = "systematic",
    max_steps: int = 100_000,
    tune_from_weights: bool = False,
    kernel_params=None,
    callback: Callable[[int, float, float, float], None] | None = None,
) -> AnnealResult:
    """Anneal the particles ``x0 ~ q0`` to the target and estimate ``log Z``.

    Parameters
    ----------
    rng : numpy.random.Generator
        The only source of randomness of this run.
    density : BatchedDensity
        Batched ``(log q0, Δ)`` evaluator.
    x0 : numpy.ndarray, shape (N, d)
        Exact draws from ``q0``.
    path : AnnealingPath
        The annealing path (with its scale shift ``c``).
    schedule : Schedule
        Chooses each next τ.
    kernel : MutationKernel
        Mutation kernel (tuned between stages).
    n_mcmc_steps : int or "auto", default 1
        Kernel transitions per stage. ``"auto"`` moves until the mean correlation between
        the particles and their positions at the start of the stage drops by less than
        ``correlation_threshold`` in one transition (or below 0.1), at most
        ``max_mcmc_steps`` times (PyMC's rule).
    max_mcmc_steps : int, default 20
        Cap of the ``"auto"`` rule.
    correlation_threshold : float, default 0.01
        Threshold of the ``"auto"`` rule.
    resample : {"never", "always", "ess"}, default "never"
        ``"never"`` is AIS; ``"ess"`` resamples when the ESS falls below ``threshold · N``.
    threshold : float, default 0.5
        κ of the ``"ess"`` policy.
    resampler : str, default "systematic"
        Resampling scheme (see :mod:`pymc_crais.core.resampling`).
    max_steps : int, default 100000
        Maximum number of stages; if τ < 1 then, the last stage jumps to τ = 1 with a
        warning and ``hit_max_steps`` is set.
    tune_from_weights : bool, default False
        Estimate the kernel's moments with the current weights (SMC) rather than uniformly
        (AIS, whose weights can degenerate while the particles still track ``γ_τ``).
    kernel_params : callable, optional
        ``kernel_params(tau) -> params``: use these fixed kernel parameters at each stage
        instead of tuning from the population. Kernels fixed in advance keep AIS exactly
        unbiased for ``Z``; population-tuned kernels carry an O(1/N) bias (docs/algorithms.md).
    callback : callable, optional
        ``callback(stage, tau, ess, acceptance_rate)`` after each stage (progress bars).

    Returns
    -------
    AnnealResult
    """
    if resample not in RESAMPLE_POLICIES:
        raise ValueError(f"resample={resample!r} is unknown; choose one of {RESAMPLE_POLICIES}")
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    auto_steps = isinstance(n_mcmc_steps, str)
    if auto_steps:
        if n_mcmc_steps != "auto":
            raise ValueError(f"n_mcmc_steps must be an integer or 'auto', got {n_mcmc_steps!r}")
        if int(max_mcmc_steps) != max_mcmc_steps or max_mcmc_steps < 1:
            raise ValueError(f"max_mcmc_steps must be a positive integer, got {max_mcmc_steps}")
        if not 0.0 <= correlation_threshold < 1.0:
            raise ValueError(f"correlation_threshold must be in [0, 1), got {correlation_threshold}")
    elif int(n_mcmc_steps) != n_mcmc_steps or n_mcmc_steps < 0:
        raise ValueError(f"n_mcmc_steps must be a non-negative integer or 'auto', got {n_mcmc_steps}")
    if int(max_steps) != max_steps or max_steps < 1:
        raise ValueError(f"max_steps must be a positive integer, got {max_steps}")
    resample_fn = get_resampler(resampler)

    evals_before = density.n_evals
    state = ParticleState.evaluate(density, x0, gradient=kernel.needs_gradient)
    n = state.n
    initial_tail = log_weight_tail(state.delta)
    log_w = np.zeros(n)
    log_z = 0.0
    log_z_var = 0.0
    eve = np.arange(n)  # each particle's ancestor in x0, for the ancestry variance
    n_resamplings = 0
    params = kernel.init(state)
    used_params: list = []
    info: KernelInfo | None = None
    rec = StageRecord()
    tau = 0.0
    stage = 0
    hit_max = False

    while tau < 1.0:
        if stage == max_steps - 1:
            tau_new = 1.0
            if schedule.next_tau(stage, tau, state, log_w, path) < 1.0:
                hit_max = True
                warnings.warn(
                    f"max_steps={max_steps} reached at tau={tau:.6g}; the last step jumps to "
                    "tau=1, so the estimate may be poor. Increase max_steps.",
                    RuntimeWarning,
                    stacklevel=2,
                )
        else:
            tau_new = float(schedule.next_tau(stage, tau, state, log_w, path))
        if not tau < tau_new <= 1.0:
            raise RuntimeError(
                f"schedule returned tau={tau_new!r} after tau={tau!r} at stage {stage}; "
                "a schedule must increase strictly and stay <= 1"
            )

        incr = path.log_increment(tau, tau_new, state.delta)
        log_w_norm = log_w - logsumexp(log_w)
        log_z_inc = logsumexp(log_w_norm + incr)
        if not np.isfinite(log_z_inc):
            raise WeightsVanishedError(stage, tau, tau_new)
        log_z += log_z_inc
        rec.weight_tail.append(log_weight_tail(log_w_norm + incr))
        log_w = clean_log_weights(log_w + incr)
        stage_ess = ess_from_log_weights(log_w)

        do_resample = resample == "always" or (resample == "ess" and stage_ess < threshold * n)
        if do_resample and tau_new < 1.0:
            log_z_var += _segment_variance(log_w)
            idx = resample_fn(rng, np.exp(log_w - logsumexp(log_w)), n)
            state = state.take(idx)
            eve = eve[idx]
            n_resamplings += 1
            log_w = np.zeros(n)
        else:
            do_resample = False

        if kernel_params is None:
            params = kernel.tune(params, state, info, log_w if tune_from_weights else None)
        else:
            params = kernel_params(tau_new)
        acc = []
        n_moves = int(max_mcmc_steps) if auto_steps else int(n_mcmc_steps)
        x_start, prev_corr = state.x, 1.0
        for k in range(n_moves):
            if k > 0 and kernel_params is None:  # re-tune between moves: few stages still adapt
                params = kernel.tune(params, state, info, log_w if tune_from_weights else None)
            state, info = kernel.step(rng, state, density, path, tau_new, params)
            acc.append(info.acceptance_rate)
            if auto_steps:
                corr = mean_correlation(x_start, state.x)
                if prev_corr - corr < correlation_threshold or corr < 0.1:
                    break
                prev_corr = corr

        # the parameters of the stage's last transition (re-tuned on particles that have
        # moved under γ_τ): what a replay at this τ should use, not the stage's first ones
        used_params.append(kernel.population_params(params))
        rec.tau.append(tau_new)
        rec.ess.append(stage_ess)
        rec.acceptance_rate.append(float(np.mean(acc)) if acc else np.nan)
        rec.log_z_increment.append(log_z_inc)
        rec.mcmc_steps.append(len(acc))
        rec.resampled.append(do_resample)
        corr = coordinate_correlations(x_start, state.x) if acc else np.array([])
        rec.move_correlation.append(float(corr.mean()) if corr.size else np.nan)
        rec.move_correlation_max.append(float(corr.max()) if corr.size else np.nan)
        if callback is not None:
            callback(stage, tau_new, stage_ess, rec.acceptance_rate[-1])
        tau = tau_new
        stage += 1

    log_z_var += _segment_variance(log_w)
    within = ancestry_variance(log_w, eve, n_resamplings, multinomial=resampler == "multinomial")
    return AnnealResult(
        state=state,
        log_weights=log_w,
        log_marginal_likelihood=float(log_z + path.c),
        log_z_variance=float(within),
        stages=rec.as_arrays(),
        n_logp_evals=int(density.n_evals - evals_before),
        c=float(path.c),
        hit_max_steps=hit_max,
        kernel_params=used_params,
        log_z_variance_segments=float(log_z_var),
        eve=eve,
        n_resamplings=n_resamplings,
        initial_weight_tail=initial_tail,
    )
