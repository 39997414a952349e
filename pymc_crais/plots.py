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


def plot_schedule(results, ax=None, *, tune: bool = False, log_scale: bool = False):
    """The annealing schedule: ``τ`` against the step, one line per chain.

    Parameters
    ----------
    results : xarray.DataTree or dict of str to DataTree
        One result, or several (overlaid, one colour per result, labelled by the dict key).
    ax : matplotlib.axes.Axes, optional
    tune : bool, default False
        Draw the CR-AIS tuning-run schedule (``sample_stats.tune_tau``) instead of the final
        runs' schedules.
    log_scale : bool, default False
        Plot ``τ`` on a log axis (useful for schedules that start with tiny steps).

    Returns
    -------
    matplotlib.axes.Axes
    """
    ax = _axes(ax)
    items = results.items() if isinstance(results, dict) else [(None, results)]
    colors = _pyplot().rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (label, idata) in enumerate(items):
        stats = _stats(idata, "plot_schedule")
        color = colors[i % len(colors)]
        if tune:
            if "tune_tau" not in stats:
                raise ValueError("tune=True needs a CR-AIS result (sample_stats.tune_tau is missing)")
            taus = np.atleast_2d(np.asarray(stats["tune_tau"].values, dtype=np.float64))
        else:
            taus = np.asarray(stats["tau"].values, dtype=np.float64)
        for c, tau in enumerate(taus):
            tau = tau[np.isfinite(tau)]
            ax.plot(np.arange(tau.size), tau, color=color, lw=1.2, alpha=0.8,
                    label=(label if c == 0 and label is not None else None))
    ax.set_xlabel("annealing step")
    ax.set_ylabel("τ")
    if log_scale:
        ax.set_yscale("log")
    ax.set_title("tuning schedule" if tune else "schedule")
    if isinstance(results, dict):
        ax.legend(frameon=False)
    return ax


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


def plot_evidence(table, ax=None, *, reference: float | None = None, sigmas: float = 2.0):
    """``log Z`` of each model with ``±sigmas·MCSE`` error bars.

    Parameters
    ----------
    table : pandas.DataFrame or dict
        A :func:`pymc_crais.compare` table, or ``name -> result`` (compared first).
    ax : matplotlib.axes.Axes, optional
    reference : float, optional
        A reference value drawn as a horizontal line.
    sigmas : float, default 2.0
        Half-width of the error bars in MCSEs.

    Returns
    -------
    matplotlib.axes.Axes
    """
    from .comparison import compare

    if isinstance(table, dict):
        table = compare(table)
    ax = _axes(ax)
    x = np.arange(len(table))
    log_z = np.asarray(table["log_z"], dtype=np.float64)
    mcse = np.asarray(table["mcse"], dtype=np.float64)
    ax.errorbar(x, log_z, yerr=sigmas * mcse, fmt="o", capsize=4)
    if reference is not None:
        ax.axhline(reference, color="k", lw=0.8, ls="--", label="reference")
        ax.legend(frameon=False)
    ax.set_xticks(x, [str(n) for n in table.index], rotation=20, ha="right")
    ax.set_ylabel(f"log Z  (± {sigmas:g} MCSE)")
    ax.set_title("evidence")
    return ax
