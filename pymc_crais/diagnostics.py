"""When an evidence estimate cannot be trusted: the run's diagnostics, the warning, the report.

Every sampler run ends in :func:`check_run`, which turns what the annealing loop recorded
(:mod:`pymc_crais.core.tails`) into per-chain diagnostics, stores them with the run
(``sample_stats``) and raises one :class:`~pymc_crais.UnreliableEvidenceWarning` listing
each failed check with what to do. :func:`diagnose` reads them back from a result and
prints a report. The checks and their thresholds (ALGORITHMS.md §11; docs/reliability.md,
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
    against the posterior have k̂ > 0.7 (``pareto_k_initial``).
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

from .core.tails import pareto_tail_size
from .warnings import UnreliableEvidenceWarning

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

KHAT_THRESHOLD = 0.7
MIN_EVES = 50
MIN_EVES_FRACTION = 0.02
MAX_MEAN_CORRELATION = 0.8
STUCK_CORRELATION = 0.95
AGREEMENT_P_VALUE = 1e-3


# ----------------------------------------------------------------------------- Pareto k̂
def pareto_khat(log_weights) -> float:
    """Pareto k̂ of importance weights given by their logs (``arviz_stats``, right tail,
    ``r_eff = 1``). NaN when fewer than 25 weights are positive or the tail is flat.

    The weights are exponentiated relative to their maximum (``arviz_stats``'
    ``log_weights=True`` option does not exponentiate before the fit in the installed
    version, so it is not used).
    """
    lw = np.asarray(log_weights, dtype=np.float64).ravel()
    lw = lw[np.isfinite(lw)]
    if lw.size < 25:
        return float("nan")
    from arviz_stats.base import array_stats

    w = np.exp(lw - lw.max())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            k = array_stats.pareto_khat(w, chain_axis=None, r_eff=1.0, tail="right")
        except ValueError:  # "All tail values are the same": equal weights
            return float("nan")
    return float(k)


def pooled_pareto_khat(log_weights, log_z) -> float:
    """k̂ of the final weights of all chains together, each chain's weights scaled to sum
    to its ``Ẑ_c``: the weights of the combined estimate ``mean_c Ẑ_c`` (for AIS exactly
    the pooled importance weights). Four chains of 1000 weights give a far steadier k̂
    than each chain alone (one d = 5 regression run: 0.73, 0.58, 0.62, 0.53 per chain,
    0.56 pooled).
    """
    lw = np.asarray(log_weights, dtype=np.float64)
    lz = np.asarray(log_z, dtype=np.float64).ravel()
    if lw.ndim != 2 or lw.shape[0] != lz.size:
        return float("nan")
    from .core.weights import logsumexp

    parts = []
    for row, z in zip(lw, lz, strict=True):
        total = logsumexp(np.where(np.isfinite(row), row, -np.inf))
        if np.isfinite(total) and np.isfinite(z):
            parts.append(row - total + z)
    return pareto_khat(np.concatenate(parts)) if parts else float("nan")


def pareto_khat_from_tail(tail, n: int) -> float:
    """k̂ of ``n`` log-weights of which ``tail`` holds the ``M + 1`` largest, ascending
    (:func:`pymc_crais.core.tails.log_weight_tail`).

    The fit uses only the ``M`` largest weights above the ``(M + 1)``-th, so padding the
    tail with copies of its smallest value gives exactly the k̂ of the full array.
    """
    tail = np.asarray(tail, dtype=np.float64).ravel()
    finite = tail[np.isfinite(tail)]
    if finite.size < tail.size:  # fewer positive weights than the tail: they are all here
        return pareto_khat(finite)
    if tail.size < pareto_tail_size(n) + 1:
        return float("nan")
    pad = np.full(max(int(n) - tail.size, 0), tail[0])
    return pareto_khat(np.concatenate([pad, tail]))


def heavy_tail_factor(khat) -> np.ndarray:
    """Factor on the within-chain *variance* of ``log Ẑ`` for weights with Pareto k̂.

    The sample variance of heavy-tailed weights is small more often than not: it only
    grows when one of the rare large weights is drawn. ``benchmarks/heavy_tail.py``
    simulates importance weights of two families (generalized Pareto and log-normal, the
    two shapes of the tail that k̂ sees) at N = 250 to 4000 and finds, for each bin of the
    *estimated* k̂, the factor ``f`` on the variance that makes ``±2·sqrt(f·v)`` cover the
    true ``log Z`` 95 % of the time in the worse of the two families: 1.1 for
    ``k̂ ≤ 0.1``, 1.3 at 0.1–0.2, 1.5 at 0.2–0.3, 2.4 at 0.3–0.4, 3.4 at 0.4–0.5, 4.6 and
    4.3 at 0.5–0.7 (docs/reliability.md; with the fit, 93.5–97.3 % coverage in every
    bin). The fit is
    ``f = 1 + 6·(k̂ − 0.1)`` between 0.1 and 0.7 (4.6 at 0.7), 1 below; above 0.7 no
    factor can help (the variance is infinite) and the run is flagged instead, the factor
    staying at its value at 0.7.
    """
    k = np.asarray(khat, dtype=np.float64)
    k = np.where(np.isfinite(k), k, 0.0)
    return 1.0 + 6.0 * np.clip(k - 0.1, 0.0, KHAT_THRESHOLD - 0.1)


# ----------------------------------------------------------------------------- agreement
def chain_agreement(log_z, within_variance) -> tuple[float, float]:
    """Do independent chains agree within their errors? ``(statistic, p_value)``.

    ``Q = Σ_c (log Ẑ_c − m)² / v_c`` with ``m`` the precision-weighted mean and ``v_c``
    each chain's within-chain variance of ``log Ẑ_c``; under agreement ``Q ~ χ²_{C−1}``.
    NaN with fewer than two chains with a positive finite variance.
    """
    lz = np.asarray(log_z, dtype=np.float64).ravel()
    v = np.asarray(within_variance, dtype=np.float64).ravel()
    ok = np.isfinite(lz) & np.isfinite(v) & (v > 0)
    if ok.sum() < 2:
        return float("nan"), float("nan")
    lz, v = lz[ok], v[ok]
    m = np.sum(lz / v) / np.sum(1.0 / v)
    q = float(np.sum((lz - m) ** 2 / v))
    from scipy import stats

    return q, float(stats.chi2.sf(q, lz.size - 1))


# ----------------------------------------------------------------------------- report
@dataclass
class Problem:
    """One failed check: its name, the chains it concerns, what was seen and what to do."""

    check: str
    chains: list
    message: str
    advice: str

    def __str__(self) -> str:
        where = "all chains" if self.chains is None else f"chains {self.chains}"
        return f"[{self.check}] ({where}) {self.message} {self.advice}"


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
            lines.append(f"log Z = {self.log_z:.4f} ± {self.mcse:.3g} (MCSE)")
        if np.isfinite(self.pareto_k_pooled):
            lines.append(f"Pareto k̂ of the pooled final weights: {self.pareto_k_pooled:.2f}")
        with pd.option_context("display.width", 120, "display.max_columns", 20):
            lines.append(self.table.to_string(float_format=lambda v: f"{v:.5g}"))
        if self.ok:
            lines.append("All checks passed: no sign that log Z or its error bar is unreliable.")
        else:
            lines.append("UNRELIABLE: " + ", ".join(self.flags))
            lines.extend(f"- {p}" for p in self.problems)
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle):  # IPython
        p.text(str(self))


_COLUMNS = (
    "log_marginal_likelihood",
    "log_marginal_likelihood_mcse",
    "pareto_k_final",
    "pareto_k_max",
    "pareto_k_initial",
    "n_eves",
    "move_correlation_mean",
    "hit_max_steps",
)


def _problems(rows: list[dict], attrs: dict) -> list[Problem]:
    """The failed checks of a run from its per-chain diagnostics and attributes."""
    out = []
    chains = list(range(len(rows)))

    def which(pred):
        return [c for c in chains if pred(rows[c])]

    def val(row, key):
        v = row.get(key, np.nan)
        return float(v) if v is not None else np.nan

    resampled = which(lambda r: val(r, "n_resamplings") > 0)
    pooled = float(attrs.get("pareto_k_pooled", np.nan))
    bad_stage = [c for c in resampled if val(rows[c], "pareto_k_max") > KHAT_THRESHOLD]
    if pooled > KHAT_THRESHOLD or bad_stage:
        ks = [pooled] + [val(rows[c], "pareto_k_max") for c in bad_stage]
        out.append(
            Problem(
                "pareto_k",
                None if pooled > KHAT_THRESHOLD else bad_stage,
                f"importance weights have Pareto k̂ {np.nanmax(ks):.2f} (> {KHAT_THRESHOLD}; "
                "final weights of all chains pooled, or a stage's incremental weights): "
                "their variance is effectively infinite, so log Z may be far off and the MCSE "
                "understates the error.",
                "Use more annealing steps (n_steps) or kernel moves per step, more particles, "
                "or init='laplace' for a start closer to the posterior.",
            )
        )
    collapsed = [
        c
        for c in resampled
        if val(rows[c], "n_eves")
        < min(MIN_EVES, max(2.0, MIN_EVES_FRACTION * val(rows[c], "draws")))
    ]
    if collapsed:
        eves = [int(val(rows[c], "n_eves")) for c in collapsed]
        out.append(
            Problem(
                "genealogy",
                collapsed,
                f"the SMC genealogy collapsed: the final particles descend from only "
                f"{min(eves)}-{max(eves)} initial particles, so the estimate rests on a handful "
                "of independent paths and its MCSE is unreliable.",
                "Use more particles (draws), more MCMC moves per stage (n_mcmc_steps, "
                "correlation_threshold) or a gentler schedule (threshold closer to 1).",
            )
        )
    stuck = [
        c
        for c in resampled
        if val(rows[c], "move_correlation_mean") > MAX_MEAN_CORRELATION
        or val(rows[c], "move_correlation_stuck_fraction") > 0.5
    ]
    if stuck:
        corr = max(val(rows[c], "move_correlation_mean") for c in stuck)
        out.append(
            Problem(
                "mixing",
                stuck,
                f"the MCMC moves leave the particles close to where each stage started (mean "
                f"correlation {corr:.2f}): resampled copies stay copies and the population is "
                "far less diverse than its size.",
                "Increase n_mcmc_steps / max_mcmc_steps, or use a kernel that moves further "
                "(kernel_kwargs n_leapfrog for 'hmc').",
            )
        )
    if attrs.get("init") == "laplace":
        start = []
        if not bool(attrs.get("laplace_converged", True)):
            start.append("the optimizer did not converge")
        if int(attrs.get("laplace_n_nonconcave", 0) or 0) > 0:
            start.append(
                f"the Hessian has {int(attrs['laplace_n_nonconcave'])} non-concave direction(s) "
                "(no interior mode: a boundary, a ridge or a funnel)"
            )
        k0 = [val(r, "pareto_k_initial") for r in rows]
        k0 = [k for k in k0 if np.isfinite(k)]
        if k0 and max(k0) > KHAT_THRESHOLD:
            start.append(f"the Student-t start has Pareto k̂ {max(k0):.2f} against the posterior")
        if start:
            out.append(
                Problem(
                    "start",
                    None,
                    "the Laplace start does not cover the posterior: " + "; ".join(start) + ".",
                    "Use init='prior', or reparameterize the model (e.g. non-centred).",
                )
            )
    hit = which(lambda r: bool(r.get("hit_max_steps", False)))
    if hit:
        out.append(
            Problem(
                "max_steps",
                hit,
                "max_steps was reached and the last step jumped to tau = 1.",
                "Increase max_steps (or lower the adaptive schedule's threshold).",
            )
        )
    lz = np.array([val(r, "log_marginal_likelihood") for r in rows])
    v = np.array([val(r, "log_marginal_likelihood_mcse") ** 2 for r in rows])
    q, p = chain_agreement(lz, v * heavy_tail_factor(pooled))
    if np.isfinite(p) and p < AGREEMENT_P_VALUE:
        out.append(
            Problem(
                "chains",
                None,
                f"the chains' log Z estimates (spread {np.ptp(lz):.3g} nats) disagree beyond "
                f"their errors (chi-square {q:.3g} on {lz.size - 1} df, p = {p:.2g}).",
                "Run longer chains (more steps or particles) until they agree.",
            )
        )
    return out


def _row(cs: dict) -> dict:
    """Per-chain diagnostics from one chain's statistics (recorded tails included)."""
    n = int(np.asarray(cs["log_weights"]).size)
    row = {k: float(cs[k]) for k in _COLUMNS[:2] if k in cs}
    row["draws"] = n
    if "log_marginal_likelihood_mcse" not in row and "log_z_variance" in cs:
        row["log_marginal_likelihood_mcse"] = float(np.sqrt(cs["log_z_variance"]))
    row["pareto_k_final"] = float(
        cs["pareto_k_final"] if "pareto_k_final" in cs else pareto_khat(cs["log_weights"])
    )
    for key, typ in (
        ("n_eves", int),
        ("n_resamplings", int),
        ("hit_max_steps", bool),
        ("pareto_k_initial", float),
    ):
        if key in cs:
            row[key] = typ(cs[key])
    pk = np.asarray(cs.get("pareto_k", []), dtype=np.float64)
    row["pareto_k_max"] = float(np.nanmax(pk)) if np.isfinite(pk).any() else np.nan
    mc = np.asarray(cs.get("move_correlation", []), dtype=np.float64)
    mcx = np.asarray(cs.get("move_correlation_max", []), dtype=np.float64)
    row["move_correlation_mean"] = float(np.nanmean(mc)) if np.isfinite(mc).any() else np.nan
    row["move_correlation_stuck_fraction"] = (
        float(np.mean(mcx[np.isfinite(mcx)] > STUCK_CORRELATION))
        if np.isfinite(mcx).any()
        else np.nan
    )
    return row


def _table(rows: list[dict]):
    import pandas as pd

    cols = [c for c in _COLUMNS if any(c in r for r in rows)]
    table = pd.DataFrame([{c: r.get(c, np.nan) for c in cols} for r in rows], columns=cols)
    for c in cols:
        table[c] = table[c].astype(bool if c == "hit_max_steps" else float)
    if "n_eves" in cols:
        table["n_eves"] = table["n_eves"].astype(int)
    table.index.name = "chain"
    return table


def check_run(chain_stats: list[dict], attrs: dict, *, stacklevel: int = 5) -> Diagnosis:
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
    stacklevel : int
        Of the warning (the user's call).

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
        if init_tail is not None and attrs.get("init") == "laplace":
            cs["pareto_k_initial"] = pareto_khat_from_tail(init_tail, n)
        row = _row(cs)
        cs["pareto_k_max"] = row["pareto_k_max"]
        cs["move_correlation_mean"] = row["move_correlation_mean"]
    rows = [_row(cs) for cs in chain_stats]
    attrs["pareto_k_pooled"] = pooled_pareto_khat(
        [cs["log_weights"] for cs in chain_stats],
        [cs["log_marginal_likelihood"] for cs in chain_stats],
    )
    problems = _problems(rows, attrs)
    attrs["diagnostics_flags"] = ",".join(sorted({p.check for p in problems}))
    table = _table(rows)
    diagnosis = Diagnosis(
        table, problems, str(attrs.get("method", "")), pareto_k_pooled=attrs["pareto_k_pooled"]
    )
    if problems:
        warnings.warn(_warning_text(problems), UnreliableEvidenceWarning, stacklevel=stacklevel)
    return diagnosis


def _warning_text(problems: list[Problem]) -> str:
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

    from .results import log_marginal_likelihood

    if idata is None or not (hasattr(idata, "chain_stats") or hasattr(idata, "children")):
        raise TypeError(
            f"idata must be the output of a pymc_crais sampler (an xarray.DataTree or a "
            f"SamplerResult), got {type(idata).__name__}"
        )
    if hasattr(idata, "chain_stats"):
        chain_stats, attrs = idata.chain_stats, dict(idata.attrs)
    else:
        try:
            stats = idata["sample_stats"]
        except KeyError:
            raise TypeError("idata has no sample_stats group; pass a pymc_crais result") from None
        attrs = dict(stats.attrs)
        n_chains = stats.sizes.get("chain", 1)
        chain_stats = []
        for c in range(n_chains):
            cs = {}
            for name, var in stats.data_vars.items():
                if "chain" not in var.dims:
                    continue
                vals = var.isel(chain=c).values
                if var.dims == ("chain", "stage"):
                    vals = vals[: int(stats["n_stages"].values[c])]
                cs[name] = vals
            chain_stats.append(cs)
    rows = [_row(cs) for cs in chain_stats]
    if "pareto_k_pooled" not in attrs:
        attrs["pareto_k_pooled"] = pooled_pareto_khat(
            [cs["log_weights"] for cs in chain_stats],
            [cs["log_marginal_likelihood"] for cs in chain_stats],
        )
    problems = _problems(rows, attrs)
    table = _table(rows)
    diag = Diagnosis(table, problems, str(attrs.get("method", "")))
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
