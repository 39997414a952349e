"""The results layer: the only place that builds ArviZ data (an ``xarray.DataTree``).

It receives plain NumPy arrays and typed per-chain results
(:class:`pymc_crais.chain_result.ChainResult`) from the samplers (it never touches a PyMC
model, and imports no sampler) and returns the same container type ``pm.sample_smc`` returns on PyMC 6, with:

* ``posterior``: ``(chain, draw, ...)`` equal-weight draws resampled from the final
  weighted particles;
* ``sample_stats``: ``log_marginal_likelihood`` and its within-chain MCSE per chain,
  per-stage ``tau``/``ess``/``acceptance_rate``/``log_z_increment``/``mcmc_steps`` on a
  ``stage`` dim
  (NaN-padded, with ``n_stages``), ``n_logp_evals``, the final ``log_weights``
  ``(chain, draw)``; attributes naming the method, path, α, ``c``, schedule and kernel;
* the diagnostics of :mod:`pymc_crais.diagnostics` when the run recorded them: per stage
  ``pareto_k``, ``move_correlation``, ``move_correlation_max``; per chain
  ``pareto_k_final``, ``pareto_k_max``, ``move_correlation_mean``, ``n_eves``; attributes
  ``pareto_k_pooled`` and ``diagnostics_flags``;
* ``observed_data`` and ``constant_data`` when the model has them.

Everything is numeric or fixed-width string, so ``to_netcdf`` round-trips.
"""

from __future__ import annotations

import datetime
import functools
import importlib.metadata
import warnings

import numpy as np
import xarray as xr
from xarray import DataTree

from .chain_result import ChainResult, per_chain_arrays
from .core.estimators import combine_chain_estimates
from .core.refit import pool_with_refit
from .diagnostic_checks import pooled_khat_of, problems_of, warning_text
from .evidence_group import read_evidence
from .result_reader import MIN_CHAINS_BETWEEN, read_result
from .tail_stats import chain_agreement, heavy_tail_factor
from .warnings import ChainDisagreementWarning, UnreliableEvidenceWarning, user_stacklevel

__all__ = [
    "ChainDisagreementWarning",
    "build_datatree",
    "log_marginal_likelihood",
    "netcdf_attr",
    "pad_stages",
]

# optional per-stage diagnostics (pymc_crais.diagnostics), stored when a run recorded them
DIAGNOSTIC_STAGE_KEYS = ("pareto_k", "move_correlation", "move_correlation_max")


@functools.cache
def _version(pkg: str) -> str:
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def netcdf_attr(value):
    """Coerce an attribute to a type netCDF can store (str, number, numeric array)."""
    if value is None:
        return "None"
    if isinstance(value, bool | np.bool_):
        return int(value)
    if isinstance(value, int | float | str | np.integer | np.floating):
        return value
    arr = np.asarray(value)
    if arr.dtype.kind in "iuf" and arr.ndim == 1:
        return arr
    return str(value)


def _attrs(extra: dict | None) -> dict:
    attrs = {
        "created_at": datetime.datetime.now(datetime.UTC).isoformat(),
        "inference_library": "pymc_crais",
        "inference_library_version": _version("pymc_crais"),
        "arviz_version": _version("arviz"),
        "pymc_version": _version("pymc"),
    }
    for k, v in (extra or {}).items():
        attrs[k] = netcdf_attr(v)
    return attrs


def pad_stages(per_chain: list[np.ndarray], fill=np.nan) -> np.ndarray:
    """Stack ragged per-chain stage arrays into ``(chain, stage)``, padding with ``fill``."""
    n = max((a.size for a in per_chain), default=0)
    dtype = np.result_type(*[a.dtype for a in per_chain], np.asarray(fill).dtype)
    out = np.full((len(per_chain), n), fill, dtype=dtype)
    for i, a in enumerate(per_chain):
        out[i, : a.size] = a
    return out


def _dataset_from_arrays(data: dict, coords: dict, dims: dict, sample_dims, attrs):
    from arviz_base import dict_to_dataset

    return dict_to_dataset(
        data, coords=coords, dims=dims, sample_dims=sample_dims, attrs=attrs, index_origin=0
    )


def build_datatree(
    *,
    posterior: dict[str, np.ndarray],
    chains: list[ChainResult],
    attrs: dict,
    coords: dict | None = None,
    dims: dict | None = None,
    observed_data: dict | None = None,
    constant_data: dict | None = None,
    extra_vars: dict | None = None,
) -> DataTree:
    """Assemble the output ``DataTree``.

    Parameters
    ----------
    posterior : dict of numpy.ndarray
        ``name -> (chain, draw, *shape)`` equal-weight posterior draws.
    chains : list of ChainResult
        One per chain: its scalars, final ``log_weights`` and per-stage arrays; its
        ``stats`` become ``(chain,)`` variables and its ``arrays`` ``(chain, *dims)`` ones.
    attrs : dict
        Run settings (method, path, alpha, c, schedule, kernel, ...), stored on
        ``sample_stats`` and ``posterior``.
    coords, dims : dict, optional
        Model coordinates and variable dims (as PyMC's ``coords_and_dims_for_inferencedata``).
    observed_data, constant_data : dict, optional
        Observations and constant data of the model.
    extra_vars : dict, optional
        Run-level ``name -> (dims, array)`` added to ``sample_stats`` (e.g. ``tune_tau``).

    Returns
    -------
    xarray.DataTree
    """
    coords = dict(coords or {})
    dims = dict(dims or {})
    n_chains = len(chains)
    all_attrs = _attrs(attrs)

    post = _dataset_from_arrays(posterior, coords, dims, ["chain", "draw"], all_attrs)

    stage_keys = ("tau", "ess", "acceptance_rate", "log_z_increment", "mcmc_steps")
    n_stages = np.array([c.n_stages for c in chains], dtype=np.int64)
    data_vars = {
        "log_marginal_likelihood": (
            ("chain",),
            np.array([c.log_marginal_likelihood for c in chains], dtype=np.float64),
        ),
        "log_marginal_likelihood_mcse": (
            ("chain",),
            np.sqrt(np.array([c.log_z_variance for c in chains], dtype=np.float64)),
        ),
        "n_stages": (("chain",), n_stages),
        "n_logp_evals": (("chain",), np.array([c.n_logp_evals for c in chains], dtype=np.int64)),
        "hit_max_steps": (("chain",), np.array([bool(c.hit_max_steps) for c in chains])),
        "log_weights": (
            ("chain", "draw"),
            np.stack([np.asarray(c.log_weights, dtype=np.float64) for c in chains]),
        ),
        "resampled": (
            ("chain", "stage"),
            pad_stages([np.asarray(c.stages["resampled"], dtype=bool) for c in chains], False),
        ),
    }
    for key in stage_keys:
        data_vars[key] = (
            ("chain", "stage"),
            pad_stages([np.asarray(c.stages[key], dtype=np.float64) for c in chains]),
        )
    for key in DIAGNOSTIC_STAGE_KEYS:
        if all(key in c.stages for c in chains):
            data_vars[key] = (
                ("chain", "stage"),
                pad_stages([np.asarray(c.stages[key], dtype=np.float64) for c in chains]),
            )
    for key in chains[0].stats:
        data_vars[key] = (("chain",), np.array([c.stats[key] for c in chains]))
    for key, (vdims, arr) in {**per_chain_arrays(chains), **(extra_vars or {})}.items():
        data_vars[key] = (tuple(vdims), np.asarray(arr))
    stats = xr.Dataset(
        data_vars,
        coords={"chain": np.arange(n_chains), "stage": np.arange(int(n_stages.max(initial=0)))},
        attrs=all_attrs,
    )

    groups = {"posterior": post, "sample_stats": stats}
    if observed_data:
        groups["observed_data"] = _dataset_from_arrays(
            {k: np.asarray(v) for k, v in observed_data.items()}, coords, dims, [], _attrs(None)
        )
    if constant_data:
        groups["constant_data"] = _dataset_from_arrays(
            {k: np.asarray(v) for k, v in constant_data.items()}, coords, dims, [], _attrs(None)
        )
    return DataTree.from_dict({f"/{k}": v for k, v in groups.items()})


def log_marginal_likelihood(idata, *, return_details: bool = False):
    """The combined ``log Z`` of all chains and its Monte Carlo standard error.

    Parameters
    ----------
    idata : xarray.DataTree
        The output of :func:`pymc_crais.bridge_sampling` (its ``evidence`` group, read
        first wherever present), output of a pymc_crais sampler (or anything with
        ``sample_stats.log_marginal_likelihood`` of dims ``(chain,)``), or of
        ``pm.sample_smc``: its last finite ``log_marginal_likelihood`` entry per chain is
        used, and its MCSE is the between-chain standard error only (``pm.sample_smc``
        reports no within-chain error; NaN, unknown, with a single chain), as in
        :func:`pymc_crais.compare`.
    return_details : bool, default False
        Also return the within- and between-chain standard errors and the range of the
        chains' ``log Ẑ_c`` (``log_z_range``).

    Returns
    -------
    value : float
        ``log`` of the average of the chains' evidence estimates. For ``pmc.sample_smc``,
        pooled with its posterior refit check's importance estimate (inverse-variance
        weights) where that estimate's weights have Pareto k̂ ≤ 0.5 and it agrees with the
        chains (:func:`pymc_crais.core.refit.pool_with_refit`; docs/diagnostics.md); the
        MCSE is then the pooled one.
    mcse : float
        Its Monte Carlo standard error: the pooled within-chain delta-method error, each
        chain's variance multiplied by a heavy-tail factor of its weights' Pareto k̂ (see
        :mod:`pymc_crais.core.estimators` and docs/reliability.md). Without within-chain
        errors (e.g. results of ``pm.sample_smc``), the delta method on the chains' spread.
        Persistent sampling (``sample_smc(persistent=True)``): that spread times
        ``t_{0.975, C−1} / z_{0.975}`` (1.62 with 4 chains), so that ±2 MCSE covers about
        95 %; NaN, with an :class:`~pymc_crais.UnreliableEvidenceWarning`, below 4 chains.
    details : dict
        Only with ``return_details=True``: ``mcse_within`` (uncorrected),
        ``mcse_between``, ``tail_factor``, ``n_chains``, ``log_z_range`` and the chains'
        agreement test ``agreement_statistic`` / ``agreement_p_value``; ``refit_pooled``
        (whether the refit estimate was pooled in), ``log_z_chains_pooled`` and
        ``mcse_chains_pooled`` (the chains' alone).

    Warns
    -----
    ChainDisagreementWarning
        A :class:`~pymc_crais.UnreliableEvidenceWarning`: the chains disagree beyond their
        errors (chi-square p-value below 0.001), or span more than 2 nats and more than
        4 MCSE. The estimate is then unreliable, whatever its MCSE says.

    Notes
    -----
    Judge a result by this MCSE, by the effective sample size of the final weights
    (``sample_stats.ess`` at the last stage, or :func:`pymc_crais.plot_log_weights`) and by
    the agreement of the chains' ``log Ẑ`` (``sample_stats.log_marginal_likelihood``).
    ``az.summary`` on a result reports ESS and R-hat of the posterior draws as if they were
    MCMC traces: they are the final particles resampled (many draws are copies of one
    particle) from independent runs, so those ESS values count copies and R-hat only says
    whether the chains' resampled populations look alike.
    """
    if idata is None or isinstance(idata, str | bytes | int | float):
        raise TypeError(
            "idata must be the output of a pymc_crais sampler (an xarray.DataTree with "
            "sample_stats.log_marginal_likelihood), got "
            f"{type(idata).__name__}; run e.g. idata = pmc.sample_smc(...) first"
        )
    stored = read_evidence(idata)  # an ``evidence`` group (pmc.bridge_sampling) is read first
    if stored is not None:
        details = {"method": stored.method, "flags": stored.flags, **stored.details}
        return (stored.log_z, stored.mcse, details) if return_details else (stored.log_z, stored.mcse)
    view = read_result(idata)
    values = view.log_z
    within = factor = None
    if view.mcse is not None:
        within = view.mcse**2
        khat = pooled_khat_of(view)  # stored, from the weights, or the chains' largest
        factor = np.full(values.size, float(heavy_tail_factor(khat)))
    value, mcse, details = combine_chain_estimates(values, within, factor)
    spread = float(np.ptp(values)) if values.size >= 2 else 0.0
    details["log_z_range"] = spread
    details["source"] = view.source
    q, p = (np.nan, np.nan) if within is None else chain_agreement(values, within * factor)
    details["agreement_statistic"], details["agreement_p_value"] = q, p
    if view.source == "pm.sample_smc" and values.size < MIN_CHAINS_BETWEEN:
        mcse = float("nan")  # PyMC's kernels give no within-chain error: see below
        warnings.warn(
            f"pm.sample_smc's own kernels report no within-chain error, and {values.size} "
            f"chain(s) are too few to estimate one from their spread, so no MCSE is claimed "
            f"(NaN). Run pm.sample_smc with chains={MIN_CHAINS_BETWEEN} or more, or use "
            "pmc.sample_smc() (or pm.sample_smc(kernel=pmc.BatchedSMC)), whose chains each "
            "carry their own error.",
            UnreliableEvidenceWarning,
            stacklevel=user_stacklevel(),
        )
    if view.attrs.get("persistent") and values.size >= MIN_CHAINS_BETWEEN:
        # no within-chain error: the chains' spread, with Student's t_{0.975, C-1} / z_{0.975}
        # so that ±2 MCSE covers as a known standard error would (docs/algorithms.md)
        from scipy import stats

        details["t_factor"] = float(stats.t.ppf(0.975, values.size - 1) / stats.norm.ppf(0.975))
        mcse = float(details["mcse_between"] * details["t_factor"])
    elif view.attrs.get("persistent"):
        mcse = float("nan")  # persistent sampling has no within-chain error
        warnings.warn(
            f"persistent sampling reports no within-chain error, and {values.size} chain(s) "
            f"are too few to estimate one from their spread, so no MCSE is claimed (NaN). "
            f"Run with chains={MIN_CHAINS_BETWEEN} or more, or persistent=False.",
            UnreliableEvidenceWarning,
            stacklevel=user_stacklevel(),
        )
    if view.source == "pymc_crais kernel":
        _warn_kernel_problems(view)
    # pm.sample_smc's MCSE is the chains' standard error, against which the spread of the
    # chains is no test (its range is about 4 standard errors with 4 chains)
    checked = view.source != "pm.sample_smc"
    if checked and ((np.isfinite(p) and p < 1e-3) or spread > max(2.0, 4.0 * mcse)):
        warnings.warn(
            f"the {values.size} chains' log Z estimates span {spread:.3g} nats, beyond their "
            f"errors (MCSE {mcse:.3g}; chi-square p-value {p:.2g}): the estimate is unreliable "
            "whatever its MCSE. Use more annealing steps or particles (or init='laplace') "
            "until the chains agree; see sample_stats.log_marginal_likelihood and "
            "pmc.diagnose(idata).",
            ChainDisagreementWarning,
            stacklevel=user_stacklevel(),
        )
    value, mcse = _pooled_with_refit(view.attrs, value, mcse, details)
    if return_details:
        return value, mcse, details
    return value, mcse


def _pooled_with_refit(attrs: dict, value: float, mcse: float, details: dict):
    """The chains' ``(log Ẑ, mcse)`` pooled with the posterior refit check's importance
    estimate where :func:`~pymc_crais.core.refit.pool_with_refit` allows it (light-tailed
    weights that agree with the chains); the chains' own values stay in ``details``
    (``log_z_chains_pooled``, ``mcse_chains_pooled``, ``refit_pooled``)."""
    details["log_z_chains_pooled"], details["mcse_chains_pooled"] = value, mcse
    details["refit_pooled"] = False
    if not attrs.get("refit_checked") or attrs.get("refit_disagrees"):
        return value, mcse
    try:
        refit = [float(attrs[k]) for k in ("refit_log_z", "refit_mcse", "refit_pareto_k")]
    except (KeyError, TypeError, ValueError):
        return value, mcse
    pooled = pool_with_refit(value, mcse, *refit, float(heavy_tail_factor(refit[2])))
    if pooled is None:
        return value, mcse
    details["refit_pooled"] = True
    return pooled


def _warn_kernel_problems(view) -> None:
    """A ``pm.sample_smc(kernel=pmc....)`` result: its chains checked themselves in PyMC's
    workers (whose warnings may not reach the user); the run-level checks (pooled k̂, the
    chains' agreement) are only possible here. Warn once with every failed check, except
    the chains' disagreement, which has its own warning."""
    problems = [p for p in problems_of(view) if p.check != "chains"]
    if problems:
        warnings.warn(
            warning_text(problems), UnreliableEvidenceWarning, stacklevel=user_stacklevel()
        )
