"""The posterior refit check of an annealing run, and the restart it calls for.

After the chains, a Student-t fitted to their pooled posterior draws (mean and covariance,
scale × :data:`~pymc_crais.samplers.engine.init_auto.SCALE`, df
:data:`~pymc_crais.samplers.engine.init_auto.DF`) gives an importance-sampling estimate of
``log Z`` from as many draws as the chains have final particles, at least
:data:`REFIT_DRAWS` (:mod:`pymc_crais.core.refit`), that shares nothing
with the annealing path. The run *disagrees* with it when

* the importance weights have Pareto k̂ ≤ 0.7 (so the estimate and its error are
  trustworthy; its variance is inflated by
  :func:`~pymc_crais.tail_stats.heavy_tail_factor`), and
* the importance estimate lies above the run's by more than :data:`~pymc_crais.core.refit.REFIT_SIGMA`
  combined standard errors plus :data:`~pymc_crais.core.refit.REFIT_FLOOR` nats.

One-sided on purpose. Both estimates are unbiased for ``Z``, and an importance estimate far
*above* the truth is rare (by Markov's inequality it exceeds ``c·Z`` with probability at
most ``1/c``, whatever the tail), while one far *below* is the proposal's own failure (a
mode the fit straddles or misses) and says nothing against the run. A run far below a
light-tailed importance estimate lost mass on its way: its start sat where the posterior
has little mass (a Laplace start at a centred funnel's neck, ``applied_bugs_oneway``) and
the annealing never carried the population's weight to the bulk, although the moves did
carry particles there (which is why the refit finds the bulk).

``sample_smc`` then anneals again from that Student-t, with fresh generators, and returns
the second run, checked the same way. It does the same when the run is only *imprecise*
(:func:`wants_precision`): the error ``log_marginal_likelihood`` would report, pooled
with the importance estimate where that is allowed, is above :data:`PRECISION_TARGET`
nats, the Student-t is a usable start (k̂ ≤ 0.7) and the run failed none of its checks
(:func:`pymc_crais.diagnostics.run_problems`; a second run from a start that close would no
longer show them). From a start that close to the posterior the second run needs a few
stages (on the applied tier 3–4 against 12–18, about a twentieth of the first run's
evaluations) and its error is about half. In either case the second run's ``log Ẑ`` does
not depend on the first run's randomness except through the start, which is a normalized
density, so it is valid. The returned estimate as a whole is a choice between the two
made on the first run's estimated error, and runs that lost mass also tend to
under-estimate their error, so a first run is kept a little more often when it is low; the
coverage records (docs/reliability.md) measure the result, not each branch. If the
second run disagrees too, :func:`pymc_crais.diagnostics.check_run` flags it (``refit``).
Where the two agree and the weights' k̂ is at most
:data:`~pymc_crais.core.refit.POOL_KHAT`, :func:`pymc_crais.log_marginal_likelihood` pools
them (:func:`~pymc_crais.core.refit.pool_with_refit`) from the attributes recorded here.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import numpy as np

from ...core.estimators import combine_chain_estimates
from ...core.initial import InitialReweightedDensity
from ...core.refit import (
    REFIT_FLOOR,
    REFIT_SIGMA,
    importance_estimate,
    pool_with_refit,
    student_t_from_draws,
)
from ...diagnostics import run_problems
from ...tail_stats import (
    KHAT_THRESHOLD,
    heavy_tail_factor,
    pareto_khat,
    pooled_pareto_khat,
)
from .init_auto import DF, SCALE, khat

__all__ = [
    "PRECISION_TARGET",
    "REFIT_DRAWS",
    "REFIT_FLOOR",
    "REFIT_SIGMA",
    "RefitCheck",
    "checked_chains",
    "refit_check",
    "restart_setup",
    "wants_precision",
]

PRECISION_TARGET = 0.05
"""Nats: above this reported error of ``log Ẑ`` a run whose refit Student-t is a usable
start is run again from it (:func:`wants_precision`): the precision a Bayes factor between
close models needs."""

REFIT_DRAWS = 2000
"""Fewest draws of the fitted Student-t (model evaluations of the check); a run with more
final particles over its chains draws that many (one evaluation a particle: 8,000 for
``sample_smc``'s 4 chains of 2,000), so that its estimate weighs in the pooled ``log Z``
(:func:`~pymc_crais.core.refit.pool_with_refit`)."""


@dataclass(frozen=True)
class RefitCheck:
    """The check of one run: the importance estimate (``log_z``, ``mcse``, ``pareto_k``),
    the run's combined ``run_log_z`` and ``run_mcse``, the gap in combined standard
    errors (``gap_sigma``, positive when the importance estimate is higher), whether the
    run ``disagrees``, the fitted ``proposal`` and the model evaluations ``n_evals``."""

    log_z: float
    mcse: float
    pareto_k: float
    run_log_z: float
    run_mcse: float
    gap_sigma: float
    disagrees: bool
    proposal: object
    n_evals: int
    reported_mcse: float = float("nan")
    """The error :func:`pymc_crais.log_marginal_likelihood` reports for the run: the chains'
    (each chain's variance times the factor of the pooled k̂), pooled with this estimate
    where :func:`~pymc_crais.core.refit.pool_with_refit` allows."""

    def attrs(self, prefix: str = "refit") -> dict:
        """The run attributes that record the check."""
        return {
            f"{prefix}_log_z": self.log_z,
            f"{prefix}_mcse": self.mcse,
            f"{prefix}_pareto_k": self.pareto_k,
            f"{prefix}_run_log_z": self.run_log_z,
            f"{prefix}_gap_sigma": self.gap_sigma,
            f"{prefix}_disagrees": bool(self.disagrees),
        }


def refit_check(setup, chains, rng: np.random.Generator) -> RefitCheck | None:
    """Check a run's chains against importance sampling from a Student-t fitted to their
    draws (see the module); ``None`` when there is nothing to fit or compare (discrete
    variables, a degenerate or non-finite population, a chain without a finite ``log Ẑ``)."""
    lz = np.array([c.log_marginal_likelihood for c in chains], dtype=np.float64)
    if setup.layout.has_discrete or not np.all(np.isfinite(lz)):
        return None
    draws = np.concatenate([c.x for c in chains])
    proposal = student_t_from_draws(draws, scale=SCALE, df=DF)
    if proposal is None:
        return None
    base = setup.model_density
    grad = bool(getattr(base, "has_gradient", False)) and not getattr(
        base, "value_function_compiled", True
    )
    n = max(REFIT_DRAWS, draws.shape[0])
    est = importance_estimate(base, proposal, rng, n, gradient=grad)
    k = khat(est.log_weights)
    v = np.array([c.log_z_variance for c in chains], dtype=np.float64)
    f = heavy_tail_factor([pareto_khat(c.log_weights) for c in chains])
    run_lz, run_mcse, _ = combine_chain_estimates(lz, v, f)
    run_var = run_mcse**2 if np.isfinite(run_mcse) else 0.0
    sd = float(np.sqrt(heavy_tail_factor(min(k, KHAT_THRESHOLD)) * est.mcse**2 + run_var))
    gap = est.log_z - run_lz
    gap_sigma = float(gap / sd) if sd > 0 else float(np.sign(gap) * np.inf)
    disagrees = bool(
        k <= KHAT_THRESHOLD and np.isfinite(est.log_z) and gap > REFIT_SIGMA * sd + REFIT_FLOOR
    )
    # the error log_marginal_likelihood will report (chains' variances times the pooled
    # k̂'s factor, then pooled with the importance estimate where allowed)
    copies = [getattr(c, "stats", {}).get("family_copies") for c in chains]
    fp = float(heavy_tail_factor(pooled_pareto_khat([c.log_weights for c in chains], lz, copies)))
    chains_lz, chains_mcse, _ = combine_chain_estimates(lz, v, np.full(lz.size, fp))
    pooled = pool_with_refit(chains_lz, chains_mcse, est.log_z, est.mcse, k, float(heavy_tail_factor(k)))
    reported = chains_mcse if pooled is None else pooled[1]
    return RefitCheck(
        est.log_z, est.mcse, k, float(run_lz), float(run_mcse), gap_sigma, disagrees,
        proposal, est.n_evals, float(reported),
    )  # fmt: skip


def wants_precision(check: RefitCheck, problems) -> bool:
    """Whether a run that agrees with its refit check is run again from the fitted
    Student-t for precision: its reported error is above :data:`PRECISION_TARGET`, the
    Student-t's weights have k̂ ≤ 0.7 (a start close to the posterior), and the run failed
    none of its checks (``problems``: the names :func:`pymc_crais.diagnostics.run_problems`
    gives, or a callable returning them, called only when the rest holds): a second run from a start that close would no longer show them. Among them the
    ``precision`` check (the chains' own error above
    :data:`~pymc_crais.diagnostic_checks.MAX_MCSE`: a region the moves reach too rarely,
    which a start fitted to those moves' particles would miss too), the chains' agreement
    and the step cap."""
    if check.disagrees or not check.pareto_k <= KHAT_THRESHOLD:
        return False
    if not (np.isfinite(check.reported_mcse) and check.reported_mcse > PRECISION_TARGET):
        return False
    return not list(problems() if callable(problems) else problems)


def restart_setup(setup, proposal, chain_rngs):
    """``setup`` with ``proposal`` as its start and ``chain_rngs`` as the chains' generators."""
    new = copy.copy(setup)  # a RunSetup (or any object with its fields)
    new.density = InitialReweightedDensity(
        setup.layout.dim, base=setup.model_density, initial=proposal
    )
    new.draw, new.chain_rngs = proposal.draw, list(chain_rngs)
    return new


def checked_chains(setup, chains: list, attrs: dict, rerun=None) -> list:
    """Run the refit check on a run's ``chains`` and record it in ``attrs``; when the run
    disagrees, or is imprecise and passed its checks (:func:`wants_precision`), and
    ``rerun`` is given (``setup -> (chains, seconds)``), anneal again from the fitted
    Student-t and return the second run's chains (checked too) instead
    (``refit_restart_reason``: ``"disagrees"`` or ``"precision"``).

    The check's generator and the second run's are children of the run-level generator
    spawned here, after every other use of it, so the first run is the same bits as without
    the check, whatever ``cores`` is. ``refit_seconds`` records the time spent in the checks
    (the second run's is in ``sampling_time``).
    """
    t0 = time.perf_counter()
    kids = setup.aux_rng.spawn(2 + setup.chains)
    check = refit_check(setup, chains, kids[0])
    attrs["refit_seconds"] = time.perf_counter() - t0
    if check is None:
        attrs["refit_checked"] = False
        return chains
    attrs.update(refit_checked=True, refit_restarted=False, n_logp_evals_refit=check.n_evals)
    attrs.update(check.attrs(), refit_restart_reason="")
    if rerun is None:
        return chains
    if check.disagrees:
        reason = "disagrees"
    elif wants_precision(check, lambda: run_problems(chains, attrs)):
        reason = "precision"
    else:
        return chains
    first_evals = int(sum(c.n_logp_evals for c in chains))
    second, seconds = rerun(restart_setup(setup, check.proposal, kids[2:]))
    attrs.update(check.attrs("refit_first"))
    attrs.update(
        refit_restarted=True,
        refit_restart_reason=reason,
        refit_first_mcse_run=check.run_mcse,
        refit_first_mcse_reported=check.reported_mcse,
        sampling_time=float(attrs.get("sampling_time", 0.0)) + seconds,
    )
    t0 = time.perf_counter()
    again = refit_check(setup, second, kids[1])
    attrs["refit_seconds"] += time.perf_counter() - t0
    n = check.n_evals + first_evals
    if again is not None:
        attrs.update(again.attrs())
        n += again.n_evals
    else:  # the second run's draws gave nothing to fit: no check of it
        attrs.update({k: np.nan for k in check.attrs()}, refit_disagrees=False)
    attrs["n_logp_evals_refit"] = n
    return second
