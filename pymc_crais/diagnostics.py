"""When an evidence estimate cannot be trusted: the run's diagnostics, the warning, the report.

Every sampler run ends in :func:`check_run`, which turns what the annealing loop recorded
(:mod:`pymc_crais.core.tails`) into per-chain diagnostics, stores them with the run
(``sample_stats``) and raises one :class:`~pymc_crais.UnreliableEvidenceWarning` listing
each failed check with what to do. :func:`diagnose` reads them back from a result and
prints a report. The checks and their thresholds (docs/reliability.md,
"Diagnostics"):

``pareto_k``
    Pareto k̂ (``arviz_stats``) of the final importance weights of each chain
    (``pareto_k_final``) and, for runs that resample, of every stage's incremental weights
    (``pareto_k`` per stage, ``pareto_k_max``). Above 0.7 the weights' variance is
    effectively infinite at this N: the MCSE computed from them is meaningless (PSIS).
``genealogy``
    SMC only: ``n_eves``, the number of distinct initial particles the final ones descend
    from, below 50 (or below 2 % of the particles, whichever is smaller). The within-chain
    error is then estimated from a handful of independent families.
``mixing``
    SMC only: the mean over the stages that resampled of ``move_correlation`` (mean over
    coordinates of the correlation of the particles after a stage's moves with their
    positions before) above 0.8, or ``move_correlation_max`` above 0.95 on more than half of
    them: the moves left the resampled copies where they were, so the population is far less
    diverse than N.
    (A bimodal target keeps the correlation near 0.7 through mode membership alone while
    its estimate is right, hence not 0.5.)
``start``
    ``init="laplace"``: the optimizer did not converge, the Hessian at the mode was not
    negative definite (the mode is on a boundary or a ridge), or the start's weights
    against the posterior have k̂ > 0.7 (``pareto_k_initial``). ``init="auto"`` (which
    checks its start before choosing it, and chooses a Student-t with k̂ > 0.7 only when the
    prior's pilot k̂ is larger still) is flagged only for the first two, which happen only
    with an improper prior; the report says what it chose and why.
``modes``
    ``init="auto"``'s mode search (short optimizations from prior draws) found more than
    one separated mode. Local moves cannot carry mass between separated modes, so a mode
    entered with the wrong weight, or missed, biases ``log Z`` by up to the log of its
    share, and no within-run statistic sees it (the 10-d mixture of the validation suite:
    every chain lost the same mode, 0.66 nat, at 17 MCSE). Raised whenever several modes
    were found, also when the estimate is right.
``max_steps``
    ``max_steps`` forced the last step to τ = 1 (``hit_max_steps``).
``refit``
    ``sample_smc`` (its geometric path): importance sampling from a Student-t fitted to the
    run's pooled posterior draws (:mod:`pymc_crais.samplers.engine.posterior_refit`), whose
    weights have Pareto k̂ ≤ 0.7, lies more than 3 combined standard errors plus 0.05 nat
    above the run's ``log Ẑ``: the annealing lost mass (all chains can agree on it). The
    sampler then anneals once more from that Student-t and returns the second run; the
    check is raised only when the second run disagrees too (or, outside the geometric
    path, when the first does).
``chains``
    The chains disagree beyond their errors: the chi-square statistic of their
    ``log Ẑ_c`` against the within-chain variances has a p-value below 0.001, or they span
    more than 2 nats and more than 4 MCSE.
"""

from __future__ import annotations

import warnings

import numpy as np

from .diagnostic_checks import (
    Problem,
    chain_row,
    find_problems,
    laplace_start,
    pooled_khat_of,
    problems_of,
    rows_of,
    start_summary,
    warning_text,
)
from .diagnostic_report import Diagnosis, report_notes, report_table, stored_diagnosis
from .evidence_group import read_evidence
from .result_reader import read_result
from .results import log_marginal_likelihood
from .tail_stats import (
    KHAT_THRESHOLD,
    chain_agreement,
    heavy_tail_factor,
    pareto_khat,
    pareto_khat_from_tail,
    pooled_pareto_khat,
)
from .warnings import UnreliableEvidenceWarning, user_stacklevel

__all__ = [
    "KHAT_THRESHOLD",
    "Diagnosis",
    "Problem",
    "chain_agreement",
    "check_run",
    "diagnose",
    "heavy_tail_factor",
    "pareto_khat",
    "pareto_khat_from_tail",
    "pooled_pareto_khat",
    "run_problems",
]


def check_chains(chains: list, attrs: dict) -> list:
    """:func:`check_run` on typed chain results: returns new :class:`ChainResult` objects
    whose ``stages`` carry ``pareto_k`` (and no recorded tails) and whose ``stats`` carry the
    per-chain diagnostics; ``attrs`` gets ``pareto_k_pooled`` and ``diagnostics_flags``."""
    from dataclasses import replace

    dicts = [c.as_dict() for c in chains]
    check_run(dicts, attrs, stacklevel=None)
    out = []
    for c, d in zip(chains, dicts, strict=True):
        stages = {k: v for k, v in c.stages.items() if k != "weight_tail"}
        if "pareto_k" in d:
            stages["pareto_k"] = d["pareto_k"]
        stats = {k: v for k, v in c.stats.items() if k != "initial_weight_tail"}
        for key in ("pareto_k_final", "pareto_k_max", "pareto_k_initial", "move_correlation_mean"):
            if key in d:
                stats[key] = d[key]
        out.append(replace(c, stages=stages, stats=stats))
    return out


def run_problems(chains: list, attrs: dict) -> list[str]:
    """The checks a run's typed chain results fail (:func:`check_run`'s, on copies: nothing
    is stored and nothing is warned), e.g. for deciding whether to replace the run."""
    a = dict(attrs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreliableEvidenceWarning)
        diagnosis = check_run([c.as_dict() for c in chains], a, stacklevel=1)
    return sorted({p.check for p in diagnosis.problems})


def check_run(chain_stats: list[dict], attrs: dict, *, stacklevel: int | None = None) -> Diagnosis:
    """Compute the diagnostics of a finished run, store them, and warn if it is unreliable.

    Called by every sampler on its per-chain output before the results are built. Replaces
    the recorded weight tails (``weight_tail``, ``initial_weight_tail``) by k̂ values:
    per stage ``pareto_k`` and per chain ``pareto_k_max``, ``pareto_k_final``,
    ``pareto_k_initial``, ``move_correlation_mean``; records ``diagnostics_flags`` in
    ``attrs``.

    Parameters
    ----------
    chain_stats : list of dict
        Per-chain statistics (modified in place).
    attrs : dict
        Run attributes (modified in place).
    stacklevel : int, optional
        Of the warning; by default the first frame outside the package (the user's call).

    Returns
    -------
    Diagnosis
    """

    for cs in chain_stats:
        n = int(np.asarray(cs["log_weights"]).size)
        tails = cs.pop("weight_tail", None)
        init_tail = cs.pop("initial_weight_tail", None)
        resampled = int(cs.get("n_resamplings", 0)) > 0
        if tails is not None and resampled:
            cs["pareto_k"] = np.array([pareto_khat_from_tail(t, n) for t in np.atleast_2d(tails)])
        elif "tau" in cs:
            cs["pareto_k"] = np.full(np.asarray(cs["tau"]).size, np.nan)
        # a start drawn in families (copies sharing a hyperparameter draw): one weight each
        fam_k = cs.get("pareto_k_families", np.nan)
        final = float(fam_k) if np.isfinite(fam_k) else pareto_khat(cs["log_weights"])
        cs["pareto_k_final"] = final
        if init_tail is not None and laplace_start(attrs):
            cs["pareto_k_initial"] = pareto_khat_from_tail(init_tail, n)
        row = chain_row(cs)
        cs["pareto_k_max"] = row["pareto_k_max"]
        cs["move_correlation_mean"] = row["move_correlation_mean"]
    rows = [chain_row(cs) for cs in chain_stats]
    attrs["pareto_k_pooled"] = pooled_pareto_khat(
        [cs["log_weights"] for cs in chain_stats],
        [cs["log_marginal_likelihood"] for cs in chain_stats],
        [cs.get("family_copies") for cs in chain_stats],
    )
    problems = find_problems(rows, attrs)
    attrs["diagnostics_flags"] = ",".join(sorted({p.check for p in problems}))
    table = report_table(rows)
    diagnosis = Diagnosis(
        table,
        problems,
        str(attrs.get("method", "")),
        pareto_k_pooled=attrs["pareto_k_pooled"],
        start=start_summary(attrs),
    )
    if problems:
        level = user_stacklevel() if stacklevel is None else stacklevel
        warnings.warn(warning_text(problems), UnreliableEvidenceWarning, stacklevel=level)
    return diagnosis


def diagnose(idata, *, verbose: bool = False) -> Diagnosis:
    """The diagnostics report of a pymc_crais result.

    Parameters
    ----------
    idata : xarray.DataTree or SamplerResult
        Output of any pymc_crais sampler.
    verbose : bool, default False
        Print the report.

    Returns
    -------
    Diagnosis
        ``print(diagnosis)`` gives the report; ``diagnosis.table`` has one row per chain,
        ``diagnosis.problems`` the failed checks (each with what to do), ``diagnosis.ok``.

    Examples
    --------
    >>> report = pmc.diagnose(idata)  # doctest: +SKIP
    >>> print(report)  # doctest: +SKIP
    """
    if idata is None or not (hasattr(idata, "chain_stats") or hasattr(idata, "children")):
        raise TypeError(
            f"idata must be a result (an xarray.DataTree from a pymc_crais sampler or "
            f"pm.sample_smc, or a SamplerResult), got {type(idata).__name__}"
        )
    stored = read_evidence(idata)
    if stored is not None:  # pmc.bridge_sampling: its own checks, stored with the estimate
        diag = stored_diagnosis(stored)
        if verbose:
            print(diag)
        return diag
    view = read_result(idata)
    rows = rows_of(view)
    attrs = dict(view.attrs)
    attrs["pareto_k_pooled"] = pooled_khat_of(view)
    problems = problems_of(view, rows)
    table = report_table(rows)
    diag = Diagnosis(
        table,
        problems,
        view.method,
        start=start_summary(attrs),
        notes=report_notes(table, rows, view.source),
        source=view.source,
    )
    diag.pareto_k_pooled = float(attrs["pareto_k_pooled"])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnreliableEvidenceWarning)
            diag.log_z, diag.mcse = log_marginal_likelihood(idata)
    except (ValueError, TypeError, KeyError):
        pass
    if verbose:
        print(diag)
    return diag
