"""One chain of learned unadjusted annealing (MCD, ULA, UHA): the task and its run.

A task carries what the chain needs (the shared density and Hessian-vector products, the
standardizing shift and scale of the Laplace fit, the training settings and its generator);
:func:`run_mcd_chain` trains the sampler's parameters, estimates ``log Z`` from fresh
trajectories and returns a :class:`ChainResult`, so that the chain runner runs MCD's
chains as it runs the others (in this process or in worker processes, the same bits).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...chain_result import STAGE_KEYS, ChainResult
from ...core.learned.mcd import ResidualScore, estimate, train
from ...core.learned.ula import (
    DensityTarget,
    betas_from_params,
    init_params,
    log_z_estimate,
    step_sizes_from_params,
)
from ...core.resampling import systematic
from ...core.weights import normalized_weights
from .progress import stage_callback

__all__ = ["MCDTask", "run_mcd_chain"]


@dataclass
class MCDTask:
    """One chain of :func:`pymc_crais.sample_mcd` (its arguments, checked there)."""

    chain: int
    rng: np.random.Generator
    density: object
    hvp: object  # (x, v) -> H v, or None (central differences of the gradient)
    shift: np.ndarray
    scale: np.ndarray
    draws: int
    method: str
    n_steps: int
    train_steps: int
    batch: int
    learn: tuple
    lr: float
    net_lr: float
    step_size: float
    max_step_size: float
    hidden: int
    n_blocks: int
    extra_evals: int = 0  # evaluations spent before the chains (the Laplace fit), on chain 0


def run_mcd_chain(task: MCDTask) -> ChainResult:
    """Train, then estimate; plain NumPy output (picklable, small)."""
    rng, dim, n_steps = task.rng, task.shift.size, task.n_steps
    density = task.density.for_chain()
    target = DensityTarget(
        dim, density=density, hvp_fn=task.hvp, shift=task.shift, scale=task.scale
    )
    params = init_params(dim, n_steps, step_size=task.step_size, max_step_size=task.max_step_size)
    score = (
        ResidualScore(dim, n_steps, hidden=task.hidden, n_blocks=task.n_blocks)
        if task.method == "mcd"
        else None
    )
    report = stage_callback(task.chain)
    callback = None
    if report is not None:
        # the display's "tau" slot shows the fraction of the training done
        def callback(it, elbo):
            report(it + 1, (it + 1) / max(task.train_steps, 1), float("nan"), float("nan"))

    before = density.n_evals
    res = train(
        target,
        params,
        rng,
        method=task.method,
        train_steps=task.train_steps,
        batch=task.batch,
        learn=tuple(task.learn),
        lr=task.lr,
        net_lr=task.net_lr,
        score=score,
        callback=callback,
    )
    n_train = density.n_evals - before + 2 * (target.n_hvp if task.hvp is not None else 0)
    before = density.n_evals
    lw, y = estimate(target, res, rng, task.draws, method=task.method, score=score, return_x=True)
    n_est = density.n_evals - before
    log_z, mcse = log_z_estimate(lw)
    idx = rng.permutation(systematic(rng, normalized_weights(lw), task.draws))
    stats = {
        "n_logp_evals_training": int(n_train),
        "elbo": float(np.mean(lw[np.isfinite(lw)])) if np.isfinite(lw).any() else -np.inf,
    }
    if task.method == "uha":
        stats["eta"] = 0.98 / (1.0 + np.exp(-float(res.params["eta_logit"]))) + 0.01
    stages = {k: np.full(n_steps, np.nan) for k in STAGE_KEYS}
    stages.update(
        tau=betas_from_params(res.params)[1:],
        mcmc_steps=np.ones(n_steps),
        resampled=np.zeros(n_steps, dtype=bool),
    )
    return ChainResult(
        chain=task.chain,
        x=target.to_model(y[idx]),
        log_marginal_likelihood=log_z,
        log_z_variance=mcse**2,
        n_logp_evals=int(n_train + n_est + task.extra_evals),
        log_weights=lw,
        hit_max_steps=False,
        stages=stages,
        stats=stats,
        arrays={
            "step_size": (("stage",), step_sizes_from_params(res.params)),
            "training_elbo": (("train_iteration",), np.asarray(res.elbo)),
            "training_log_z": (("train_iteration",), np.asarray(res.log_z)),
            "q0_mean": (("unconstrained_dim",), task.shift + task.scale * res.params["mu"]),
            "q0_sd": (("unconstrained_dim",), task.scale * np.exp(res.params["log_sigma"])),
        },
    )
