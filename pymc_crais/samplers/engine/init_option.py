"""Initial distributions ``q0`` for a PyMC model: automatic (the default), the prior, a
Laplace fit, or a user Gaussian."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.density import BatchedDensity
from ...core.initial import GaussianInitial, InitialReweightedDensity, StudentTInitial, laplace_fit
from .compile import ModelDensity, initial_point_vector
from .init_auto import choose_initial
from .model_info import has_likelihood_terms
from .prior import PriorSampler

__all__ = ["INIT_CHOICES", "InitialSetup", "build_initial"]

INIT_CHOICES = ("auto", "prior", "laplace")


@dataclass
class InitialSetup:
    """What annealing from a chosen ``q0`` needs.

    Attributes
    ----------
    density : BatchedDensity
        Evaluates ``(log q0, Δ)`` with this ``q0``.
    draw : callable
        ``(rng, n) -> (n, d)`` exact draws from ``q0``.
    attrs : dict
        Description for the output (``init``, Laplace details...).
    n_evals : int
        Model evaluations spent building ``q0`` (the Laplace fit).
    """

    density: BatchedDensity
    draw: object
    attrs: dict
    n_evals: int = 0


class _GaussianDraw:
    def __init__(self, q0):
        self.q0 = q0

    def __call__(self, rng, n):
        return self.q0.draw(rng, n)


class _PriorDraw:
    def __init__(self, sampler: PriorSampler):
        self.sampler = sampler

    def __call__(self, rng, n):
        return self.sampler.draw(rng, n)


def build_initial(
    init,
    init_kwargs,
    model,
    model_density: ModelDensity,
    prior: PriorSampler | None,
    rng: np.random.Generator | None = None,
    *,
    mode_mixture: bool = True,
) -> InitialSetup:
    """Resolve the ``init=`` argument of the samplers.

    Parameters
    ----------
    init : "auto", "prior", "laplace", dict with ``mean`` and ``cov``, or GaussianInitial
        ``"auto"`` chooses between a Student-t at the Laplace fit, a widened one, a
        Student-t at each of several modes mixed with the prior, and the prior from a mode
        search and a pilot's Pareto k̂
        (:mod:`pymc_crais.samplers.engine.init_auto`; the prior for discrete variables).
        ``"laplace"`` fits the mode by L-BFGS on the batched log-density and the covariance
        from the Hessian, then uses a multivariate Student-t (default ``df=5``) or, with
        ``init_kwargs={"family": "gaussian"}``, a Gaussian, its covariance scaled by
        ``init_kwargs["scale"] ** 2`` (default 1.2²).
    init_kwargs : dict, optional
    model : pymc.Model
    model_density : ModelDensity
        The compiled ``(log prior, ℓ)`` density.
    prior : PriorSampler or None
        ``None`` only for an improper prior.
    rng : numpy.random.Generator, optional
        For ``"auto"``'s mode search and pilots.
    mode_mixture : bool, default True
        Whether ``"auto"`` may start at several modes found (else the prior there).
    """
    kw = dict(init_kwargs or {})
    layout = model_density.layout
    if isinstance(init, str) and init == "auto":
        return _auto_initial(kw, model, model_density, prior, rng, mode_mixture)
    if isinstance(init, str) and init == "prior":
        if kw:
            raise TypeError(f"init='prior' takes no init_kwargs, got {sorted(kw)}")
        return InitialSetup(model_density, _PriorDraw(prior), {"init": "prior"})
    if layout.has_discrete:
        raise ValueError(
            f"init={init!r} needs continuous variables but the model has discrete free "
            f"variables {layout.discrete_names}; use init='prior'"
        )
    if isinstance(init, str) and init == "laplace":
        unknown = set(kw) - {"df", "scale", "family"}
        if unknown:
            raise TypeError(f"init_kwargs {sorted(unknown)} are not understood; use df, scale, family")
        family = kw.get("family", "student_t")
        scale = float(kw.get("scale", 1.2))
        if not (np.isfinite(scale) and scale > 0):
            raise ValueError(f"init_kwargs['scale'] must be positive, got {scale}")
        if not model_density.has_gradient:
            raise ValueError("init='laplace' needs the model's gradient; it could not be compiled")
        fit = laplace_fit(model_density, initial_point_vector(model, layout))
        cov = fit.cov * scale**2
        if family == "student_t":
            q0 = StudentTInitial(fit.mode, cov, df=float(kw.get("df", 5.0)))
        elif family == "gaussian":
            q0 = GaussianInitial(fit.mode, cov)
        else:
            raise ValueError(f"init_kwargs['family'] must be 'student_t' or 'gaussian', got {family!r}")
        attrs = {
            "init": "laplace",
            "init_family": family,
            "init_scale": scale,
            "init_df": getattr(q0, "df", np.inf),
            "laplace_converged": fit.converged,
            "laplace_n_nonconcave": fit.n_nonconcave,
            "laplace_slope": fit.slope,
            "laplace_log_evidence": fit.log_evidence(),
            "n_logp_evals_laplace": fit.n_evals,
        }
        dens = InitialReweightedDensity(layout.dim, base=model_density, initial=q0)
        return InitialSetup(dens, _GaussianDraw(q0), attrs, fit.n_evals)
    if isinstance(init, dict):
        if set(init) != {"mean", "cov"}:
            raise ValueError("init as a dict must have exactly the keys 'mean' and 'cov'")
        init = GaussianInitial(init["mean"], init["cov"])
    if isinstance(init, GaussianInitial):
        if init.dim != layout.dim:
            raise ValueError(
                f"the initial distribution has dimension {init.dim} but the model has "
                f"{layout.dim} unconstrained coordinates (order: {[s.name for s in layout.slots]})"
            )
        dens = InitialReweightedDensity(layout.dim, base=model_density, initial=init)
        return InitialSetup(dens, _GaussianDraw(init), {"init": init.name})
    raise ValueError(
        f"init={init!r} is not understood; use 'auto', 'prior', 'laplace', a dict with 'mean' and "
        "'cov' (unconstrained coordinates) or a GaussianInitial / StudentTInitial"
    )


def _auto_initial(kw, model, model_density, prior, rng, mode_mixture=True) -> InitialSetup:
    if kw:
        raise TypeError(f"init='auto' takes no init_kwargs, got {sorted(kw)}; use init='laplace'")
    if prior is None:
        raise ValueError("init='auto' needs a proper prior; use init='laplace' or a Gaussian")
    layout = model_density.layout
    why = None
    if layout.has_discrete:
        why = "discrete free variables: no Laplace fit"
    elif not model_density.has_gradient:
        why = "no gradient: no Laplace fit"
    elif not has_likelihood_terms(model):
        why = "no likelihood: the prior is the posterior"
    if why:
        attrs = {"init": "auto", "init_choice": "prior", "init_reason": why}
        return InitialSetup(model_density, _PriorDraw(prior), attrs)
    rng = np.random.default_rng() if rng is None else rng
    x0 = initial_point_vector(model, layout)
    auto = choose_initial(model_density, x0, prior, rng, at_modes=mode_mixture)
    if auto.q0 is None:
        return InitialSetup(model_density, _PriorDraw(prior), auto.attrs, auto.n_evals)
    if auto.start is not None:
        return InitialSetup(*auto.start, auto.attrs, auto.n_evals)
    dens = InitialReweightedDensity(layout.dim, base=model_density, initial=auto.q0)
    return InitialSetup(dens, _GaussianDraw(auto.q0), auto.attrs, auto.n_evals)
