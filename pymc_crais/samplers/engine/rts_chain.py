"""One chain of tempered sampling (RTS): the task and its run, as a ``ChainResult``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...chain_result import ChainResult
from ...core.resampling import systematic
from ...core.rts import RTSOptions, rts
from ...core.weights import ess_from_log_weights, normalized_weights
from .progress import stage_callback

__all__ = ["LEVEL_VARS", "RTSTask", "run_rts_chain"]


@dataclass
class RTSTask:
    """One chain of tempered sampling: ``draws`` particles over the ``ladder``."""

    chain: int
    rng: np.random.Generator
    density: object
    draw: object
    draws: int
    path: object
    ladder: np.ndarray
    kernel: object
    options: RTSOptions


def run_rts_chain(task: RTSTask) -> ChainResult:
    """One chain: ``draws`` tempering particles as one batch; plain NumPy output."""
    rng = task.rng
    report = stage_callback(task.chain)
    opts = task.options
    total = opts.max_init_rounds * opts.n_init_sweeps + opts.n_sweeps
    callback = None
    if report is not None:
        # the display shows progress as a fraction in the "tau" slot (initial rounds, then
        # the final run); it is not a temperature
        def callback(phase, i, info):
            done = (
                (i + 1) * opts.n_init_sweeps
                if phase == "init"
                else (opts.max_init_rounds * opts.n_init_sweeps + i + 1)
            )
            report(i, min(done / total, 1.0), float("nan"), float("nan"))

    res = rts(
        rng,
        task.density.for_chain(),
        task.draw(rng, task.draws),
        task.path,
        task.ladder,
        task.kernel,
        opts,
        callback=callback,
    )
    # posterior draws: the pooled snapshots of the final run, weighted by q(K | θ), resampled
    w = normalized_weights(res.posterior_log_weights)
    idx = rng.permutation(systematic(rng, w, task.draws))
    K = res.ladder.size
    n = task.draws
    level = (
        res.ladder,
        np.exp(res.log_prior),
        res.c_hat,
        res.c_hat_mcse,
        res.log_z_levels,
        res.log_z_rts_levels,
        res.ti_means,
        res.rbti_means,
        res.acceptance_rate,
        res.step_size,
    )
    return ChainResult(
        chain=task.chain,
        x=res.posterior_x[idx],
        log_marginal_likelihood=res.log_marginal_likelihood,
        log_z_variance=res.log_z_variance,
        n_logp_evals=res.n_logp_evals,
        log_weights=res.posterior_log_weights[-n:],
        hit_max_steps=False,  # RTS has no cap on stages; its rounds: init_converged
        # per-stage arrays on the ladder's levels 2..K (stage s is the step τ_s -> τ_{s+1})
        stages={
            "tau": res.ladder[1:],
            "ess": res.ess[1:],
            "acceptance_rate": res.acceptance_rate[1:],
            "log_z_increment": np.diff(res.log_z_rts_levels),
            "mcmc_steps": res.extras["level_visits"][1:].astype(np.float64),
            "resampled": np.zeros(K - 1, dtype=bool),
        },
        stats={
            "n_logp_evals_init": res.n_logp_evals_init,
            "log_marginal_likelihood_ti": res.log_z_ti,
            "log_marginal_likelihood_ti_mcse": float(np.sqrt(res.log_z_ti_variance)),
            "log_marginal_likelihood_rbti": res.log_z_rbti,
            "log_marginal_likelihood_rbti_mcse": float(np.sqrt(res.log_z_rbti_variance)),
            "n_init_rounds": res.n_init_rounds,
            "init_converged": bool(res.init_converged),
            "init_deviation": (
                float(res.init_deviation[-1]) if res.init_deviation.size else float("nan")
            ),
            "c_hat_deviation": float(np.max(np.abs(np.exp(res.log_prior) - res.c_hat))),
            "posterior_ess": ess_from_log_weights(res.posterior_log_weights),
        },
        arrays={
            **{key: (("level",), value) for key, value in zip(LEVEL_VARS, level, strict=True)},
            "temperature_transitions": (("level", "level_to"), res.transitions),
        },
    )


LEVEL_VARS = (
    "ladder",
    "level_prior",
    "c_hat",
    "c_hat_mcse",
    "log_z_levels",
    "log_z_rts_levels",
    "ti_means",
    "rbti_means",
    "level_acceptance_rate",
    "level_step_size",
)
"""Per-level results of each chain (``(chain, level)`` variables)."""
