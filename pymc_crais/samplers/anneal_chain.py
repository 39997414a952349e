"""One chain of an annealing sampler (AIS, CR-AIS's final run, SMC): the task and its run.

A task carries everything the chain needs (density, ``q0`` sampler, path, schedule, kernel,
resampling policy); :func:`run_anneal_chain` draws the initial particles, runs the core's
:func:`~pymc_crais.core.anneal.anneal` and returns a :class:`ChainResult` with equal-weight
posterior draws.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..chain_result import ChainResult
from ..core.anneal import AnnealResult, anneal
from ..core.kernels import MutationKernel
from ..core.resampling import systematic
from ..core.schedules import Schedule
from ..core.weights import normalized_weights
from .pipeline import RunSetup
from .progress import ChainProgress, stage_callback
from .runner import run_chains

__all__ = ["AnnealTask", "chain_result", "run_anneal_chain", "run_anneal_chains"]


@dataclass
class AnnealTask:
    """One chain of an annealing run. The defaults are AIS's (no resampling, kernels tuned
    on uniformly weighted particles); SMC sets the resampling policy and the ``"auto"``
    number of moves."""

    chain: int
    rng: np.random.Generator
    density: object
    draw: object
    draws: int
    path: object
    schedule: Schedule
    kernel: MutationKernel
    n_mcmc_steps: int | str
    max_steps: int
    kernel_params: object = None
    resample: str = "never"
    resample_threshold: float = 0.5
    resampler: str = "systematic"
    max_mcmc_steps: int = 20
    correlation_threshold: float = 0.01
    tune_from_weights: bool = False
    max_correlation: float = 0.1
    waste_free: int = 0


def run_anneal_chain(task: AnnealTask) -> ChainResult:
    """Anneal one chain; plain NumPy output (picklable, small)."""
    rng = task.rng
    result = anneal(
        rng,
        task.density,
        task.draw(rng, task.draws),
        task.path,
        task.schedule,
        task.kernel,
        n_mcmc_steps=task.n_mcmc_steps,
        max_mcmc_steps=task.max_mcmc_steps,
        correlation_threshold=task.correlation_threshold,
        max_correlation=task.max_correlation,
        waste_free=task.waste_free,
        resample=task.resample,
        threshold=task.resample_threshold,
        resampler=task.resampler,
        max_steps=task.max_steps,
        tune_from_weights=task.tune_from_weights,
        kernel_params=task.kernel_params,
        callback=stage_callback(task.chain),
    )
    return chain_result(task.chain, rng, result, task.draws)


def chain_result(chain: int, rng: np.random.Generator, result: AnnealResult, draws: int):
    """A chain's :class:`ChainResult`: equal-weight posterior draws (systematic resampling
    of the final weighted particles, shuffled) and the run's statistics."""
    idx = systematic(rng, normalized_weights(result.log_weights), draws)
    idx = rng.permutation(idx)  # systematic resampling returns sorted ancestors
    return ChainResult(
        chain=chain,
        x=result.state.x[idx],
        log_marginal_likelihood=result.log_marginal_likelihood,
        log_z_variance=result.log_z_variance,
        n_logp_evals=result.n_logp_evals,
        log_weights=result.log_weights,
        hit_max_steps=result.hit_max_steps,
        stages=result.stages,
        stats={
            "log_z_variance_segments": result.log_z_variance_segments,
            "n_resamplings": result.n_resamplings,
            "n_eves": result.n_eves,
            # q0's weights against the target, for pymc_crais.diagnostics (removed there)
            "initial_weight_tail": result.initial_weight_tail,
        },
    )


def run_anneal_chains(
    setup: RunSetup, path, schedule, label: str, run=None, **task_kwargs
) -> tuple[list[ChainResult], float]:
    """One :class:`AnnealTask` per chain (the run's kernel, ``q0`` and generators), run by
    the chain runner with ``run`` (default :func:`run_anneal_chain`); returns the results and the sampling time in seconds.

    ``task_kwargs`` are the task's fields after ``kernel`` (``n_mcmc_steps``, ``max_steps``,
    the resampling policy...).
    """
    tasks = [
        AnnealTask(
            chain=i,
            rng=setup.chain_rngs[i],
            density=setup.density,
            draw=setup.draw,
            draws=setup.draws,
            path=path,
            schedule=schedule,
            kernel=setup.kernel,
            **task_kwargs,
        )
        for i in range(setup.chains)
    ]
    t0 = time.perf_counter()
    progress = ChainProgress(setup.options.progressbar, setup.chains, label)
    run = run_anneal_chain if run is None else run
    outs = run_chains(
        tasks,
        run,
        setup.cores,
        setup.options.mp_ctx,
        progress,
        executor=setup.executor,
        batched=setup.batched,
    )
    return outs, time.perf_counter() - t0
