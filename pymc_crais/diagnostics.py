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
    SMC only: the mean over stages of ``move_correlation`` (mean over coordinates of the
    correlation of the particles after a stage's moves with their positions before) above
    0.8, or ``move_correlation_max`` above 0.95 on more than half the stages: the moves left
    the resampled copies where they were, so the population is far less diverse than N.
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
``chains``
    The chains disagree beyond their errors: the chi-square statistic of their
    ``log Ẑ_c`` against the within-chain variances has a p-value below 0.001, or they span
    more than 2 nats and more than 4 MCSE.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from .diagnostic_checks import (
    COLUMNS,
    Problem,
    chain_row,
    find_problems,
    laplace_start,
    start_summary,
)
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
]


@dataclass
class Diagnosis:
    """The diagnostics of one run: ``table`` (one row per chain), ``problems`` (failed
    checks) and ``ok`` (no problem). ``print(diagnosis)`` gives the report."""

    table: object
    problems: list = field(default_factory=list)
    method: str = ""
    log_z: float = float("nan")
    mcse: float = float("nan")
    pareto_k_pooled: float = float("nan")
    start: str = ""
    notes: list = field(default_factory=list)
    source: str = "pymc_crais"

    @property
    def ok(self) -> bool:
        """Whether every check passed."""
        return not self.problems

    @property
    def flags(self) -> list[str]:
        """Names of the failed checks."""
        return sorted({p.check for p in self.problems})

    def __str__(self) -> str:
        import pandas as pd

        lines = [f"pymc_crais diagnostics ({self.method or 'run'})"]
        if np.isfinite(self.log_z):
            err = f"± {self.mcse:.3g} (MCSE)" if np.isfinite(self.mcse) else "(no MCSE claimed)"
            lines.append(f"log Z = {self.log_z:.4f} {err}")
        if not np.isnan(self.pareto_k_pooled):
            lines.append(f"Pareto k̂ of the pooled final weights: {self.pareto_k_pooled:.2f}")
        if self.start:
            lines.append(self.start)
        with pd.option_context("display.width", 120, "display.max_columns", 20):
            lines.append(self.table.to_string(float_format=lambda v: f"{v:.5g}", na_rep="-"))
        lines.append("columns:")
        lines.extend(
            f"  {c}: {COLUMN_MEANINGS[c]}" for c in self.table.columns if c in COLUMN_MEANINGS
        )
        lines.extend(f"note: {n}" for n in self.notes)
        if self.ok:
            lines.append("All checks passed: no sign that log Z or its error bar is unreliable.")
        else:
            lines.append("UNRELIABLE: " + ", ".join(self.flags))
            lines.extend(f"- {p}" for p in self.problems)
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle):  # IPython
        p.text(str(self))


COLUMN_LABELS = {
    "log_marginal_likelihood": "log_z",
    "log_marginal_likelihood_mcse": "mcse",
    "pareto_k_final": "khat_final_weights",
    "pareto_k_max": "khat_worst_stage",
    "pareto_k_initial": "khat_start",
    "n_eves": "surviving_ancestors",
    "move_correlation_mean": "move_correlation",
    "hit_max_steps": "hit_max_steps",
}
"""The report's column for each per-chain diagnostic (the ``sample_stats`` name on the left)."""

COLUMN_MEANINGS = {
    "log_z": "the chain's log Z estimate",
    "mcse": "its within-chain Monte Carlo standard error",
    "khat_final_weights": "Pareto k-hat of the final importance weights (> 0.7: heavy tail)",
    "khat_worst_stage": "largest k-hat of a resampling stage's incremental weights",
    "khat_start": "k-hat of the Laplace start's weights against the posterior",
    "surviving_ancestors": "initial particles the final ones descend from (SMC genealogy)",
    "move_correlation": "mean correlation of the particles before and after each stage's moves",
    "hit_max_steps": "whether max_steps forced the last step to tau = 1",
}


def _table(rows: list[dict]):
    import pandas as pd

    cols = [c for c in COLUMNS if any(c in r for r in rows)]
    table = pd.DataFrame([{c: r.get(c, np.nan) for c in cols} for r in rows], columns=cols)
    for c in cols:
        table[c] = table[c].astype(bool if c == "hit_max_steps" else float)
    if "n_eves" in cols and table["n_eves"].notna().all():
        table["n_eves"] = table["n_eves"].astype(int)
    table = table.rename(columns=COLUMN_LABELS)
    table.index.name = "chain"
    return table


def _notes(table, rows: list[dict], source: str) -> list[str]:
    """What the report's NaN entries mean, and what could not be checked."""
    notes = []
    if "khat_worst_stage" in table and table["khat_worst_stage"].isna().any():
        notes.append(
            "khat_worst_stage is blank where a chain never resampled (one stage, or AIS): "
            "it has no incremental weights to check; khat_final_weights covers its weights."
        )
    if "khat_start" in table and table["khat_start"].isna().all():
        notes.append("khat_start is blank: the run did not start from a Laplace fit.")
    if source == "pymc_crais kernel":
        notes.append(
            "pm.sample_smc(kernel=pmc....) keeps each chain's k-hat but not its weights: the "
            "pooled k-hat is the largest chain's."
        )
    if source == "pm.sample_smc":
        notes.append(
            "Not checked: PyMC's own kernels record no importance weights, ancestry, move "
            "statistics or within-chain errors, so the Pareto k-hat, genealogy, mixing, start "
            "and chain-agreement checks cannot run on this result. Run pmc.sample_smc() "
            "(or pm.sample_smc(kernel=pmc.BatchedSMC)) for a checked estimate."
        )
    return notes


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
        cs["pareto_k_final"] = pareto_khat(cs["log_weights"])
        if init_tail is not None and laplace_start(attrs):
            cs["pareto_k_initial"] = pareto_khat_from_tail(init_tail, n)
        row = chain_row(cs)
        cs["pareto_k_max"] = row["pareto_k_max"]
        cs["move_correlation_mean"] = row["move_correlation_mean"]
    rows = [chain_row(cs) for cs in chain_stats]
    attrs["pareto_k_pooled"] = pooled_pareto_khat(
        [cs["log_weights"] for cs in chain_stats],
        [cs["log_marginal_likelihood"] for cs in chain_stats],
    )
    problems = find_problems(rows, attrs)
    attrs["diagnostics_flags"] = ",".join(sorted({p.check for p in problems}))
    table = _table(rows)
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


def warning_text(problems: list[Problem]) -> str:
    head = "the evidence estimate or its error bar is unreliable: " + ", ".join(
        sorted({p.check for p in problems})
    )
    body = "\n".join(f"- {p}" for p in problems)
    return f"{head}.\n{body}\nSee pymc_crais.diagnose(idata) for the per-chain report."


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

    from .result_reader import read_result
    from .results import log_marginal_likelihood

    if idata is None or not (hasattr(idata, "chain_stats") or hasattr(idata, "children")):
        raise TypeError(
            f"idata must be a result (an xarray.DataTree from a pymc_crais sampler or "
            f"pm.sample_smc, or a SamplerResult), got {type(idata).__name__}"
        )
    from .evidence_group import read_evidence

    stored = read_evidence(idata)
    if stored is not None:  # pmc.bridge_sampling: its own checks, stored with the estimate
        diag = _stored_diagnosis(stored)
        if verbose:
            print(diag)
        return diag
    view = read_result(idata)
    rows = rows_of(view)
    attrs = dict(view.attrs)
    attrs["pareto_k_pooled"] = pooled_khat_of(view)
    problems = problems_of(view, rows)
    table = _table(rows)
    diag = Diagnosis(
        table,
        problems,
        view.method,
        start=start_summary(attrs),
        notes=_notes(table, rows, view.source),
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


def rows_of(view) -> list[dict]:
    """Each chain's row of diagnostics from a read result (:func:`pymc_crais.result_reader.read_result`)."""
    if view.source == "pymc_crais":
        return [chain_row(cs) for cs in view.chain_stats]
    keys = (*COLUMNS, "n_resamplings", "move_correlation_stuck_fraction", "draws")
    return [
        {k: cs[k] for k in keys if k in cs}
        | {"log_marginal_likelihood": float(cs["log_marginal_likelihood"])}
        for cs in view.chain_stats
    ]


def pooled_khat_of(view) -> float:
    """The run's pooled Pareto k̂: stored by our samplers, from the weights when they are
    kept, the largest chain's for the ``pm.sample_smc`` kernels, NaN for PyMC's own."""
    khat = float(view.attrs.get("pareto_k_pooled", np.nan))
    if np.isfinite(khat):
        return khat
    if view.has_weights:
        return float(
            pooled_pareto_khat(
                [cs["log_weights"] for cs in view.chain_stats],
                [cs["log_marginal_likelihood"] for cs in view.chain_stats],
            )
        )
    ks = np.array([cs.get("pareto_k_final", np.nan) for cs in view.chain_stats], dtype=float)
    return float(np.nanmax(ks)) if np.isfinite(ks).any() else float("nan")


def problems_of(view, rows: list[dict] | None = None) -> list[Problem]:
    """The failed checks of a read result; for PyMC's own kernels, only that no error can
    be claimed with fewer than ``MIN_CHAINS_BETWEEN`` chains (nothing else is recorded)."""
    from .result_reader import MIN_CHAINS_BETWEEN

    if view.source == "pm.sample_smc":
        if view.n_chains >= MIN_CHAINS_BETWEEN:
            return []
        return [
            Problem(
                "no_error",
                None,
                f"pm.sample_smc's own kernels report no within-chain error, and "
                f"{view.n_chains} chain(s) are too few to estimate one from their spread: no "
                "MCSE or model-probability interval is claimed.",
                f"Run pm.sample_smc with chains={MIN_CHAINS_BETWEEN} or more, or use "
                "pmc.sample_smc() (or pm.sample_smc(kernel=pmc.BatchedSMC)), whose chains each "
                "carry their own error.",
            )
        ]
    attrs = dict(view.attrs)
    attrs["pareto_k_pooled"] = pooled_khat_of(view)
    return find_problems(rows_of(view) if rows is None else rows, attrs)


def _stored_diagnosis(stored) -> Diagnosis:
    """The report of an estimate stored in an ``evidence`` group (bridge sampling): its
    value, error, estimator statistics and the self-checks that failed when it was made."""
    import pandas as pd

    row = {"log_z": stored.log_z, "mcse": stored.mcse}
    row.update({k: v for k, v in stored.details.items() if isinstance(v, int | float)})
    table = pd.DataFrame([row])
    table.index.name = "estimate"
    flags = [f for f in stored.flags.split(",") if f]
    problems = [
        Problem(
            f,
            None,
            f"the {stored.method} estimate failed its '{f}' check when it was computed.",
            "The warning raised then says why and what to do; re-run the estimate to see it.",
        )
        for f in flags
    ]
    notes = [
        f"a {stored.method} estimate: its checks ran when it was computed (the input draws' "
        "R-hat, divergences and effective sizes, the proposal's Pareto k-hat, the iteration's "
        "convergence, a mode search); the per-chain annealing checks do not apply."
    ]
    diag = Diagnosis(table, problems, stored.method, notes=notes, source=stored.method)
    diag.log_z, diag.mcse = stored.log_z, stored.mcse
    return diag
