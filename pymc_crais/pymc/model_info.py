"""Facts about a PyMC model that the samplers check and the results layer stores."""

from __future__ import annotations

import numpy as np

__all__ = ["model_data_for_results", "has_likelihood_terms"]


def has_likelihood_terms(model) -> bool:
    """Whether ``model`` has observed variables or potentials (else ``log Z = 0``)."""
    return bool(model.observed_RVs) or bool(model.potentials)


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
