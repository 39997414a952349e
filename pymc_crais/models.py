"""Model builders for the examples."""

from __future__ import annotations

import numpy as np

__all__ = ["logistic_regression"]


def logistic_regression(X, y, prior_sd: float = 5.0, feature_names=None, name: str = ""):
    """Bayesian logistic regression ``y ~ Bernoulli(logit⁻¹(X β))``, ``β_j ~ N(0, prior_sd²)``.

    Parameters
    ----------
    X : array_like, shape (n, p)
        Predictors (no intercept column is added).
    y : array_like, shape (n,)
        Binary labels.
    prior_sd : float, default 5.0
        Prior standard deviation of every coefficient.
    feature_names : sequence of str, optional
        Coordinate values of the ``feature`` dim.
    name : str, optional
        PyMC model name.

    Returns
    -------
    pymc.Model
    """
    import pymc as pm

    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError(f"X must be (n, p) and y (n,), got {X.shape} and {y.shape}")
    if not (np.isfinite(prior_sd) and prior_sd > 0):
        raise ValueError(f"prior_sd must be positive, got {prior_sd}")
    names = list(feature_names) if feature_names is not None else [f"x{i}" for i in range(X.shape[1])]
    with pm.Model(name=name, coords={"feature": names, "obs": np.arange(X.shape[0])}) as model:
        Xd = pm.Data("X", X, dims=("obs", "feature"))
        beta = pm.Normal("beta", 0.0, prior_sd, dims="feature")
        pm.Bernoulli("y", logit_p=Xd @ beta, observed=y, dims="obs")
    return model
