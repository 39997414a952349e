"""The ``path=`` option of ``sample_ais`` and ``sample_smc``: which path to anneal along.

``"geometric"`` (the default; with ``alpha != 0`` the power-mean path) or
``"moment_averaging"``: :class:`~pymc_crais.core.ma_path.MomentAveragingPath` from ``q0`` to
``G0`` (a Gaussian with ``q0``'s moments, from exact draws of ``q0``), by moment averaging
to ``G1`` (the Laplace fit of the posterior), then geometric to the posterior. The Laplace
fit's model evaluations are added to ``n_logp_evals_laplace``.

A Gaussian at one mode is a bad waypoint for a posterior with several modes (the geometric
leg from it cannot find the others: a silent miss) or with no interior mode (a funnel's
fit runs to a zero scale). So the fit is checked as ``init="auto"`` checks it — L-BFGS
converged to a finite, interior mode with a concave Hessian, and short L-BFGS runs from
:data:`N_STARTS` draws of ``q0`` find no other mode and no higher density — and if a check
fails (or ``init="auto"`` already rejected the fit) the run anneals along the geometric path
with a :class:`~pymc_crais.warnings.PathFallbackWarning` (``path_fallback_reason``).
"""

from __future__ import annotations

import warnings

import numpy as np

from ...core.initial import laplace_fit
from ...core.ma_path import MomentAveragingPath
from ...core.mode_search import search_modes
from ...core.paths import AnnealingPath, make_path
from ...warnings import PathFallbackWarning, user_stacklevel
from .compile import initial_point_vector
from .init_auto import GAIN_TOL, N_STARTS, START_MAXITER, fit_problems

__all__ = ["PATHS", "build_path", "check_path"]

PATHS = ("geometric", "moment_averaging")


def check_path(path, alpha, schedule, path_kwargs) -> tuple[str, dict]:
    """The ``path=`` argument and its ``path_kwargs``, checked before any compilation
    (``schedule``: the parsed schedule argument, a
    :class:`~pymc_crais.samplers.engine.schedule_option.ScheduleArg`)."""
    if not isinstance(path, str) or path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    kw = dict(path_kwargs or {})
    if path == "geometric":
        if kw:
            raise TypeError(f"path='geometric' takes no path_kwargs, got {sorted(kw)}")
        return path, kw
    if set(kw) - {"breaks"}:
        raise TypeError(f"path_kwargs {sorted(set(kw) - {'breaks'})} are not understood; use 'breaks'")
    if alpha != 0:
        raise ValueError(
            f"path='moment_averaging' has no power-mean exponent, got alpha={alpha!r}; use "
            "alpha=0, or path='geometric' with alpha for the power-mean path"
        )
    if schedule.constant_rate:
        raise ValueError(
            "path='moment_averaging' does not work with schedule='constant_rate' (the rule's "
            "statistics are those of the power-mean paths); use schedule='ess', 'cess' or a "
            "fixed schedule, or path='geometric'"
        )
    return path, kw


def _moments(setup, n_draws: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean and covariance of ``q0`` from exact draws (no model evaluation)."""
    x = setup.draw(setup.aux_rng.spawn(1)[0], n_draws)
    d = x.shape[1]
    cov = np.atleast_2d(np.cov(x, rowvar=False)).reshape(d, d)
    ridge = 1e-10 * max(float(np.trace(cov)) / d, 1e-300)
    return x.mean(axis=0), cov + ridge * np.eye(d)


def _fit_and_check(setup, base):
    """The Laplace fit and, if it is not a usable Gaussian, why (else ``None``)."""
    if setup.attrs.get("init_choice") in ("prior", "modes"):
        return None, f"init='auto' rejected the Laplace fit ({setup.attrs.get('init_reason')})"
    try:
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            fit = laplace_fit(base, initial_point_vector(setup.model, setup.layout))
    except FloatingPointError:
        return None, "the Hessian at the mode is not finite"
    problems = fit_problems(fit)  # the checks of init="auto"
    if problems:
        return fit, "the Laplace fit is no usable Gaussian: " + "; ".join(problems)
    starts = setup.draw(setup.aux_rng.spawn(1)[0], N_STARTS)
    search = search_modes(base, starts, fit, maxiter=START_MAXITER)
    if search.n_modes > 1 or search.max_gain > GAIN_TOL:
        return fit, f"several modes: {search.n_modes} found from {N_STARTS} starts"
    return fit, None


def build_path(setup, path: str, alpha: float, c: float, attrs: dict, path_kwargs: dict) -> AnnealingPath:
    """The run's path; for ``"moment_averaging"`` fits its two Gaussians (see the module).

    ``attrs`` gets ``path`` and, for moment averaging, the fit's description; raises a
    ``ValueError`` naming ``path`` when the model cannot have a Laplace fit.
    """
    if path == "geometric":
        return make_path(alpha, c)
    layout = setup.layout
    base = setup.model_density
    if layout.has_discrete or not getattr(base, "has_gradient", False):
        raise ValueError(
            "path='moment_averaging' needs a Laplace fit of the posterior: continuous "
            "variables and the model's gradient (a gradient kernel such as kernel='hmc', or "
            "init='auto' / 'laplace'); use path='geometric'"
        )
    before = base.n_evals
    fit, why = _fit_and_check(setup, base)
    n_fit = int(base.n_evals - before)
    attrs.update(
        path_n_logp_evals_fit=n_fit,
        n_logp_evals_laplace=int(attrs.get("n_logp_evals_laplace", 0)) + n_fit,
    )
    if why is not None:
        warnings.warn(
            f"path='moment_averaging' runs the geometric path instead: {why}",
            PathFallbackWarning,
            stacklevel=user_stacklevel(),
        )
        attrs.update(path="geometric", path_fallback_reason=why)
        return make_path(alpha, c)
    m0, s0 = _moments(setup, max(4000, 40 * layout.dim))
    ma = MomentAveragingPath(0.0, float(c), m0, s0, fit.mode, fit.cov, **path_kwargs)
    attrs.update(path=ma.name, path_description=ma.describe())
    return ma
