"""``sample_rts``: Rao-Blackwellized tempered sampling (and thermodynamic integration) for
PyMC models, on the shared set-up, chain runner and output contract of the other samplers."""

from __future__ import annotations

import numbers
import time
import warnings
from dataclasses import dataclass

import numpy as np

from ..core.paths import make_path
from ..core.rts import RTSOptions
from ..core.schedules import interpolate_schedule
from ..warnings import RTSInitialLoopWarning, user_stacklevel
from .engine.options import RunArguments, RunOptions, check_int
from .engine.pipeline import RunSetup, finish, fresh_kernel, prepare
from .engine.progress import ChainProgress
from .engine.rts_chain import RTSTask, run_rts_chain
from .engine.runner import run_chains, single_threaded_blas
from .engine.schedule_option import LADDERS, parse_schedule
from .engine.tuning import constant_rate_tuning, rate_for_steps, scale_shift_pilot

__all__ = ["RTSSettings", "run_rts", "sample_rts"]


def constant_rate_ladder(setup: RunSetup, path, total: float, n_temperatures: int, attrs):
    """A CR-AIS tuning run (δ = T / (K − 1)) whose schedule, interpolated to ``K`` levels,
    is the ladder."""
    n_tune = n_temperatures - 1
    tuning = constant_rate_tuning(
        setup,
        path,
        rate_for_steps(total, n_tune),
        draws=min(setup.draws, 256),
        max_steps=4 * n_tune,
        warn_at_cap=False,
        label="RTS ladder tuning",
    )
    attrs.update(
        {
            "ladder_delta": tuning.delta,
            "n_ladder_tune_steps": tuning.result.n_stages,
            "n_logp_evals_ladder": tuning.n_logp_evals,
        }
    )
    return interpolate_schedule(tuning.schedule, n_tune)


@single_threaded_blas
def sample_rts(
    draws: int = 1000,
    n_temperatures: int = 100,
    n_sweeps: int = 500,
    ladder="constant_rate",
    alpha: float = 0.0,
    kernel="auto",
    chains: int | None = None,
    cores: int | None = None,
    random_seed=None,
    progressbar: bool = True,
    return_inferencedata: bool = True,
    idata_kwargs: dict | None = None,
    compile_kwargs: dict | None = None,
    *,
    model=None,
    init="auto",
    init_kwargs: dict | None = None,
    ladder_kwargs: dict | None = None,
    level_prior=None,
    warm_start: str | None = "ais",
    n_init_sweeps: int = 50,
    max_init_rounds: int = 20,
    tol: float = 0.1,
    restart_levels: str = "conditional",
    init_burn: float = 0.5,
    n_mcmc_steps: int = 1,
    kernel_kwargs: dict | None = None,
    n_groups: int = 20,
    scale_shift: float | str | None = None,
    backend: str | None = None,
    mp_ctx=None,
    executor=None,
    memory_budget: float | None = None,
):
    """Evidence by Rao-Blackwellized tempered sampling (Carlson et al., ICML 2016), with
    thermodynamic integration from the same draws.

    Each chain runs ``draws`` particles of simulated tempering over a ladder
    ``0 = τ_1 < … < τ_K = 1`` as one batch: Gibbs updates of ``θ | k`` (the batched kernel,
    with step sizes per temperature) and of ``k | θ`` (exact, over all ``K`` levels). The
    Rao-Blackwellized level probabilities ``ĉ_k`` refine the guesses ``log Ẑ_k`` over short
    initial rounds until ``max_k |r_k − ĉ_k| < tol / K``; a final run with everything frozen
    gives ``log Z = log Ẑ_K − log Ẑ_1`` (:func:`pymc_crais.core.rts.rts` has the details).

    Parameters
    ----------
    draws : int, default 1000
        Tempering particles per chain (``>= 2``); also the number of posterior draws per chain.
    n_temperatures : int, default 100
        ``K``, the number of levels of a named or interpolated ladder.
    n_sweeps : int, default 500
        Gibbs sweeps of the final run.
    ladder : str, array_like or previous result, default "constant_rate"
        ``"constant_rate"``: the schedule of a short CR-AIS tuning run (pilot for δ, then
        ``min(draws, 256)`` particles; counted in ``n_logp_evals_ladder``) interpolated to
        ``K`` levels. ``"linear"``, ``"exponential"``, ``"sigmoid"``: fixed ladders
        (``ladder_kwargs`` as for :func:`pymc_crais.sample_ais`). An increasing array from
        0 to 1 (then ``K`` is its length), or a previous result whose schedule is
        interpolated to ``K`` levels.
    alpha : float, default 0.0
        Power-mean exponent of the path (0: geometric).
    kernel : {"auto", "hmc", "mala", "rwmh", "mh", "imh", "imh_then_hmc", "hmc_final_imh"} or MutationKernel, default "auto"
        ``θ | k`` kernel (``"auto"``: ``"hmc"``, or ``"rwmh"`` on models with discrete
        variables); HMC/MALA get per-level step sizes and masses, random-walk Metropolis
        per-level scales, IMH one proposal for all levels; ``"imh_then_hmc"`` and
        ``"hmc_final_imh"`` have no per-level parameters and are refused, with the kernels
        that have them named.
    chains, cores, random_seed, progressbar, return_inferencedata, idata_kwargs, compile_kwargs, model, init, init_kwargs, kernel_kwargs, backend, mp_ctx, executor, memory_budget
        As in :func:`pymc_crais.sample_ais`. Chains are independent replicates. Where
        ``init="auto"``'s mode search finds several modes, RTS starts from the prior, not
        from a Student-t at each mode (its ladder was slower from that start).
    level_prior : array_like, optional
        Prior ``r_k`` over the levels (uniform by default).
    warm_start : {"ais", None}, default "ais"
        ``"ais"``: one AIS pass over the ladder initializes ``log Ẑ_k``, the per-level kernel
        parameters and the particles; ``None``: the paper's cold start (``Ẑ_k = 1``).
    n_init_sweeps, max_init_rounds, tol : default 50, 20, 0.1
        Length of an initial round, the cap on their number (a warning and
        ``hit_max_steps`` when reached) and the stopping rule ``max |r − ĉ| < tol / K``.
    restart_levels : {"conditional", "prior"}, default "conditional"
        Levels at the start of each initial round: drawn from ``q(k | θ)`` under the updated
        guesses (default), or afresh from ``r`` as the paper suggests. Fresh levels make a
        short round's ``ĉ`` look closer to ``r`` than the chain's stationary law is, so the
        stopping rule can be met too early (measured; docs/algorithms.md).
    init_burn : float, default 0.5
        Fraction of each initial round left out of its ``ĉ`` (0: the paper's recipe).
    n_mcmc_steps : int, default 1
        Kernel transitions per sweep.
    n_groups : int, default 20
        Particle groups for the within-chain error bars.
    scale_shift : float, "pilot" or None
        The shift ``c`` of a power-mean path (as in :func:`pymc_crais.sample_ais`).

    Returns
    -------
    xarray.DataTree or SamplerResult
        ``sample_stats.log_marginal_likelihood`` (RTS) and ``log_marginal_likelihood_mcse``
        per chain, so :func:`pymc_crais.log_marginal_likelihood` and
        :func:`pymc_crais.compare` work on it; ``log_marginal_likelihood_ti`` and
        ``log_marginal_likelihood_rbti`` (trapezoid TI, plain and Rao-Blackwellized) with
        their ``_mcse``; per level (dim ``level``): ``ladder``, ``level_prior``, ``c_hat`` (and
        ``c_hat_mcse``),
        ``log_z_levels`` (the frozen guesses), ``log_z_rts_levels`` (RTS estimates of
        ``log Z_k``), ``ti_means``, ``rbti_means``, ``level_acceptance_rate``,
        ``level_step_size``; ``temperature_transitions`` (``(chain, level, level_to)``
        counts of the final run's ``k → k'`` moves); ``n_init_rounds``, ``init_converged``,
        ``c_hat_deviation`` (``max |r − ĉ|`` of the final run), ``posterior_ess``. The
        per-stage variables (``tau`` …) describe levels 2..K: ``log_z_increment`` is
        ``log Z_k − log Z_{k−1}`` from RTS, ``ess`` the Rao-Blackwellized number of draws at
        the level, ``mcmc_steps`` the particle-sweeps spent there. The posterior holds
        ``draws`` draws per chain resampled from snapshots of the final run weighted by
        ``q(K | θ)``. ``n_logp_evals`` counts the whole chain (``n_logp_evals_init``: its
        warm start and initial rounds).

    Examples
    --------
    >>> import pymc as pm, pymc_crais as pmc
    >>> with pm.Model():
    ...     mu = pm.Normal("mu", 0, 1)
    ...     pm.Normal("y", mu, 1, observed=[0.3, -0.2])
    ...     idata = pmc.sample_rts(draws=200, n_temperatures=20, n_sweeps=100, chains=2,
    ...                            random_seed=1, progressbar=False)
    >>> value, mcse = pmc.log_marginal_likelihood(idata)
    """
    settings = RTSSettings(
        draws=draws,
        n_temperatures=n_temperatures,
        n_sweeps=n_sweeps,
        ladder=ladder,
        alpha=alpha,
        kernel=kernel,
        chains=chains,
        cores=cores,
        random_seed=random_seed,
        progressbar=progressbar,
        return_inferencedata=return_inferencedata,
        idata_kwargs=idata_kwargs,
        compile_kwargs=compile_kwargs,
        model=model,
        init=init,
        init_kwargs=init_kwargs,
        ladder_kwargs=ladder_kwargs,
        level_prior=level_prior,
        warm_start=warm_start,
        n_init_sweeps=n_init_sweeps,
        max_init_rounds=max_init_rounds,
        tol=tol,
        restart_levels=restart_levels,
        init_burn=init_burn,
        n_mcmc_steps=n_mcmc_steps,
        kernel_kwargs=kernel_kwargs,
        n_groups=n_groups,
        scale_shift=scale_shift,
        backend=backend,
        mp_ctx=mp_ctx,
        executor=executor,
        memory_budget=memory_budget,
    )
    return run_rts(settings)


@dataclass(frozen=True)
class RTSSettings(RunArguments):
    """Every argument of :func:`sample_rts`, as given or defaulted there (its signature is
    the one place the defaults are written): built once per call and passed whole to
    :func:`run_rts`."""

    n_temperatures: int
    n_sweeps: int
    ladder: object
    ladder_kwargs: dict | None
    level_prior: object
    warm_start: str | None
    n_init_sweeps: int
    max_init_rounds: int
    tol: float
    restart_levels: str
    init_burn: float
    n_groups: int


def run_rts(st: RTSSettings):
    """:func:`sample_rts`'s checks, set-up, ladder and chains, from its settings."""
    t_start = time.perf_counter()
    make_path(st.alpha, 0.0)
    K = check_int(st.n_temperatures, "n_temperatures", 2, "e.g. n_temperatures=100")
    ladder_arr, ladder_name = parse_schedule(st.ladder, LADDERS, "ladder").ladder(K, st.ladder_kwargs)
    if ladder_name == "array":
        K = ladder_arr.size
    n_sweeps = check_int(st.n_sweeps, "n_sweeps", 1, "e.g. n_sweeps=500")
    n_init_sweeps = check_int(st.n_init_sweeps, "n_init_sweeps", 1, "e.g. n_init_sweeps=50")
    max_init_rounds = check_int(
        st.max_init_rounds, "max_init_rounds", 0, "or 0 to skip the initial loop"
    )
    n_groups = check_int(st.n_groups, "n_groups", 2, "e.g. n_groups=20")
    tol, level_prior = st.tol, st.level_prior
    if (
        isinstance(tol, bool)
        or not isinstance(tol, numbers.Real)
        or not (np.isfinite(tol) and tol > 0)
    ):
        raise ValueError(f"tol must be a positive number, got {tol!r}; the paper uses 0.1")
    if level_prior is not None:
        lp = np.asarray(level_prior, dtype=np.float64)
        if lp.shape != (K,) or not np.all(np.isfinite(lp)) or np.any(lp <= 0):
            raise ValueError(f"level_prior must hold {K} positive numbers (one per temperature)")
    # the core's options, checked (warm_start, restart_levels, init_burn) before compiling
    rts_options = RTSOptions(
        n_sweeps=n_sweeps,
        n_init_sweeps=n_init_sweeps,
        max_init_rounds=max_init_rounds,
        tol=float(tol),
        level_prior=level_prior,
        warm_start=st.warm_start,
        n_mcmc_steps=int(st.n_mcmc_steps),
        n_groups=n_groups,
        restart_levels=st.restart_levels,
        init_burn=float(st.init_burn),
    )
    setup = prepare(RunOptions.from_settings(st, per_level_kernel=True, mode_mixture=False))
    alpha = st.alpha
    attrs = {
        "method": "rts",
        "path": make_path(alpha, 0.0).name,
        "alpha": float(alpha),
        **setup.attrs,
    }
    need_rate = ladder_name == "constant_rate"
    c, total = scale_shift_pilot(setup, alpha, st.scale_shift, attrs, need_rate=need_rate)
    path = make_path(alpha, c)
    if ladder_arr is None:
        ladder_arr = constant_rate_ladder(setup, path, total, K, attrs)
    attrs.update(
        {
            "ladder": ladder_name,
            "n_temperatures": K,
            "n_sweeps": n_sweeps,
            "n_init_sweeps": n_init_sweeps,
            "max_init_rounds": max_init_rounds,
            "tol": float(tol),
            "warm_start": "none" if st.warm_start is None else st.warm_start,
            "restart_levels": st.restart_levels,
            "init_burn": float(st.init_burn),
            "n_groups": min(n_groups, setup.draws),
            "mcse_method": "particle groups (delta method), conditional on the frozen log Z_k",
        }
    )
    tasks = [
        RTSTask(
            i,
            setup.chain_rngs[i],
            setup.density,
            setup.draw,
            setup.draws,
            path,
            ladder_arr,
            fresh_kernel(setup),
            rts_options,
        )
        for i in range(setup.chains)
    ]
    t0 = time.perf_counter()
    progress = ChainProgress(st.progressbar, setup.chains, "RTS")
    with warnings.catch_warnings():  # one warning for all chains, below
        warnings.simplefilter("ignore", RTSInitialLoopWarning)
        outs = run_chains(
            tasks,
            run_rts_chain,
            setup.cores,
            st.mp_ctx,
            progress,
            executor=setup.executor,
            batched=setup.batched,
        )
    not_converged = [o.chain for o in outs if not o.stats["init_converged"]]
    if not_converged:
        warnings.warn(
            f"RTS initial loop of chain(s) {not_converged} hit max_init_rounds={max_init_rounds} "
            f"before max|r_k - c_k| < tol/K; the log Z_k guesses are still off, so temperatures "
            "may mix poorly (sample_stats.init_deviation, c_hat). Increase max_init_rounds or "
            "n_init_sweeps, or use more temperatures.",
            RTSInitialLoopWarning,
            stacklevel=user_stacklevel(),
        )
    attrs["sampling_time"] = time.perf_counter() - t0
    attrs["wall_time"] = time.perf_counter() - t_start
    return finish(setup, outs, attrs, {})
