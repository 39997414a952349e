"""The checks behind :mod:`pymc_crais.diagnostics`: their thresholds, each chain's row of
diagnostics from its recorded statistics, and the problems a run's rows show (each with
what to do), also read back from a stored result (:func:`rows_of`, :func:`pooled_khat_of`,
:func:`problems_of`, which :func:`pymc_crais.log_marginal_likelihood` uses too).
Documented with the checks in :mod:`pymc_crais.diagnostics`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .core.estimators import combine_chain_estimates
from .core.initial import slope_problem
from .result_reader import MIN_CHAINS_BETWEEN
from .tail_stats import (
    KHAT_INFINITE_MEAN,
    KHAT_THRESHOLD,
    chain_agreement,
    heavy_tail_factor,
    pareto_khat,
    pooled_pareto_khat,
)

__all__ = [
    "COLUMNS",
    "MAX_MCSE",
    "Problem",
    "chain_row",
    "chains_mcse",
    "find_problems",
    "pooled_khat_of",
    "problems_of",
    "rows_of",
    "warning_text",
]

MIN_EVES, MIN_EVES_FRACTION = 50, 0.02
MAX_MCSE = 0.15
"""Nats: the largest MCSE of the chains' combined ``log Ẑ`` (their own, before any pooling
with the posterior refit check) that passes the ``precision`` check. Such an error bar
cannot place ``log Z`` within 0.1 nat even when it is honest, and in the validation record
(506 four-chain ``pmc.sample_smc`` runs of 48 models, several code versions) every run
above it missed its reference by more than 0.1 nat or 3 MCSE, 16 of 20 below it: the
error bar is wide where the population straddles a region its moves cannot equilibrate
in, which also biases ``log Ẑ`` down (docs/diagnostics.md)."""
MAX_MEAN_CORRELATION = 0.8
STUCK_CORRELATION = 0.95
AGREEMENT_P_VALUE = 1e-3
STARTED_AT_MODES = " (the run started from a Student-t at each, mixed with the prior)"


# ----------------------------------------------------------------------------- Pareto k̂
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


COLUMNS = (
    "log_marginal_likelihood",
    "log_marginal_likelihood_mcse",
    "pareto_k_final",
    "pareto_k_max",
    "pareto_k_initial",
    "n_eves",
    "move_correlation_mean",
    "hit_max_steps",
)


def laplace_start(attrs: dict) -> bool:
    """Whether the run started from a Student-t at a Laplace fit (``init="laplace"``, or
    ``init="auto"`` that chose it; not the annealed or conditional-Laplace starts)."""
    init = attrs.get("init")
    return init == "laplace" or (
        init == "auto"
        and attrs.get("init_choice") not in ("prior", "annealed", "conditional_laplace")
    )


def start_summary(attrs: dict) -> str:
    """One line on what ``init="auto"`` chose and why (empty for other starts)."""
    if attrs.get("init") != "auto":
        return ""
    return f"start: init='auto' chose {attrs.get('init_choice')!r}: {attrs.get('init_reason')}"


def find_problems(rows: list[dict], attrs: dict) -> list[Problem]:
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
    if laplace_start(attrs):
        start = []
        if not bool(attrs.get("laplace_converged", True)):
            start.append("the optimizer did not converge")
        elif problem := slope_problem(float(attrs.get("laplace_slope", 0.0) or 0.0)):
            start.append(problem)
        if int(attrs.get("laplace_n_nonconcave", 0) or 0) > 0:
            start.append(
                f"the Hessian has {int(attrs['laplace_n_nonconcave'])} non-concave direction(s) "
                "(no interior mode: a boundary, a ridge or a funnel)"
            )
        k0 = [val(r, "pareto_k_initial") for r in rows]
        k0 = [k for k in k0 if not np.isnan(k)]  # inf (weights underflow) is kept
        # init="auto" measured its start's k̂ and chose it over the prior's (larger) k̂
        if k0 and max(k0) > KHAT_THRESHOLD and attrs.get("init") == "laplace":
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
    counts = [
        float(attrs.get(k, np.nan) or np.nan) for k in ("init_n_modes", "init_n_modes_fitted")
    ]
    n_modes = max((c for c in counts if not np.isnan(c)), default=np.nan)
    if attrs.get("init") == "auto" and n_modes > 1:
        out.append(
            Problem(
                "modes",
                None,
                f"the mode search at the start (init='auto') found {int(n_modes)} separated "
                "modes" + STARTED_AT_MODES * (attrs.get("init_choice") == "modes") + ". "
                "Particles moved by local MCMC kernels cannot carry mass between "
                "separated modes, so a mode entered with the wrong weight (or missed) biases "
                "log Z by up to the log of its share, an error the MCSE does not include.",
                "Check that log Z is stable with several times more particles (draws) and "
                "chains; compare sample_smc and sample_crais; if the modes are symmetric "
                "copies (label switching), break the symmetry in the model.",
            )
        )
    n_flat = int(attrs.get("laplace_n_nonconcave", 0) or 0)
    if attrs.get("method") == "rts" and attrs.get("init") == "auto" and n_flat > 0:
        out.append(
            Problem(
                "funnel",
                None,
                f"the start's Laplace fit found no interior mode ({n_flat} non-concave "
                "direction(s): a funnel, a ridge or a boundary). RTS moves its particles "
                "between fixed temperature levels with kernels tuned per level, which do not "
                "reach a funnel's neck: on a centred hierarchical model its log Z came out "
                "0.27-0.39 nat low with an MCSE of 0.02-0.04, all chains agreeing.",
                "Use pmc.sample_smc(), which resamples into the neck, or reparameterize the "
                "model (non-centred).",
            )
        )
    # RTS's cap is on its initial rounds (init_converged), not on stages
    unsettled = which(lambda r: not r.get("init_converged", True))
    if unsettled:
        msg = "the initial rounds hit max_init_rounds before the level guesses settled."
        fix = "Increase max_init_rounds or n_init_sweeps, or use more temperatures."
        out.append(Problem("init_rounds", unsettled, msg, fix))
    k_start = float(attrs.get("init_annealed_pareto_k", np.nan))
    infinite = k_start >= KHAT_INFINITE_MEAN  # the start misses a region
    if attrs.get("init_choice") == "annealed" and (attrs.get("schedule_fallback") or infinite):
        why = (f"its weights have Pareto k̂ {k_start:.2f} >= 1" if infinite else
               "CR-AIS's tuning run crawled (linear fallback) even from it")  # fmt: skip
        msg = (
            f"the start is a Student-t fitted to SMC chains (annealed start) and {why}: it "
            "misses a region (a funnel's neck) that annealing without resampling may never "
            "reach; such runs came out 0.05-0.7 nat low with error bars of 0.015-0.07."
        )
        fix = "Use pmc.sample_smc(), or reparameterize the model (non-centred)."
        out.append(Problem("annealed_start", None, msg, fix))
    hit = which(lambda r: bool(r.get("hit_max_steps", False)))
    if hit:
        msg = "max_steps was reached and the last step jumped to tau = 1."
        fix = "Increase max_steps (or lower the adaptive schedule's threshold)."
        out.append(Problem("max_steps", hit, msg, fix))
    if bool(attrs.get("refit_disagrees", False)):
        again = " (after a second run from that Student-t)" if attrs.get("refit_restarted") else ""
        out.append(
            Problem(
                "refit",
                None,
                f"importance sampling from a Student-t fitted to the run's own posterior draws "
                f"gives log Z = {float(attrs['refit_log_z']):.3f} ± "
                f"{float(attrs['refit_mcse']):.3f} (Pareto k̂ {float(attrs['refit_pareto_k']):.2f}), "
                f"{float(attrs['refit_gap_sigma']):.1f} standard errors above the run's "
                f"{float(attrs['refit_run_log_z']):.3f}{again}: the annealing lost posterior mass "
                "on its way (a start where the posterior has little mass, such as a centred "
                "funnel's neck, that the population's weight never left).",
                "Reparameterize the model (non-centred random effects, weakly informative "
                "priors in place of Gamma(0.001, 0.001) precisions), or run with more "
                "particles (draws) and a gentler schedule (threshold closer to 1) until the "
                "check passes.",
            )
        )
    lz = np.array([val(r, "log_marginal_likelihood") for r in rows])
    v = np.array([val(r, "log_marginal_likelihood_mcse") ** 2 for r in rows])
    mcse = chains_mcse(lz, v, pooled)
    if mcse > MAX_MCSE:
        out.append(
            Problem(
                "precision",
                None,
                f"the chains' combined log Z has an MCSE of {mcse:.3g} nats (> {MAX_MCSE}): "
                "it cannot place log Z within 0.1 nat, and runs this imprecise are usually "
                "off by more than their error bar, mostly too low (a posterior region the "
                "moves reach too rarely, such as a funnel's neck).",
                "Use more particles (draws) and a gentler schedule (threshold closer to 1) "
                "until the MCSE is below it, or reparameterize the model; treat log Z as "
                "uncertain by more than the MCSE meanwhile.",
            )
        )
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


def chains_mcse(log_z, variance, pooled_khat: float) -> float:
    """The MCSE of the chains' combined ``log Ẑ`` as
    :func:`pymc_crais.log_marginal_likelihood` computes it before pooling (each chain's
    variance times the heavy-tail factor of the pooled k̂); NaN when no chain has a finite
    variance or an estimate is not finite."""
    lz = np.asarray(log_z, dtype=np.float64)
    v = np.asarray(variance, dtype=np.float64)
    if lz.size == 0 or not np.all(np.isfinite(lz)) or not np.isfinite(v).any():
        return float("nan")
    f = np.full(lz.size, float(heavy_tail_factor(pooled_khat)))
    return float(combine_chain_estimates(lz, v, f)[1])


def chain_row(cs: dict) -> dict:
    """Per-chain diagnostics from one chain's statistics (recorded tails included)."""
    n = int(np.asarray(cs["log_weights"]).size)
    row = {k: float(cs[k]) for k in COLUMNS[:2] if k in cs}
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
        ("init_converged", bool),
        ("pareto_k_initial", float),
    ):
        if key in cs:
            row[key] = typ(cs[key])
    pk = np.asarray(cs.get("pareto_k", []), dtype=np.float64)
    # inf (a stage whose weights underflow) counts; only NaN (no measurement) is skipped
    row["pareto_k_max"] = float(np.nanmax(pk)) if (~np.isnan(pk)).any() else np.nan
    mc = np.asarray(cs.get("move_correlation", []), dtype=np.float64)
    mcx = np.asarray(cs.get("move_correlation_max", []), dtype=np.float64)
    rs = np.asarray(cs.get("resampled", []), dtype=bool)
    if rs.shape == mc.shape == mcx.shape and rs.any():  # copies to break up: resampled stages
        mc, mcx = mc[rs], mcx[rs]
    row["move_correlation_mean"] = float(np.nanmean(mc)) if np.isfinite(mc).any() else np.nan
    row["move_correlation_stuck_fraction"] = (
        float(np.mean(mcx[np.isfinite(mcx)] > STUCK_CORRELATION))
        if np.isfinite(mcx).any()
        else np.nan
    )
    return row


def warning_text(problems: list[Problem]) -> str:
    head = "the evidence estimate or its error bar is unreliable: " + ", ".join(
        sorted({p.check for p in problems})
    )
    body = "\n".join(f"- {p}" for p in problems)
    return f"{head}.\n{body}\nSee pymc_crais.diagnose(idata) for the per-chain report."


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
        keys = ("log_weights", "log_marginal_likelihood", "family_copies")
        return float(pooled_pareto_khat(*([cs.get(k) for cs in view.chain_stats] for k in keys)))
    ks = np.array([cs.get("pareto_k_final", np.nan) for cs in view.chain_stats], dtype=float)
    # inf (one weight dominates) counts; only NaN (not measured) is skipped
    return float(np.nanmax(ks)) if (~np.isnan(ks)).any() else float("nan")


def problems_of(view, rows: list[dict] | None = None) -> list[Problem]:
    """The failed checks of a read result; for PyMC's own kernels, only that no error can
    be claimed with fewer than ``MIN_CHAINS_BETWEEN`` chains (nothing else is recorded)."""
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
