"""The ``evidence`` group: an evidence estimate added to a result that has no other (results layer).

:func:`pymc_crais.bridge_sampling` estimates ``log Z`` from the posterior draws of a result
(``pm.sample()``'s NUTS draws), so its output is that result with one more group,
``evidence``: scalar variables ``log_marginal_likelihood`` and
``log_marginal_likelihood_mcse`` plus the estimator's own diagnostics, and the attributes
``method`` (``"bridge"``) and ``flags`` (the failed self-checks, comma-separated).
:func:`pymc_crais.log_marginal_likelihood`, :func:`pymc_crais.compare`,
:func:`pymc_crais.bayes_factor` and :func:`pymc_crais.cross_check` read it through
:func:`read_evidence`; where a result has both this group and the per-chain estimates of an
annealing run, the group is read (it is what the last call asked for). Everything is
numeric or a string, so ``to_netcdf`` round-trips.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

import numpy as np
import xarray as xr
from xarray import DataTree

__all__ = ["GROUP", "StoredEvidence", "attach_evidence", "read_evidence"]

GROUP = "evidence"


@dataclass(frozen=True)
class StoredEvidence:
    """An estimate read from the ``evidence`` group."""

    log_z: float
    mcse: float
    method: str
    flags: str
    details: dict


def attach_evidence(
    idata: DataTree,
    *,
    log_z: float,
    mcse: float,
    method: str,
    flags: list[str] | tuple[str, ...],
    values: dict | None = None,
    attrs: dict | None = None,
) -> DataTree:
    """A shallow copy of ``idata`` with the ``evidence`` group set (replaced if present).

    Parameters
    ----------
    idata : xarray.DataTree
        The result the estimate was computed from (its groups are kept).
    log_z, mcse : float
        The estimate and its Monte Carlo standard error.
    method : str
        How it was computed (e.g. ``"bridge"``).
    flags : sequence of str
        The names of the failed self-checks (empty when all passed).
    values : dict, optional
        Further scalar diagnostics, stored as variables.
    attrs : dict, optional
        Settings of the estimator (strings or numbers), stored as attributes.

    Returns
    -------
    xarray.DataTree
    """
    data = {
        "log_marginal_likelihood": ((), float(log_z)),
        "log_marginal_likelihood_mcse": ((), float(mcse)),
    }
    for key, val in (values or {}).items():
        data[key] = ((), np.asarray(val).item())
    all_attrs = {
        "created_at": datetime.datetime.now(datetime.UTC).isoformat(),
        "inference_library": "pymc_crais",
        "method": str(method),
        "flags": ",".join(flags),
    }
    for key, val in (attrs or {}).items():
        all_attrs[key] = val if isinstance(val, int | float | str) else str(val)
    out = idata.copy()
    out[GROUP] = DataTree(xr.Dataset(data, attrs=all_attrs))
    return out


def read_evidence(idata) -> StoredEvidence | None:
    """The estimate of the ``evidence`` group of ``idata``, or ``None`` if it has none."""
    try:
        if GROUP not in getattr(idata, "children", {}):
            return None
        group = idata[GROUP]
        log_z = float(group["log_marginal_likelihood"].values)
        mcse = float(group["log_marginal_likelihood_mcse"].values)
    except (KeyError, TypeError, ValueError):
        return None
    details = {
        k: np.asarray(v.values).item()
        for k, v in group.dataset.data_vars.items()
        if k not in ("log_marginal_likelihood", "log_marginal_likelihood_mcse")
    }
    attrs = group.attrs
    return StoredEvidence(log_z, mcse, str(attrs.get("method", "")), str(attrs.get("flags", "")), details)
