"""Read any result the package accepts into one form: per-chain ``log Z``, errors, stages.

Three producers write evidence results, each in its own layout:

``"pymc_crais"``
    our samplers: ``sample_stats.log_marginal_likelihood`` and its within-chain
    ``log_marginal_likelihood_mcse`` of dims ``(chain,)``, per-stage arrays of dims
    ``(chain, stage)`` cut at ``n_stages``, the final ``log_weights``; or a
    :class:`~pymc_crais.chain_result.SamplerResult` (``return_inferencedata=False``).
``"pymc_crais kernel"``
    ``pm.sample_smc(kernel=pmc.CRAIS | pmc.CRSMC | pmc.BatchedSMC)``: PyMC's layout (one
    entry per stage and chain), with the chain's within-chain error and diagnostics at its
    last stage (:data:`~pymc_crais.samplers.smc_kernels.DROP_IN_FINAL_STATS`) and the run's
    settings, marked ``pymc_crais_kernel``, in the attributes.
``"pm.sample_smc"``
    PyMC's own kernels: per-stage ``log_marginal_likelihood`` and ``beta`` only, no
    within-chain error. PyMC stores the stages as an object array ``(chain,)`` of lists,
    a 2-d object array when all chains ran as many stages, or, with one chain, a float
    vector whose dimension (named ``chain``) counts the stages.

:func:`read_result` returns a :class:`ResultView`; :func:`pymc_crais.log_marginal_likelihood`,
:func:`pymc_crais.compare`, :func:`pymc_crais.diagnose` and the plots read results through it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["MIN_CHAINS_BETWEEN", "SOURCES", "ResultReadError", "ResultView", "read_result"]

SOURCES = ("pymc_crais", "pymc_crais kernel", "pm.sample_smc")
MIN_CHAINS_BETWEEN = 4
"""Fewest chains from whose spread alone (PyMC's own kernels) an MCSE is claimed."""


@dataclass
class ResultView:
    """One result, read.

    Attributes
    ----------
    source : str
        One of :data:`SOURCES`.
    log_z : numpy.ndarray
        Each chain's ``log Ẑ``.
    mcse : numpy.ndarray or None
        Each chain's within-chain standard error (``None``: the producer reports none).
    attrs : dict
        The run's attributes (for PyMC's own kernels, its settings).
    chain_stats : list of dict
        Per chain: its scalar statistics and per-stage arrays (``tau`` always, the
        stage's ``log_marginal_likelihood`` running estimate when known).
    """

    source: str
    log_z: np.ndarray
    mcse: np.ndarray | None
    attrs: dict
    chain_stats: list = field(default_factory=list)

    @property
    def n_chains(self) -> int:
        return int(self.log_z.size)

    @property
    def method(self) -> str:
        if self.source == "pm.sample_smc":
            return "pm.sample_smc"
        method = str(self.attrs.get("method", ""))
        if self.source == "pymc_crais kernel":
            return f"pm.sample_smc(kernel=pmc.{self.attrs.get('pymc_crais_kernel')})"
        return method

    @property
    def has_weights(self) -> bool:
        """Whether each chain's final importance weights are stored (our samplers)."""
        return all("log_weights" in cs for cs in self.chain_stats) and bool(self.chain_stats)


class ResultReadError(TypeError, ValueError):
    """The object holds no evidence estimate the package can read (the message names it
    and says what to pass). A ``TypeError`` and a ``ValueError``, as the readers raised
    before."""


def _describe(obj) -> str:
    return type(obj).__name__


def read_result(result, *, name: str | None = None) -> ResultView:
    """Read a result of any of the package's samplers, of its ``pm.sample_smc`` kernels or
    of ``pm.sample_smc`` itself.

    Parameters
    ----------
    result : xarray.DataTree or SamplerResult
    name : str, optional
        How to call the result in error messages (e.g. its key in :func:`compare`).

    Returns
    -------
    ResultView

    Raises
    ------
    TypeError
        When ``result`` holds no evidence estimate; the message names it and says what to
        pass.
    """
    label = f"result {name!r}" if name is not None else "the result"
    if hasattr(result, "chain_stats") and hasattr(result, "attrs"):  # SamplerResult
        return _read_sampler_result(result)
    try:
        stats = result["sample_stats"]
    except (KeyError, TypeError, IndexError, AttributeError):
        stats = None
    if stats is None or "log_marginal_likelihood" not in getattr(stats, "data_vars", {}):
        raise ResultReadError(
            f"cannot read an evidence estimate from {label} ({_describe(result)}): it has no "
            "sample_stats.log_marginal_likelihood. Pass the output of a pymc_crais sampler, of "
            "pm.sample_smc (any kernel), of pmc.bridge_sampling, or a (log_z, mcse) pair"
        )
    if hasattr(stats, "to_dataset"):  # a DataTree node
        stats = stats.to_dataset()
    attrs = dict(stats.attrs)
    lml = stats["log_marginal_likelihood"]
    if "pymc_crais_kernel" in attrs:
        return _read_pymc_layout(stats, attrs, "pymc_crais kernel", label)
    # PyMC's layout records "beta" per stage; ours "tau" and "n_stages" (also when the
    # attributes were lost on the way)
    pymc_layout = "beta" in stats and "n_stages" not in stats
    ours = attrs.get("inference_library") == "pymc_crais" or (
        attrs.get("inference_library") != "pymc"
        and not pymc_layout
        and lml.dtype != object
        and lml.dims == ("chain",)
        and "log_marginal_likelihood_mcse" in stats
    )
    if ours:
        return _read_ours(stats, attrs, label)
    return _read_pymc_layout(stats, attrs, "pm.sample_smc", label)


def _read_sampler_result(result) -> ResultView:
    stats = [dict(cs) for cs in result.chain_stats]
    log_z = np.array([float(cs["log_marginal_likelihood"]) for cs in stats])
    if all("log_z_variance" in cs for cs in stats):
        mcse = np.sqrt(np.array([float(cs["log_z_variance"]) for cs in stats]))
    else:
        mcse = None
    return ResultView("pymc_crais", log_z, mcse, dict(result.attrs), stats)


def _read_ours(stats, attrs: dict, label: str) -> ResultView:
    values = np.asarray(stats["log_marginal_likelihood"].values, dtype=np.float64)
    if values.ndim != 1:
        raise ResultReadError(
            f"{label}: sample_stats.log_marginal_likelihood must have dims (chain,), got "
            f"{stats['log_marginal_likelihood'].dims}"
        )
    mcse = None
    if "log_marginal_likelihood_mcse" in stats:
        mcse = np.asarray(stats["log_marginal_likelihood_mcse"].values, dtype=np.float64)
    n_chains = values.size
    chain_stats = []
    n_stages = (
        np.asarray(stats["n_stages"].values).astype(int) if "n_stages" in stats else None
    )
    for c in range(n_chains):
        cs = {}
        for key, var in stats.data_vars.items():
            if "chain" not in var.dims:
                continue
            vals = var.isel(chain=c).values
            if var.dims == ("chain", "stage") and n_stages is not None:
                vals = vals[: int(n_stages[c])]
            cs[key] = vals
        chain_stats.append(cs)
    return ResultView("pymc_crais", values, mcse, attrs, chain_stats)


def _stage_values(var) -> list[np.ndarray]:
    """PyMC's per-stage entries of one statistic: one float array per chain."""
    values = np.asarray(var.values)
    if values.dtype != object:
        if values.ndim == 1:  # one chain: the dimension named "chain" counts its stages
            return [values.astype(np.float64)]
        return [np.asarray(row, dtype=np.float64).ravel() for row in values]
    rows = values.reshape(values.shape[0], -1)
    return [
        np.concatenate([np.atleast_1d(np.asarray(v, dtype=np.float64)).ravel() for v in row])
        if row.size
        else np.zeros(0)
        for row in rows
    ]


def _read_pymc_layout(stats, attrs: dict, source: str, label: str) -> ResultView:
    per_var = {key: _stage_values(var) for key, var in stats.data_vars.items()}
    lml = per_var["log_marginal_likelihood"]
    n_chains = len(lml)
    log_z = np.full(n_chains, np.nan)
    for c, row in enumerate(lml):
        finite = row[np.isfinite(row)]
        if finite.size == 0:
            raise ResultReadError(
                f"{label}: chain {c} has no finite log_marginal_likelihood entry (the run did "
                "not reach beta = 1, or its weights vanished); re-run it"
            )
        log_z[c] = finite[-1]
    chain_stats = []
    for c in range(n_chains):
        cs = {"log_marginal_likelihood": float(log_z[c])}
        if "beta" in per_var:
            cs["tau"] = per_var["beta"][c]
        cs["stage_log_marginal_likelihood"] = lml[c]
        for key, rows in per_var.items():
            if key in ("beta", "log_marginal_likelihood") or c >= len(rows):
                continue
            row = rows[c]
            if source == "pymc_crais kernel" and key not in ("ess", "accept_rate", "n_mcmc_steps"):
                cs[key] = float(row[-1]) if row.size else np.nan  # the chain's final value
            else:
                cs[key] = row
        chain_stats.append(cs)
    mcse = None
    if source == "pymc_crais kernel":
        mcse = np.array([cs.get("log_marginal_likelihood_mcse", np.nan) for cs in chain_stats])
        for cs in chain_stats:
            cs["hit_max_steps"] = bool(cs.get("hit_max_steps", 0.0) == 1.0)
            for key in ("n_eves", "n_resamplings"):
                if key in cs and np.isfinite(cs[key]):
                    cs[key] = int(cs[key])
            cs["draws"] = int(attrs.get("draws", attrs.get("_n_draws", 0)) or 0)
    return ResultView(source, log_z, mcse, attrs, chain_stats)
