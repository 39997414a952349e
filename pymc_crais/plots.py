"""Diagnostic plots (matplotlib, the optional ``plots`` extra: ``pip install pymc_crais[plots]``).

Each function draws on a given ``ax`` (or a new figure) and returns the Axes.
"""

from __future__ import annotations

import numpy as np

__all__ = ["plot_evidence", "plot_log_weights", "plot_schedule"]


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError(
            "pymc_crais plots need matplotlib: pip install 'pymc_crais[plots]' (or matplotlib)"
        ) from None
    return plt


def _axes(ax):
    if ax is not None:
        return ax
    _, ax = _pyplot().subplots(figsize=(6, 4), layout="constrained")
    return ax


def _stats(idata, what: str):
    try:
        return idata["sample_stats"]
    except (KeyError, TypeError):
        raise TypeError(f"{what} needs the DataTree returned by a pymc_crais sampler") from None


def _schedule_rows(idata, tune: bool, name) -> list[np.ndarray]:
    """Each chain's ``τ`` per stage, without the start ``τ = 0``: from any result the
    package reads (:func:`pymc_crais.result_reader.read_result`: our samplers, our
    ``pm.sample_smc`` kernels, PyMC's own ``pm.sample_smc`` and its ``beta``), or with
    ``tune`` the CR-AIS tuning run's ``tune_tau``."""
    from .result_reader import read_result

    if tune:
        stats = _stats(idata, "plot_schedule")
        if "tune_tau" not in stats:
            why = "it is not a CR-AIS result"
            if stats.attrs.get("schedule") == "one_step":
                why = "this CR-AIS run made no tuning run (its start met target_mcse in one step)"
            raise ValueError(f"tune=True needs a CR-AIS tuning run (sample_stats.tune_tau): {why}")
        rows = [np.asarray(stats["tune_tau"].values, dtype=np.float64).ravel()]
    else:
        if not hasattr(idata, "chain_stats"):  # a SamplerResult has no sample_stats group
            _stats(idata, "plot_schedule")  # a TypeError naming the function for a non-result
        view = read_result(idata, name=name)
        if not all("tau" in cs for cs in view.chain_stats):
            where = f"result {name!r}" if name is not None else "the result"
            raise ValueError(
                f"plot_schedule: {where} records no schedule (no sample_stats.tau of a "
                "pymc_crais sampler, no sample_stats.beta of pm.sample_smc)"
            )
        rows = [np.asarray(cs["tau"], dtype=np.float64).ravel() for cs in view.chain_stats]
    return [r[np.isfinite(r)] for r in rows]


def plot_schedule(results, ax=None, *, tune: bool = False, log_scale: bool = False):
    """The annealing schedule: ``τ`` against the step, one line per chain, from the start
    ``τ = 0`` (step 0) to ``τ = 1``.

    A run that ends in one stage (the start was close enough to the posterior to go from
    ``τ = 0`` to 1 in one step, frequent with ``init="auto"`` on small models) draws the
    segment from ``(0, 0)`` to ``(1, 1)`` with its two points marked, and a note on the plot
    says which results (and chains) did so.

    Parameters
    ----------
    results : xarray.DataTree or dict of str to DataTree
        One result, or several (overlaid, one colour per result, labelled by the dict key):
        of a pymc_crais sampler, or of ``pm.sample_smc`` (its ``sample_stats.beta``, with
        PyMC's kernels or ours).
    ax : matplotlib.axes.Axes, optional
    tune : bool, default False
        Draw the CR-AIS tuning-run schedule (``sample_stats.tune_tau``) instead of the final
        runs' schedules.
    log_scale : bool, default False
        Plot ``τ`` on a log axis (useful for schedules that start with tiny steps); the
        start ``τ = 0`` is then left out.

    Returns
    -------
    matplotlib.axes.Axes
    """
    from matplotlib.ticker import MaxNLocator

    ax = _axes(ax)
    items = results.items() if isinstance(results, dict) else [(None, results)]
    colors = _pyplot().rcParams["axes.prop_cycle"].by_key()["color"]
    one_stage = []  # (label, chains that ran one stage, chains)
    for i, (label, idata) in enumerate(items):
        rows = _schedule_rows(idata, tune, label)
        color = colors[i % len(colors)]
        for c, tau in enumerate(rows):
            x = np.arange(tau.size + 1)
            y = np.concatenate([[0.0], tau])
            if log_scale:
                x, y = x[1:], y[1:]
            ax.plot(x, y, color=color, lw=1.2, alpha=0.8, marker="o" if tau.size <= 12 else None,
                    ms=4, label=(label if c == 0 and label is not None else None))
        single = [c for c, tau in enumerate(rows) if tau.size == 1]
        if single:
            one_stage.append((label, single, len(rows)))
    if one_stage:
        ax.text(0.98, 0.03, _one_stage_note(one_stage), transform=ax.transAxes, ha="right",
                va="bottom", fontsize=8, color="0.25")
    ax.set_xlabel("annealing step (0: the start)")
    ax.set_ylabel("τ")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if log_scale:
        ax.set_yscale("log")
    else:
        ax.set_ylim(-0.03, 1.05)
    ax.set_title("tuning schedule" if tune else "schedule")
    if isinstance(results, dict):
        # the note is in the lower right corner, which a one-stage segment leaves free
        ax.legend(frameon=False, loc="upper left" if one_stage else "best")
    return ax


def _one_stage_note(one_stage: list) -> str:
    """``"one stage: the start was close to the posterior"``, naming the results and chains
    when not every chain drawn did so."""
    parts = []
    for label, chains, n in one_stage:
        which = "" if len(chains) == n else (
            f"chain {chains[0]}" if len(chains) == 1 else f"chains {', '.join(map(str, chains))}"
        )
        parts.append(", ".join(p for p in (label, which) if p))
    named = "; ".join(p for p in parts if p)
    head = f"one stage ({named})" if named else "one stage"
    return f"{head}: the start was close to the posterior\n(τ = 0 to 1 in a single step)"


def plot_log_weights(idata, ax=None, *, bins: int = 40):
    """Histogram of the final normalized log importance weights of each chain, with each
    chain's effective sample size in the legend.

    Parameters
    ----------
    idata : xarray.DataTree
        Result of a pymc_crais AIS/CR-AIS run (``sample_stats.log_weights``).
    ax : matplotlib.axes.Axes, optional
    bins : int, default 40

    Returns
    -------
    matplotlib.axes.Axes
    """
    from scipy.special import logsumexp

    ax = _axes(ax)
    stats = _stats(idata, "plot_log_weights")
    if "log_weights" not in stats:
        raise ValueError("the result has no sample_stats.log_weights")
    lw = np.asarray(stats["log_weights"].values, dtype=np.float64)
    for c, row in enumerate(np.atleast_2d(lw)):
        finite = row[np.isfinite(row)]
        if finite.size == 0:
            continue
        norm = finite - logsumexp(finite)
        ess = 1.0 / np.exp(logsumexp(2 * norm))
        ax.hist(norm + np.log(row.size), bins=bins, histtype="step", lw=1.2,
                label=f"chain {c}: ESS {ess:.0f}/{row.size}")
    ax.axvline(0.0, color="k", lw=0.8, ls=":")
    ax.set_xlabel("log (N · normalized weight)")
    ax.set_ylabel("particles")
    ax.set_title("final importance weights")
    ax.legend(frameon=False)
    return ax


def _reference_values(reference, names) -> dict:
    """``name -> (value, sd)`` from a float, a ``(value, sd)`` pair or a dict of either."""

    def pair(v):
        if isinstance(v, tuple | list):
            return float(v[0]), float(v[1]) if len(v) > 1 else 0.0
        return float(v), 0.0

    if isinstance(reference, dict):
        unknown = set(reference) - set(names)
        if unknown:
            raise ValueError(
                f"reference names {sorted(map(str, unknown))} are not models of the table "
                f"({', '.join(map(str, names))})"
            )
        return {n: pair(v) for n, v in reference.items()}
    return {n: pair(reference) for n in names}


def plot_evidence(table, ax=None, *, reference=None, show: str | None = None, sigmas: float = 2.0):
    """What a reader compares, with ``±sigmas·MCSE`` error bars: the log Bayes factor of each
    model against the best one, or each ``log Z`` minus a reference value.

    Differences are what matter: absolute log evidences of real data sets are hundreds of nats
    apart from zero, and their error bars of a tenth of a nat would not show on that scale.

    Parameters
    ----------
    table : pandas.DataFrame or dict
        A :func:`pymc_crais.compare` table, or ``name -> result`` (compared first).
    ax : matplotlib.axes.Axes, optional
    reference : float, (float, float) or dict, optional
        Reference log evidence(s), e.g. from long runs or quadrature: ``name -> value`` (or
        ``(value, sd)``) for the models that have one, or one value (or ``(value, sd)``),
        drawn as a line at that ``log Z`` (with ``show="error"``: the reference of every
        model, e.g. replicate runs of one model).
    show : {"log_bf", "error", "log_z"}, optional
        ``"log_bf"``: ``log Z − log Z_best`` with the MCSE of the difference (the default
        without a reference). ``"error"``: ``log Z − reference`` for the models with a
        reference, the reference's own ``sd`` drawn as a grey band (the default with a dict
        of references). ``"log_z"``: the raw ``log Z``, references drawn as a line or as
        markers (the default with a single reference value).
    sigmas : float, default 2.0
        Half-width of the error bars in MCSEs.

    Returns
    -------
    matplotlib.axes.Axes
    """
    from .comparison import compare

    if isinstance(table, dict):
        table = compare(table)
    if show is None:
        show = "log_bf" if reference is None else "error" if isinstance(reference, dict) else "log_z"
    if show not in ("log_bf", "error", "log_z"):
        raise ValueError(f"show must be 'log_bf', 'error' or 'log_z', got {show!r}")
    if show == "error" and reference is None:
        raise ValueError("show='error' needs reference= (a value, or name -> value)")
    if show == "log_bf" and reference is not None:
        raise ValueError("reference= is drawn with show='error' or show='log_z', not 'log_bf'")
    ax = _axes(ax)
    names = [str(n) for n in table.index]
    log_z = np.asarray(table["log_z"], dtype=np.float64)
    mcse = np.asarray(table["mcse"], dtype=np.float64)
    refs = _reference_values(reference, names) if reference is not None else {}
    if show == "log_bf":
        keep = np.arange(len(names))
        y = np.asarray(table["log_bf"], dtype=np.float64)
        err = np.asarray(table["log_bf_mcse"], dtype=np.float64)
        ylabel = f"log Bayes factor vs {names[0]}  (± {sigmas:g} MCSE)"
        title = "log Bayes factor against the best model"
    elif show == "error":
        keep = np.array([i for i, n in enumerate(names) if n in refs], dtype=int)
        if keep.size == 0:
            raise ValueError("no model of the table has a reference value")
        y = np.array([log_z[i] - refs[names[i]][0] for i in keep])
        err = mcse[keep]
        ylabel = f"log Z − reference  (± {sigmas:g} MCSE)"
        title = "error against the reference"
    else:
        keep = np.arange(len(names))
        y, err = log_z, mcse
        ylabel = f"log Z  (± {sigmas:g} MCSE)"
        title = "evidence"
    x = np.arange(keep.size)
    ax.errorbar(x, y, yerr=sigmas * err, fmt="o", capsize=4)
    digits = 3 if np.nanmax(np.abs(y)) < 1 else 2
    for xi, yi, ei in zip(x, y, err, strict=True):
        if show == "log_bf" and xi == 0:
            text = "best"
        else:
            value = f"{yi:.{digits}f}" if show == "log_z" else f"{yi:+.{digits}f}"
            text = f"{value} ± {sigmas * ei:.{digits}f}"
        ax.annotate(text, (xi, yi), xytext=(8, 0), textcoords="offset points", va="center",
                    fontsize=8)
    if show == "log_z" and reference is not None:
        if isinstance(reference, dict):
            for k, (n, (value, sd)) in enumerate(refs.items()):
                ax.errorbar([names.index(n) + 0.15], [value], yerr=[sigmas * sd], fmt="x",
                            color="k", capsize=3, label="reference" if k == 0 else None)
        else:
            ax.axhline(refs[names[0]][0], color="k", lw=0.8, ls="--", label="reference")
        ax.legend(frameon=False)
    elif show != "log_z":
        ax.axhline(0.0, color="k", lw=0.8, ls="--")
    if show == "error":
        band = f"reference ± {sigmas:g} sd"
        for xi, i in zip(x, keep, strict=True):
            sd = refs[names[i]][1]
            if sd > 0:
                ax.fill_between([xi - 0.3, xi + 0.3], -sigmas * sd, sigmas * sd, color="0.85",
                                zorder=0, label=band)
                band = None
        if band is None:
            ax.legend(frameon=False)
    ax.set_xticks(x, [names[i] for i in keep], rotation=20, ha="right")
    ax.set_xlim(-0.6, keep.size - 0.4)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    return ax
