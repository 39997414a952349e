"""Model builders for the examples."""

from __future__ import annotations

import numpy as np

__all__ = ["logistic_regression"]


def logistic_regression(
    X, y, prior_sd: float = 5.0, intercept: bool = False, feature_names=None, name: str = ""
):
    """Bayesian logistic regression ``y ~ Bernoulli(logit⁻¹(α + X β))``, ``β_j ~ N(0, prior_sd²)``.

    With the defaults (``prior_sd=5``, no intercept) and the standardized Pima or Sonar data
    of :mod:`pymc_crais.datasets` this is the standard evidence benchmark set-up, whose
    reference values are in ``pymc_crais.datasets.REFERENCE_LOG_Z``.

    Parameters
    ----------
    X : array_like, shape (n, p)
        Predictors.
    y : array_like, shape (n,)
        Binary labels.
    prior_sd : float, default 5.0
        Prior standard deviation of every coefficient (and of the intercept).
    intercept : bool, default False
        Add an intercept ``alpha ~ N(0, prior_sd²)``.
    feature_names : sequence of str, optional
        Coordinate values of the ``feature`` dim.
    name : str, optional
        PyMC model name.

    Returns
    -------
    pymc.Model
    """
    import pymc as pm

    # C order: a column subset (X[:, cols]) is Fortran-ordered, and a new memory layout
    # makes Numba compile the batched matrix product again (a minute or more, cold cache)
    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.asarray(y)
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError(f"X must be (n, p) and y (n,), got {X.shape} and {y.shape}")
    if not (np.isfinite(prior_sd) and prior_sd > 0):
        raise ValueError(f"prior_sd must be positive, got {prior_sd}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X has NaN or infinite entries; drop or impute those rows first")
    if not np.all(np.isin(y, (0, 1))):
        raise ValueError("y must contain only 0 and 1 (encode the two classes as 0/1)")
    names = list(feature_names) if feature_names is not None else [f"x{i}" for i in range(X.shape[1])]
    if len(names) != X.shape[1]:
        raise ValueError(f"feature_names has {len(names)} names for {X.shape[1]} columns of X")
    with pm.Model(name=name, coords={"feature": names, "obs": np.arange(X.shape[0])}) as model:
        Xd = pm.Data("X", X, dims=("obs", "feature"))
        beta = pm.Normal("beta", 0.0, prior_sd, dims="feature")
        eta = Xd @ beta
        if intercept:
            eta = pm.Normal("alpha", 0.0, prior_sd) + eta
        pm.Bernoulli("y", logit_p=eta, observed=y, dims="obs")
    return model
