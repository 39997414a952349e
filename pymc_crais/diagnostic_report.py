"""The report :func:`pymc_crais.diagnose` returns: :class:`Diagnosis`, its per-chain table
with columns named for what they mean, and the notes that explain its blanks and what could
not be checked (results layer; the checks themselves are in :mod:`pymc_crais.diagnostic_checks`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .diagnostic_checks import COLUMNS, Problem

__all__ = [
    "COLUMN_LABELS",
    "COLUMN_MEANINGS",
    "Diagnosis",
    "report_notes",
    "report_table",
    "stored_diagnosis",
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
            which = (
                "the largest chain's final weights"
                if self.source == "pymc_crais kernel"
                else "the pooled final weights"
            )
            lines.append(f"Pareto k̂ of {which}: {self.pareto_k_pooled:.2f}")
        if self.start:
            lines.append(self.start)
        with pd.option_context("display.width", 120, "display.max_columns", 20):
            lines.append(self.table.to_string(float_format=lambda v: f"{v:.5g}", na_rep="-"))
        lines.append("columns:")
        lines.extend(
            f"  {c}: {COLUMN_MEANINGS[c]}" for c in self.table.columns if c in COLUMN_MEANINGS
        )
        lines.extend(f"note: {n}" for n in self.notes)
        if self.ok and self.source == "pm.sample_smc":
            lines.append("No check failed, but most could not run on this result (see the note).")
        elif self.ok:
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


def report_table(rows: list[dict]):
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


def report_notes(table, rows: list[dict], source: str) -> list[str]:
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



def stored_diagnosis(stored) -> Diagnosis:
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
