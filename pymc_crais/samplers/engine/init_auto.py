"""``init="auto"``: choose the initial distribution ``q0`` from cheap checks of a Laplace fit.

A Student-t at the Laplace fit shortens the annealing path enormously when it describes the
posterior, and is badly wrong when it does not (a funnel's mode runs off to a zero scale; a
start at one mode of a multimodal posterior silently misses the others). The choice, in
order, each step only when the previous ones passed:

1. the fit: L-BFGS converged to a finite, interior mode (no non-concave Hessian direction,
   no coordinate beyond :data:`MAX_ABS_COORDINATE`) — else the prior;
2. a mode search: short L-BFGS runs from :data:`N_STARTS` prior draws; a second distinct
   mode means a Student-t at each mode found, mixed with the prior (:func:`mode_mixture`,
   if its pilot weights allow, else the prior), unless one mode's Laplace mass exceeds every
   other's by more than ``MODE_MINOR`` nats and that pilot measures their shares at less
   than ``MODE_MINOR_SHARE`` in all (:func:`~pymc_crais.core.mode_mixture.dominant_mode`:
   step 3 at that mode); a higher density than the fit's mode means
   the prior (the first :data:`N_STARTS_STREAM` draws come from the run's generator, the
   others from a child generator, so the draws after the search are those of the 8-start
   search; where the 32 starts saw one mode cheaply, :data:`MORE_STARTS` more);
3. a pilot: Pareto k̂ of the importance weights of :data:`N_PILOT` draws of the Student-t
   against the posterior: at most 0.7, the Student-t; else a widened Student-t (scale ×
   :data:`WIDEN`, df :data:`WIDE_DF`) at most 0.7; else the start among the Student-t, the
   widened one and the prior whose weights have the smallest k̂ (k̂ > 0.7 of a Laplace
   start is common in high dimension and annealing from it is still right: Sonar, d = 60,
   k̂ 1.1–3.3; the prior's k̂ there is larger still).

Every model evaluation spent on the choice is counted (``n_logp_evals_laplace``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import solve_triangular

from ...core.defensive import DefensiveDraw, DefensiveMixtureDensity
from ...core.initial import StudentTInitial, laplace_fit, slope_problem
from ...core.mode_mixture import (
    StudentTMixture,
    component_shares,
    dominant_mode,
    mode_weights,
)
from ...core.mode_search import search_modes
from ...tail_stats import KHAT_THRESHOLD, pareto_khat

__all__ = [
    "MAX_ABS_COORDINATE",
    "MAX_MODES",
    "MODES_DEFENSIVE_WEIGHT",
    "MODES_KHAT",
    "MODE_NEGLIGIBLE",
    "MODE_SEPARATION",
    "MORE_STARTS",
    "MORE_STARTS_EVALS",
    "N_PILOT",
    "N_STARTS",
    "WIDEN",
    "WIDE_DF",
    "AutoChoice",
    "choose_initial",
    "defensive_start",
    "fit_problems",
    "mode_fits",
    "mode_mixture",
    "start_khat",
]

N_STARTS = 32
"""Short L-BFGS runs of the mode search. With 8 (the rule until 2026-11-24) a start far
out in the prior falls mostly into the widest component's basin: on the 3-component 10-d
mixture ``mixture3_d10`` the search saw one mode in 17 of 40 seeds and AIS was −1.34 nat
unflagged (seed 12); 32 starts saw several modes in 40 of 40, and no second mode on any of
the 27 unimodal suite cases it runs on (20 seeds each). A start costs 3–200 model
evaluations (0.3–13 ms; Sonar the most): ``benchmarks/mode_search.py``."""
MORE_STARTS = 32
"""Starts added to the mode search when its first :data:`N_STARTS` saw one mode and cost at
most :data:`MORE_STARTS_EVALS` model evaluations (the search then runs again from all
``N_STARTS + MORE_STARTS``). On ``mixture3_d10`` 32 starts saw one mode of three in 6 of
200 seeds (seed 71 of the suite: ``sample_smc`` −1.61 nats, unflagged), 64 in 1 of 200
(``benchmarks/mode_search.py --starts 32,48,64 --seeds 200``)."""
MORE_STARTS_EVALS = 1024
"""The most evaluations (32 a start on average) the first search may have spent for
:data:`MORE_STARTS` to be added: a start costs 4 evaluations on that mixture, 21–28 on Pima
and the eight schools, 198 on Sonar (23 ms, where 32 more would add 0.7 s to an 8 s run)."""
N_STARTS_STREAM = 8
"""Starts drawn from the run's own generator (the rest from a child of it)."""
START_MAXITER = 200
"""L-BFGS iterations per run of the mode search."""
LAPLACE_MAXITER = 500
"""L-BFGS iterations of the Laplace fit. A fit still climbing after them is taken as not
converged (no Laplace start): on the suite and the applied tier every fit that converged took
at most 455 (161 apart from the random-slopes funnel, ``benchmarks/laplace_iterations.py``, ``laplace_iterations-s11.txt``),
while the local level and the AR(1) climb their funnels' necks for all 2,000 of the old cap
(1.3 and 1.1 s of a 9 and 7 s run)."""
N_PILOT = 1000
"""Draws of each pilot batch whose weights' Pareto k̂ is measured."""
SCALE, DF = 1.2, 5.0
"""The Student-t at the fit: covariance × SCALE², DF degrees of freedom."""
WIDEN, WIDE_DF = 1.5, 3.0
"""The widened Student-t: scale × WIDEN more, WIDE_DF degrees of freedom."""
MAX_ABS_COORDINATE = 1e3
"""A mode coordinate beyond this (unconstrained space) is a scale running to 0 or ∞."""
GAIN_TOL = 0.5
"""A mode-search run ending this many nats above the fit's mode: the fit is not the top."""
MAX_MODES = 8
"""The most modes a mode-mixture start covers (more: the prior)."""
MODE_SEPARATION = 3.0
"""Whitened distance, in a fitted mode's own metric, within which an end is that mode."""
MODE_NEGLIGIBLE = 20.0
"""Nats below the largest Laplace mass beyond which a fitted mode gets no component."""
MODES_DEFENSIVE_WEIGHT = 0.5
"""The prior's share of the mode-mixture start."""
MODES_KHAT = KHAT_THRESHOLD
"""The mode-mixture start is kept when its pilot weights' Pareto k̂ is at most this."""


@dataclass
class AutoChoice:
    """The chosen start: ``choice`` (``"laplace"``, ``"laplace_wide"``, ``"modes"`` or
    ``"prior"``), its ``q0`` (``None`` for the prior), why, the output attributes and the
    evaluations spent."""

    choice: str
    reason: str
    q0: StudentTInitial | StudentTMixture | None
    attrs: dict = field(default_factory=dict)
    n_evals: int = 0
    start: tuple | None = None
    """``(density, draw)`` of a defensive mixture of ``q0`` with the prior, when the start is
    one (``None``: ``q0`` alone)."""


def khat(log_w) -> float:
    """k̂ of a pilot's log-weights; ``inf`` when fewer than 25 are finite, 0 when all equal."""
    lw = np.asarray(log_w, dtype=np.float64)
    if np.sum(np.isfinite(lw)) < 25:
        return float("inf")
    k = pareto_khat(lw)
    return 0.0 if np.isnan(k) else float(k)


def gradient_for_values(model_density) -> bool:
    """Whether a pilot's values should come from the gradient function: when the
    values-only one is not compiled yet (a gradient kernel never needs it: compiling it for
    a pilot of 1000 draws cost more than the pilot, 0.2–0.5 s)."""
    return bool(model_density.has_gradient and not model_density.value_function_compiled)


def _values(model_density, x):
    """``(log prior, ℓ)`` of the pilot draws (:func:`gradient_for_values`)."""
    return model_density.evaluate(x, gradient=gradient_for_values(model_density))


def pilot_khat(model_density, q0, rng, n) -> float:
    """Pareto k̂ of the importance weights of ``n`` draws of ``q0`` against the model's
    posterior (``inf`` when fewer than 25 are finite)."""
    x = q0.draw(rng, n)
    ev = _values(model_density, x)
    with np.errstate(invalid="ignore"):
        return khat(ev.log_q0 + ev.delta - q0.logpdf(x))


def fit_problems(fit) -> list[str]:
    """Why a Laplace fit is no usable Gaussian (empty: usable): not converged, stopped where
    the log-density still rises (:func:`~pymc_crais.core.initial.slope_problem`), a mode or
    covariance that is not finite, a coordinate beyond :data:`MAX_ABS_COORDINATE`, or a
    non-concave Hessian direction."""
    out = []
    if not fit.converged:
        out.append("the optimizer did not converge")
    elif problem := slope_problem(fit.slope):
        out.append(problem)
    if not (np.isfinite(fit.log_density_at_mode) and np.all(np.isfinite(fit.mode))):
        out.append("the mode is not finite")
    elif np.max(np.abs(fit.mode)) > MAX_ABS_COORDINATE:
        out.append(f"a mode coordinate ran off to {np.max(np.abs(fit.mode)):.3g}")
    if not np.all(np.isfinite(fit.cov)):
        out.append("the Hessian at the mode is flat (an infinite variance)")
    if fit.n_nonconcave > 0:
        out.append(
            f"the Hessian has {fit.n_nonconcave} non-concave direction(s) (no interior mode: "
            "a funnel, a boundary or a ridge)"
        )
    return out


def choose_initial(
    model_density, x0, prior, rng: np.random.Generator, *, at_modes: bool = True
) -> AutoChoice:
    """The automatic start for a model (see the module docstring for the rule).

    Parameters
    ----------
    model_density : ModelDensity
        ``(log prior, ℓ)`` with gradients; its ``n_evals`` counts what the choice spends.
    x0 : numpy.ndarray, shape (d,)
        Starting point of the Laplace fit (the model's initial point).
    prior : PriorSampler
        Draws of the (proper) prior: starts of the mode search, a pilot, the fallback.
    rng : numpy.random.Generator
    at_modes : bool, default True
        Whether several modes found give the mode-mixture start (else the prior).

    Returns
    -------
    AutoChoice
    """
    before = model_density.n_evals
    attrs = {
        "init": "auto",
        "init_n_modes": np.nan,
        "init_pareto_k": np.nan,
        "init_pareto_k_wide": np.nan,
        "init_pareto_k_prior": np.nan,
    }

    def done(choice, reason, q0=None, start=None):
        n = int(model_density.n_evals - before)
        attrs.update(init_choice=choice, init_reason=reason, n_logp_evals_laplace=n)
        if isinstance(q0, StudentTMixture):
            attrs.update(init_family="student_t_mixture", init_scale=SCALE, init_df=DF,
                         init_defensive_weight=MODES_DEFENSIVE_WEIGHT)  # fmt: skip
        elif q0 is not None:
            scale = SCALE if choice == "laplace" else SCALE * WIDEN
            attrs.update(init_family="student_t", init_scale=scale, init_df=float(q0.df))
        return AutoChoice(choice, reason, q0, attrs, n, start)

    if not model_density.has_gradient:
        return done("prior", "the model's gradient could not be compiled (no Laplace fit)")
    try:
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            fit = laplace_fit(model_density, x0, maxiter=LAPLACE_MAXITER)
    except FloatingPointError:
        return done("prior", "the Hessian at the mode is not finite")
    attrs.update(laplace_converged=fit.converged, laplace_n_nonconcave=fit.n_nonconcave,
                 laplace_slope=fit.slope, laplace_log_evidence=fit.log_evidence())  # fmt: skip
    problems = fit_problems(fit)
    if problems:
        return done("prior", "; ".join(problems))
    child = rng.spawn(1)[0]
    starts = np.concatenate(
        [prior.draw(rng, N_STARTS_STREAM), prior.draw(child, N_STARTS - N_STARTS_STREAM)]
    )
    search = search_modes(model_density, starts, fit, maxiter=START_MAXITER)
    if (search.n_modes == 1 and search.max_gain <= GAIN_TOL
            and search.n_evals <= MORE_STARTS_EVALS):  # fmt: skip
        # cheap starts: more of them (the first ones again, then new draws of the child)
        starts = np.concatenate([starts, prior.draw(child, MORE_STARTS)])
        search = search_modes(model_density, starts, fit, maxiter=START_MAXITER)
    attrs["init_n_modes"] = search.n_modes
    attrs["init_mode_starts"] = len(starts)
    minor = ""
    if search.n_modes > 1:
        found = f"{search.n_modes} distinct modes found from {len(starts)} starts"
        if not at_modes:
            return done("prior", found)
        fits, why = mode_fits(model_density, search.ends, search.end_log_densities, fit)
        q0, start, why, shares = mode_mixture(model_density, fits, why, prior, rng, attrs)
        # (shares measured by a pilot whose weights passed its k̂ test only)
        main, rest, minor = dominant_mode(fits, None if q0 is None else shares)
        if main is None:
            if q0 is None:
                return done("prior", f"{found}; {why}")
            return done("modes", f"{found}; {why}", q0, start)
        # one mode holds all but a negligible share: the start of a unimodal posterior, at it
        n_fitted = attrs.pop("init_n_modes_fitted")
        attrs.update(init_n_modes=1, init_n_modes_found=search.n_modes,
                     init_minor_modes=n_fitted - 1, init_minor_modes_share=rest,
                     laplace_converged=main.converged, laplace_n_nonconcave=main.n_nonconcave,
                     laplace_slope=main.slope, laplace_log_evidence=main.log_evidence())
        minor = f"{found}, {minor}; "
        fit = main
    elif search.max_gain > GAIN_TOL:
        return done("prior", f"a run from a prior draw ended {search.max_gain:.3g} nats "
                    "above the fitted mode (several modes)")  # fmt: skip
    t = StudentTInitial(fit.mode, fit.cov * SCALE**2, df=DF)
    wide = StudentTInitial(fit.mode, fit.cov * (SCALE * WIDEN) ** 2, df=WIDE_DF)
    k_t = pilot_khat(model_density, t, rng, N_PILOT)
    attrs["init_pareto_k"] = k_t
    if k_t <= KHAT_THRESHOLD:
        return done("laplace", f"{minor}the Student-t's pilot weights have k̂ {k_t:.2f} <= 0.7", t)
    k_w = pilot_khat(model_density, wide, rng, N_PILOT)
    attrs["init_pareto_k_wide"] = k_w
    if k_w <= KHAT_THRESHOLD:
        why = f"{minor}the Student-t's k̂ is {k_t:.2f}; widened: {k_w:.2f} <= 0.7"
        return done("laplace_wide", why, wide)
    x = prior.draw(rng, N_PILOT)
    k_p = khat(_values(model_density, x).delta)
    attrs["init_pareto_k_prior"] = k_p
    ks = f"k̂ {k_t:.2f} (Student-t), {k_w:.2f} (widened), {k_p:.2f} (prior)"
    if k_p <= min(k_t, k_w):
        return done("prior", f"{minor}the prior's pilot weights have the smallest {ks}")
    if k_t <= k_w:
        return done("laplace", f"{minor}the Student-t's pilot weights have the smallest {ks}", t)
    why = f"{minor}the widened Student-t's pilot weights have the smallest {ks}"
    return done("laplace_wide", why, wide)




def mode_fits(model_density, ends, log_densities, first_fit=None):
    """Laplace fits at the distinct modes among a mode search's ``ends`` (their
    ``log_densities`` given), highest first: ``(fits, why)``, ``fits`` ``None`` when one is
    no usable Gaussian or there are more than :data:`MAX_MODES`. Ends are taken in order of
    their density; one within whitened distance :data:`MODE_SEPARATION` of a mode already
    fitted, in that mode's own metric, is that mode. (The search judges distinctness in the
    first fit's metric, which is wide when that fit is a saddle-like point between modes: a
    label-switching mixture's two copies then count as one.) ``first_fit``, the fit at
    ``ends[0]``, is reused. Modes whose Laplace mass is more than :data:`MODE_NEGLIGIBLE`
    nats below the largest are left out (a share below ``e^-20``)."""
    order = np.argsort(-np.asarray(log_densities, dtype=np.float64), kind="stable")
    fits, chols = [], []

    def known(x):
        return any(
            np.linalg.norm(solve_triangular(c, x - f.mode, lower=True)) <= MODE_SEPARATION
            for f, c in zip(fits, chols)
        )

    for i in order:
        if known(ends[i]):
            continue
        fit = first_fit if i == 0 and first_fit is not None else None
        if fit is None:
            with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
                try:
                    fit = laplace_fit(model_density, ends[i])
                except FloatingPointError:
                    return None, "a mode's Hessian is not finite"
        if problems := fit_problems(fit):
            return None, f"a mode's Laplace fit failed ({problems[0]})"
        if known(fit.mode):
            continue
        if len(fits) == MAX_MODES:
            return None, f"more than {MAX_MODES} modes"
        fits.append(fit)
        chols.append(np.linalg.cholesky(fit.cov))
    masses = np.array([f.log_evidence() for f in fits])
    return [f for f, m in zip(fits, masses) if m >= masses.max() - MODE_NEGLIGIBLE], ""


def mode_mixture(model_density, fits, why, prior, rng, attrs):
    """The mode-mixture start (:mod:`pymc_crais.core.mode_mixture`) for the modes a search
    found: ``(q0, (density, draw), why, shares)``, ``q0`` ``None`` when the prior stays,
    ``shares`` each mode's share of the mass measured by the pilot
    (:func:`~pymc_crais.core.mode_mixture.component_shares`; ``None`` without fits). A Student-t
    at each of the fits of :func:`mode_fits` (``fits`` and ``why``, its result), weighted by
    :func:`~pymc_crais.core.mode_mixture.mode_weights`; kept
    if the weights of :data:`N_PILOT` draws of its defensive mixture with the prior
    (:data:`MODES_DEFENSIVE_WEIGHT`) have Pareto k̂ at most :data:`MODES_KHAT` (a mode the
    search missed shows there when the prior's draws reach it)."""
    if fits is None:
        return None, None, f"{why}: the prior", None
    attrs["init_n_modes_fitted"] = len(fits)
    comps = tuple(StudentTInitial(f.mode, f.cov * SCALE**2, df=DF) for f in fits)
    q0 = StudentTMixture(comps, mode_weights([f.log_evidence() for f in fits]))
    start = defensive_start(model_density, q0, prior.draw, MODES_DEFENSIVE_WEIGHT)
    x, ev = start_pilot(start, model_density, rng, N_PILOT)
    k = khat(ev.delta)
    attrs["init_pareto_k_modes"] = k
    shares = component_shares(q0, x, ev.log_q0, ev.delta, 1.0 - MODES_DEFENSIVE_WEIGHT)
    n = f"a Student-t at each of the {len(fits)} modes refitted in their own metrics"
    if k > MODES_KHAT:
        why = f"{n}: its pilot weights have k̂ {k:.2f} > {MODES_KHAT}: the prior"
        return None, None, why, shares
    return q0, start, f"{n}, mixed with the prior (pilot weights' k̂ {k:.2f})", shares


def defensive_start(model_density, q0, prior_draw, weight):
    """``(density, draw)`` of the defensive mixture ``(1 − weight)·q0 + weight·prior``
    (:mod:`pymc_crais.core.defensive`) over the model's ``(log prior, ℓ)``."""
    density = DefensiveMixtureDensity(q0.dim, base=model_density, initial=q0, weight=weight)
    return density, DefensiveDraw(q0, prior_draw, weight)


def start_pilot(start, model_density, rng, n):
    """``n`` draws of a ``(density, draw)`` start and their evaluation (``delta``: the
    importance log-weights against the posterior)."""
    density, draw = start
    x = draw(rng, n)
    return x, density.evaluate(x, gradient=gradient_for_values(model_density))


def start_khat(start, model_density, rng, n) -> float:
    """Pareto k̂ of the importance weights of ``n`` draws of a ``(density, draw)`` start
    against the posterior (:func:`start_pilot`)."""
    return khat(start_pilot(start, model_density, rng, n)[1].delta)
