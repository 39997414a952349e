"""Facts about a PyMC model that the samplers check and the results layer stores."""

from __future__ import annotations

import warnings

import numpy as np

from ...warnings import user_stacklevel

__all__ = [
    "check_model_for_evidence",
    "has_likelihood_terms",
    "improper_prior_names",
    "model_data_for_results",
    "nonfinite_observations",
]


def has_likelihood_terms(model) -> bool:
    """Whether ``model`` has observed variables or potentials (else ``log Z = 0``)."""
    return bool(model.observed_RVs) or bool(model.potentials)


def improper_prior_names(model) -> list[str]:
    """Names of the free variables with an improper prior (``pm.Flat``, ``pm.HalfFlat``)."""
    from pymc.distributions.continuous import FlatRV, HalfFlatRV

    return [rv.name for rv in model.free_RVs if isinstance(rv.owner.op, FlatRV | HalfFlatRV)]


def nonfinite_observations(model) -> dict[str, int]:
    """``{name: count}`` of the observed variables whose data hold NaN or ±inf.

    Missing values that PyMC imputes (NaN or masked entries of a NumPy ``observed=``)
    are not counted: PyMC turns them into free variables and keeps only the finite part
    as data.
    """
    bad = {}
    for rv in model.observed_RVs:
        value = model.rvs_to_values[rv]
        if hasattr(value, "get_value"):  # pm.Data / shared variable
            data = value.get_value()
        elif hasattr(value, "data"):  # constant
            data = value.data
        else:  # computed data: checked by its own graph, not here
            continue
        data = np.asarray(data)
        if data.dtype.kind in "fc":
            n_bad = int(np.sum(~np.isfinite(data)))
            if n_bad:
                bad[rv.name] = n_bad
    return bad


def check_model_for_evidence(model, init) -> None:
    """Refuse models whose evidence would silently be wrong; warn about degenerate ones.

    Parameters
    ----------
    model : pymc.Model
    init : object
        The sampler's ``init=`` argument (the prior, ``"prior"``, and ``"auto"``, which
        starts its mode search from prior draws and may fall back to the prior, need a
        proper prior).

    Raises
    ------
    ValueError
        Observed data with NaN/inf (every likelihood value would be NaN or ``-inf``), or an
        improper prior as the initial distribution.
    """
    bad = nonfinite_observations(model)
    if bad:
        desc = ", ".join(f"{k!r} ({n} value{'s' if n > 1 else ''})" for k, n in bad.items())
        raise ValueError(
            f"observed data contain NaN or inf: {desc}; the log-likelihood would be NaN or "
            "-inf for every parameter value. Remove or correct those entries (for missing "
            "values pass a NumPy array with NaN, or a masked array, as observed= so that PyMC "
            "imputes them)"
        )
    improper = improper_prior_names(model)
    if improper and isinstance(init, str) and init in ("prior", "auto"):
        raise ValueError(
            f"the free variables {improper} have improper priors (pm.Flat / pm.HalfFlat), so "
            f"init={init!r} cannot draw the initial particles and the evidence is not defined "
            "by the model alone. Give them proper priors, or pass a normalized initial "
            "distribution: init='laplace' or init={'mean': ..., 'cov': ...} (unconstrained "
            "coordinates); log Z is then relative to the flat density 1"
        )
    if improper:
        warnings.warn(
            f"the free variables {improper} have improper priors: log Z is computed with "
            "their unnormalized density (PyMC's logp = 0 on the support) and is not comparable "
            "across models",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
    if not has_likelihood_terms(model):
        warnings.warn(
            "the model has no observed variables or potentials: the evidence is exactly 1 "
            "(log Z = 0) and the posterior equals the prior",
            UserWarning,
            stacklevel=user_stacklevel(),
        )


def model_data_for_results(model) -> dict:
    """Coordinates, dims, observed and constant data of ``model`` as plain NumPy.

    Returns
    -------
    dict
        ``coords``, ``dims``, ``observed_data``, ``constant_data``.
    """
    from pymc.backends.arviz import (
        coords_and_dims_for_inferencedata,
        find_constants,
        find_observations,
    )

    coords, dims = coords_and_dims_for_inferencedata(model)
    observed = {k: np.asarray(v) for k, v in find_observations(model).items()}
    constants = {k: np.asarray(v) for k, v in find_constants(model).items()}
    return {
        "coords": coords,
        "dims": dims,
        "observed_data": observed,
        "constant_data": constants,
    }
