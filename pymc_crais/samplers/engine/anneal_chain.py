"""One chain of an annealing sampler (AIS, CR-AIS's final run, SMC): the task and its run.

A task carries everything the chain needs (density, ``q0`` sampler, path, schedule, kernel,
resampling policy); :func:`run_anneal_chain` draws the initial particles, runs the core's
:func:`~pymc_crais.core.anneal.anneal` and returns a :class:`ChainResult` with equal-weight
posterior draws.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import dataclass, field

import numpy as np

from ...chain_result import ChainResult
from ...core.anneal import AnnealOptions, AnnealResult, StageView, anneal_stages, drive_stages
from ...core.families import family_log_weights
from ...core.kernels import MutationKernel
from ...core.resampling import systematic
from ...core.schedules import Schedule
from ...core.weights import normalized_weights
from ...tail_stats import pareto_khat
from .pipeline import RunSetup, finish
from .posterior_refit import checked_chains
from .progress import ChainProgress, stage_callback
from .runner import run_chains
from .staged import costly

__all__ = ["AnnealPlan", "AnnealTask", "chain_result", "iter_anneal_chain", "run_anneal_chain"]
__all__ += ["run_anneal_chains"]


@dataclass
class AnnealTask:
    """One chain of an annealing run: what it anneals (density, ``q0`` sampler, path,
    schedule, kernel) and how, as one :class:`~pymc_crais.core.anneal.AnnealOptions`
    (moves per stage, resampling policy, the cap on stages, replayed kernel parameters,
    waste-free chains). The default options are AIS's (no resampling, one transition per
    stage, kernels tuned on uniformly weighted particles)."""

    chain: int
    rng: np.random.Generator
    density: object
    draw: object
    draws: int
    path: object
    schedule: Schedule
    kernel: MutationKernel
    options: AnnealOptions = field(default_factory=AnnealOptions)


def run_anneal_chain(task: AnnealTask) -> ChainResult:
    """Anneal one chain; plain NumPy output (picklable, small)."""
    return drive_stages(iter_anneal_chain(task), stage_callback(task.chain))


def iter_anneal_chain(task: AnnealTask) -> Generator[StageView, None, ChainResult]:
    """:func:`run_anneal_chain` one stage at a time: yields each stage's
    :class:`~pymc_crais.core.anneal.StageView` and returns the :class:`ChainResult`
    (the same bits as :func:`run_anneal_chain`)."""
    rng = task.rng
    density = task.density.for_chain()
    if getattr(task.draw, "needs_density", False):  # a start that evaluates the model to draw
        x0 = task.draw(rng, task.draws, density)
    else:
        x0 = task.draw(rng, task.draws)
    result = yield from anneal_stages(
        rng, density, x0, task.path, task.schedule, task.kernel, task.options
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
            **_family_stats(result),
        },
    )


def _family_stats(result: AnnealResult) -> dict:
    """``pareto_k_families``, the Pareto k̂ of one weight per family, for a run whose start
    drew its particles in families (the conditional-Laplace start) and did not resample;
    the diagnostics take it as the chain's final k̂. ``family_copies``, the family size,
    where the families are consecutive rows of the final weights in equal blocks (what the
    start draws, and the moves at τ = 1 keep): the pooled k̂ of the chains is then taken
    over family weights too (:func:`pymc_crais.tail_stats.pooled_pareto_khat`). Empty
    without families."""
    eve = result.eve
    if eve is None or result.n_resamplings or np.unique(eve).size == eve.size:
        return {}
    family = np.unique(eve, return_inverse=True)[1]
    out = {"pareto_k_families": float(pareto_khat(family_log_weights(result.log_weights, family)))}
    c = eve.size // (int(family.max()) + 1)
    if np.array_equal(family, np.repeat(np.arange(eve.size // c), c)):
        out["family_copies"] = int(c)
    return out


@dataclass
class AnnealPlan:
    """An annealing run whose run-level work is done (set-up, pilots, tuning run): what is
    left is one :class:`AnnealTask` per chain and the output.

    ``sample_smc`` and ``sample_crais`` build one and :meth:`run` it; the ``pm.sample_smc``
    kernels (:mod:`pymc_crais.samplers.smc_kernels`) build one and run each chain's
    :meth:`task` under PyMC's driver, so both doors start, move and stop alike.
    """

    setup: RunSetup
    path: object
    schedule: Schedule
    label: str
    options: AnnealOptions
    attrs: dict
    extra: dict
    t_start: float
    refit: str = "off"
    """``"off"``, ``"check"`` (the posterior refit check, recorded and flagged) or
    ``"restart"`` (the check, and a second run from the fitted start when the first
    disagrees): :mod:`pymc_crais.samplers.engine.posterior_refit`."""

    def task(self, chain: int, rng: np.random.Generator) -> AnnealTask:
        """The task of chain ``chain`` with generator ``rng``."""
        return AnnealTask(
            chain=chain,
            rng=rng,
            density=self.setup.density,
            draw=self.setup.draw,
            draws=self.setup.draws,
            path=self.path,
            schedule=self.schedule,
            kernel=self.setup.kernel,
            options=self.options,
        )

    def run(self):
        """Run every chain (the chain runner) and build the output (``finish``)."""
        outs, self.attrs["sampling_time"] = run_anneal_chains(
            self.setup, self.path, self.schedule, self.label, self.options
        )
        if self.refit != "off":
            rerun = self._rerun if self.refit == "restart" else None
            outs = checked_chains(self.setup, outs, self.attrs, rerun)
        self.attrs["wall_time"] = time.perf_counter() - self.t_start
        return finish(self.setup, outs, self.attrs, self.extra)

    def _rerun(self, setup: RunSetup):
        if costly(setup.model_density.numpy_cost, setup.draws):  # as long as the first run
            setup.model_density.spend_setup_budget(setup.kernel.needs_gradient)
        return run_anneal_chains(setup, self.path, self.schedule, self.label, self.options)


def run_anneal_chains(
    setup: RunSetup, path, schedule, label: str, options: AnnealOptions, run=None
) -> tuple[list[ChainResult], float]:
    """One :class:`AnnealTask` per chain (the run's kernel, ``q0`` and generators, and
    ``options``), run by the chain runner with ``run`` (default :func:`run_anneal_chain`);
    returns the results and the sampling time in seconds."""
    plan = AnnealPlan(setup, path, schedule, label, options, {}, {}, 0.0)
    tasks = [plan.task(i, setup.chain_rngs[i]) for i in range(setup.chains)]
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
