"""Name the model term behind a failure: a ``+inf`` log-density or impossible data.

The samplers see one summed log-density. When it is ``+inf`` somewhere (an improper or
broken term) or every initial particle has zero weight (data impossible under the prior),
:func:`explain_model_errors` evaluates each term of the model — each free variable's prior,
each observed variable, each ``Potential`` — at the offending particles and at draws from
the prior, and raises :class:`ImpossibleModelError` naming the term. This runs only after a
failure, so it costs nothing otherwise.
"""

from __future__ import annotations

import contextlib
import numbers

import numpy as np

from .reproducible import with_pytensor_lock

__all__ = ["ImpossibleModelError", "check_seed", "explain_model_errors", "term_log_densities"]

N_PRIOR_POINTS = 64


class ImpossibleModelError(ValueError):
    """The model cannot have a finite, positive evidence: a term's log-density is ``+inf``
    somewhere, or an observed term (or Potential) is ``-inf`` at every parameter value
    tried. The message names the term."""


def check_seed(random_seed) -> None:
    """Refuse negative integer seeds, naming the argument."""
    seeds = []
    if isinstance(random_seed, numbers.Integral) and not isinstance(random_seed, bool):
        seeds = [random_seed]
    elif isinstance(random_seed, list | tuple | np.ndarray):
        seeds = [s for s in np.ravel(random_seed) if isinstance(s, numbers.Integral)]
    bad = [int(s) for s in seeds if s < 0]
    if bad:
        raise ValueError(
            f"random_seed must be a non-negative integer (or None, a sequence of "
            f"non-negative integers, a SeedSequence or a Generator), got {random_seed!r}; "
            "use e.g. random_seed=1"
        )


def _terms(model) -> list[tuple[str, str, object]]:
    out = [("free variable (prior)", rv.name, rv) for rv in model.free_RVs]
    out += [("observed variable", rv.name, rv) for rv in model.observed_RVs]
    out += [("Potential", pot.name or "<unnamed>", pot) for pot in model.potentials]
    return out


@with_pytensor_lock
def term_log_densities(model, points: np.ndarray) -> tuple[list, np.ndarray]:
    """Each term's log-density at each point: ``(terms, values)`` of shape
    ``(n_terms, n_points)``; terms are ``(kind, name)``; points in unconstrained space."""
    from .compile import parameter_layout

    layout = parameter_layout(model)
    terms = _terms(model)
    outs = [model.logp(vars=[t[2]], jacobian=True, sum=True) for t in terms]
    fn = model.compile_fn(outs, inputs=model.value_vars, point_fn=True, mode="FAST_COMPILE")
    values = np.full((len(terms), len(points)), np.nan)
    for j, x in enumerate(np.atleast_2d(points)):
        point = {}
        for s in layout.slots:
            v = x[s.start : s.stop].reshape(s.shape)
            point[s.name] = np.round(v).astype(s.dtype) if s.discrete else v.astype(s.dtype)
        with np.errstate(all="ignore"):
            values[:, j] = [float(np.asarray(o)) for o in fn(point)]
    return [(k, n) for k, n, _ in terms], values


@with_pytensor_lock
def _prior_points(model) -> np.ndarray:
    from .compile import initial_point_vector, parameter_layout
    from .prior import prior_sampler

    layout = parameter_layout(model)
    pts = [initial_point_vector(model, layout)[None, :]]
    with contextlib.suppress(Exception):
        pts.append(prior_sampler(model, layout, {}).draw(np.random.default_rng(0), N_PRIOR_POINTS))
    return np.concatenate(pts)


def _explanation(model, err: BaseException) -> str | None:
    text = str(err)
    infinite = "InfiniteDensityError" in text or "+inf" in text or hasattr(err, "points")
    pts = _prior_points(model)
    if getattr(err, "points", None) is not None:
        pts = np.concatenate([np.atleast_2d(err.points), pts])
    terms, values = term_log_densities(model, pts)
    if infinite:
        culprits = [
            f"{kind} {name!r}"
            for (kind, name), v in zip(terms, values, strict=True)
            if np.isposinf(v).any()
        ]
        if culprits:
            return (
                f"the model's log-density is +inf because of {', '.join(culprits)}: an "
                "improper or broken term (a density can be large but never infinite, e.g. a "
                "Potential returning +inf, or log(0) subtracted). Fix that term so that it is "
                "finite everywhere."
            )
        return None
    culprits = [
        f"{kind} {name!r}"
        for (kind, name), v in zip(terms, values, strict=True)
        if kind != "free variable (prior)" and not np.isfinite(v).any()
    ]
    if culprits:
        return (
            f"{', '.join(culprits)} has log-density -inf (or NaN) at every parameter value "
            f"tried (the initial point and {len(pts) - 1} draws from the prior): its data are "
            "impossible under the model (e.g. negative or non-integer counts in a Poisson "
            "likelihood, values outside the distribution's support). Check the observed "
            "data of that term."
        )
    return None


def _is_explainable(err: BaseException) -> bool:
    from ...core.anneal import WeightsVanishedError
    from ...core.density import InfiniteDensityError

    if isinstance(err, InfiniteDensityError):
        return True
    if isinstance(err, WeightsVanishedError):
        return err.stage == 0
    text = str(err)
    return (
        "InfiniteDensityError" in text
        or "vanished at stage 0" in text
        or (isinstance(err, FloatingPointError) and "Hessian" in text)
    )


@contextlib.contextmanager
def explain_model_errors(model=None):
    """Turn a ``+inf`` density or all-vanishing initial weights into an
    :class:`ImpossibleModelError` naming the model term (raised from the original)."""
    try:
        yield
    except (ValueError, FloatingPointError, RuntimeError) as err:
        if isinstance(err, ImpossibleModelError) or not _is_explainable(err):
            raise
        import pymc as pm

        try:
            m = pm.modelcontext(model)
            message = _explanation(m, err)
        except Exception:  # noqa: BLE001 - the check must never hide the original error
            message = None
        if message is None:
            raise
        raise ImpossibleModelError(message) from err
