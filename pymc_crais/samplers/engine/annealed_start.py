"""CR-AIS's annealed start: where ``init="auto"`` finds no start close to the posterior,
a short SMC run finds one.

CR-AIS never resamples, so its cost grows with the distance from ``q0`` to the posterior:
from the prior of a centred hierarchical model (whose joint density has no interior mode,
so there is no Laplace fit) or from a Student-t at a mode whose importance weights have a
Pareto k̂ far above 0.7 (Sonar's logistic regressions), the constant-rate rule asks for the
longest run, 8–23 times SMC's cost at equal error, and still misses on hierarchical models
of 40–150 dimensions. SMC, which resamples, gets there at a fraction of that.

So when the start's own weights (:func:`~pymc_crais.samplers.engine.start_point.start_length_point`)
have k̂ above :data:`ANNEALED_START_KHAT`, ``init="auto"`` chose the start and the run's
length is automatic (``n_steps="auto"``, the default), CR-AIS first
runs :data:`PILOT_CHAINS` chains (one with ``chains=1``) of ``sample_smc``'s defaults (the ESS rule, resampling,
adaptive move counts) with CR-AIS's kernel and particles, from that start, and fits a
Student-t to their final particles (:func:`~pymc_crais.core.refit.student_t_from_draws`, the
posterior refit check's fit). CR-AIS then plans and runs from that Student-t as from any
start: its ``log Ẑ`` is its own run's, from fresh generators; the SMC run only chose ``q0``
(a normalized density), as the Laplace fit does otherwise, and its estimate is not used.
The new start is measured as the first was and kept only if its weights' k̂ is lower (the
choice uses run-level draws only). If an SMC chain fails, or one stops at its stage cap, the
first start is kept.

``sample_smc`` anneals to a start too (:func:`smc_annealed_start`), where ``init="auto"``
fell back to the prior because the Laplace fit failed (a centred hierarchical model's
funnel). From the prior such a run spends 10–18 stages, most of its cost, getting to the
posterior; from a start fitted there it needs 3–8. The pilot chains are smaller
(:func:`smc_pilot_particles`), and the start is a defensive mixture
(:class:`~pymc_crais.core.defensive.DefensiveMixtureDensity`): the fitted Student-t with
weight ``1 − ε`` and the prior with weight :data:`DEFENSIVE_WEIGHT`, so that a funnel's neck
the pilot did not reach is still covered as the prior covers it. With the Student-t alone
``hier_centered`` came out 0.15 nat low at 5 MCSE, unflagged (seed 47); with the mixture,
right. The mixture is kept only when its weights' k̂ is below :data:`SMC_START_KHAT`.
"""

from __future__ import annotations

import copy
import math

import numpy as np

from ...core.paths import make_path
from ...core.refit import shrunk_covariance, student_t_from_draws
from ...tail_stats import KHAT_INFINITE_MEAN
from .anneal_chain import run_anneal_chains
from .init_auto import DF, SCALE, WIDE_DF, WIDEN, defensive_start, start_khat
from .options import is_auto
from .posterior_refit import restart_setup
from .runner import ChainFailedError
from .smc_settings import SMCSettings
from .staged import PILOT_CALLS, costly
from .start_point import StartPoint, start_length_point

__all__ = [
    "ANNEALED_START_KHAT",
    "CRAIS_FIT_SHRINK",
    "CRAIS_PILOT_FRACTION",
    "CRAIS_PILOT_MAX_TRANSITIONS",
    "DEFENSIVE_WEIGHT",
    "PILOT_CHAINS",
    "SMC_FIT_SHRINK",
    "SMC_MIN_PILOT_STAGES",
    "SMC_PILOT_FRACTION",
    "SMC_PILOT_MAX_TRANSITIONS",
    "SMC_START_DRAWS",
    "SMC_START_KHAT",
    "anneal_if_far",
    "annealed_start",
    "needs_annealed_start",
    "smc_annealed_start",
    "smc_needs_annealed_start",
    "smc_pilot",
    "smc_pilot_particles",
]

CRAIS_PILOT_FRACTION = None
"""CR-AIS's pilot chains: particles a chain as a fraction of ``draws`` (``None``: ``draws``).
Smaller pilots were measured and not adopted (see :data:`CRAIS_PILOT_MAX_TRANSITIONS`)."""
CRAIS_PILOT_MAX_TRANSITIONS = None
"""CR-AIS's pilot chains: transitions a stage at most (``None``: ``sample_smc``'s 20).

Not changed, after ``benchmarks/pilot_fit.py --sampler crais`` (seeds 41–43,
``benchmarks/out/pilot_fit-crais-s9.jsonl``). With half the particles, 10 transitions and
the shrunk fit, whole runs took 14–16 s instead of 27–31 s on
``applied_multilevel_logistic`` and 10–11 s instead of 22–28 s on ``applied_random_slopes``,
as precise; but ``applied_hier60_centred``'s MCSE rose to 0.020–0.051 (0.016–0.037), and
on ``sonar_sd5`` the start's k̂ rose to 1.31–1.61 (0.70–1.08) and the MCSE to 0.022–0.027
(0.009–0.012): per unit of error (MCSE² × wall time) a loss on both. With all the particles,
the cap and the shrunk fit, ``sonar_sd5`` still lost precision (0.015–0.019), so the shrunk
fit, not the cap, costs it there: the Student-t needs the posterior's real correlations,
and CR-AIS's final run, unlike ``sample_smc``'s, does not temper a misfit away."""
CRAIS_FIT_SHRINK = False
"""Whether CR-AIS's annealed start fits its Student-t with shrunk correlations
(:func:`~pymc_crais.core.refit.shrunk_covariance`, as :data:`SMC_FIT_SHRINK`); off, see
:data:`CRAIS_PILOT_MAX_TRANSITIONS`."""
ANNEALED_START_KHAT = 0.7
"""Pareto k̂ of the start's importance weights above which CR-AIS anneals to a start."""
PILOT_CHAINS = 2
"""SMC chains of the annealed start (CR-AIS's with the run's ``draws`` particles each,
``sample_smc``'s with :func:`smc_pilot_particles`)."""
ANNEALED_REASON = (
    f"the start's importance weights had Pareto k-hat above {ANNEALED_START_KHAT}: a "
    "Student-t fitted to the final particles of SMC chains run from it (annealed_start)"
)


def needs_annealed_start(setup, start_attrs: dict) -> bool:
    """Whether CR-AIS should find its start by SMC: ``init="auto"`` (a start the user
    chose is kept), continuous variables, and the start's weights with k̂ above
    :data:`ANNEALED_START_KHAT` (or not measured)."""
    init = setup.options.init
    if not (isinstance(init, str) and is_auto(init)) or setup.layout.has_discrete:
        return False
    k = float(start_attrs.get("start_pareto_k", np.nan))
    return not k <= ANNEALED_START_KHAT


def anneal_if_far(setup, start: StartPoint, target_mcse: float):
    """CR-AIS's start after step 0: ``(setup, start, attrs)``.

    ``start`` is the measured first start. When it does not meet ``target_mcse`` and
    :func:`needs_annealed_start`, the SMC chains run (:func:`annealed_start`) and their
    Student-t, measured the same way, replaces it if its weights' k̂ is lower (both
    measurements use run-level draws only). ``attrs`` records it, with
    ``n_logp_evals_start`` counting both measurements and the SMC chains; empty when nothing
    was tried.
    """
    if start.meets(target_mcse) or not needs_annealed_start(setup, start.attrs):
        return setup, start, {}
    new_setup, attrs = annealed_start(setup)
    first_k = float(start.attrs["start_pareto_k"])
    attrs["init_first_pareto_k"] = first_k
    spent = start.attrs["n_logp_evals_start"] + attrs["n_logp_evals_annealed_start"]
    if attrs["init_annealed"]:
        new = start_length_point(new_setup)
        spent += new.attrs["n_logp_evals_start"]
        attrs["init_annealed_pareto_k"] = float(new.attrs["start_pareto_k"])
        if not attrs["init_annealed_pareto_k"] >= first_k:
            first_choice = setup.attrs.get("init_choice", "")
            setup, start = new_setup, new
            attrs.update(init_choice="annealed", init_reason=ANNEALED_REASON,
                         init_first_choice=first_choice, init_family="student_t",
                         init_scale=SCALE, init_df=DF)  # fmt: skip
        else:
            attrs["init_annealed"] = False
    attrs["n_logp_evals_start"] = spent
    return setup, start, attrs


def smc_pilot(setup, particles: int | None = None, max_transitions: int | None = None):
    """Run :data:`PILOT_CHAINS` SMC chains with ``sample_smc``'s defaults from ``setup``'s
    start, ``particles`` each (default: the run's ``draws``), at most ``max_transitions``
    transitions a stage (default: ``sample_smc``'s), their generators children of
    the run-level one. Returns ``(draws or None, attrs)``: the chains' final particles,
    pooled, or ``None`` when they cannot describe the posterior (a chain failed, has no
    finite ``log Ẑ`` or stopped at its stage cap, so it ends at a tempered target)."""
    cap = {} if max_transitions is None else {"max_mcmc_steps": int(max_transitions)}
    settings = SMCSettings.from_kwargs(cap)  # sample_smc's defaults otherwise
    schedule = settings.schedule.build(
        None, None, settings.threshold, settings.max_step, settings.min_step
    )
    pilot = copy.copy(setup)
    pilot.chains = min(PILOT_CHAINS, setup.chains)
    pilot.chain_rngs = list(setup.aux_rng.spawn(pilot.chains))
    pilot.cores = min(setup.cores, pilot.chains)
    if particles is not None:
        pilot.draws = int(particles)
    before = setup.model_density.n_evals
    attrs = {"init_annealed": False, "init_annealed_chains": int(pilot.chains),
             "init_annealed_particles": int(pilot.draws)}  # fmt: skip
    if costly(setup.model_density.numpy_cost, pilot.draws, PILOT_CALLS):  # from the prior
        setup.model_density.spend_setup_budget(setup.kernel.needs_gradient)
    try:
        chains, seconds = run_anneal_chains(
            pilot, make_path(0.0, 0.0), schedule, "start (SMC)", settings.anneal_options()
        )
    except ChainFailedError as err:  # keep the first start; the final run will say more
        attrs.update(
            init_annealed_failed=f"{type(err).__name__}: {err}"[:300],
            n_logp_evals_annealed_start=int(setup.model_density.n_evals - before),
        )
        return None, attrs
    attrs.update(
        init_annealed_stages=int(max(c.n_stages for c in chains)),
        init_annealed_seconds=float(seconds),
        n_logp_evals_annealed_start=int(sum(c.n_logp_evals for c in chains)),
    )
    lz = np.array([c.log_marginal_likelihood for c in chains], dtype=np.float64)
    if not np.all(np.isfinite(lz)) or any(c.hit_max_steps for c in chains):
        return None, attrs
    return np.concatenate([c.x for c in chains]), attrs


def annealed_start(setup):
    """Run the SMC chains from ``setup``'s start (:func:`smc_pilot`) and fit the Student-t
    to their particles.

    Returns ``(new_setup, attrs)``: ``setup`` with the Student-t as its start (its chain
    generators unchanged), and the attributes that record it; ``(setup, attrs)`` when nothing
    could be fitted (see :func:`smc_pilot`; draws without a positive-definite covariance).
    """
    fraction = CRAIS_PILOT_FRACTION
    particles = None if fraction is None else smc_pilot_particles(setup.draws, fraction)
    draws, attrs = smc_pilot(setup, particles, CRAIS_PILOT_MAX_TRANSITIONS)
    proposal = None
    if draws is not None:
        proposal = student_t_from_draws(draws, scale=SCALE, df=DF, shrink=CRAIS_FIT_SHRINK)
    if proposal is not None and CRAIS_FIT_SHRINK:
        attrs["init_annealed_shrinkage"] = _shrinkage(draws)
    if proposal is None:
        return setup, attrs
    attrs["init_annealed"] = True
    return restart_setup(setup, proposal, setup.chain_rngs), attrs


SMC_PILOT_FRACTION = 0.25
"""``sample_smc``'s annealed start: particles per pilot chain as a fraction of ``draws``."""
SMC_PILOT_MAX_TRANSITIONS = 10
"""Transitions a stage at most in ``sample_smc``'s pilot chains (``sample_smc``'s own cap is
20). The pilot only has to bring its particles near enough the posterior for a Student-t
fitted to them to cover it; from the prior of a funnel its first stages spent the whole
cap without decorrelating. With :data:`SMC_FIT_SHRINK`, on ``applied_hier60_centred`` at
seeds 41–46 the pilot's evaluations fell from 1.15–1.27 M to 0.63–0.74 M, the start's k̂
was 0.54–0.74 (0.56–1.28 before), and no seed fell back to the prior (2 of 6 did before,
at 49–50 s instead of 8–11 s): ``benchmarks/pilot_fit.py``,
``benchmarks/out/pilot_fit-s9-final.jsonl`` and ``pilot_fit-s9.jsonl``."""
SMC_FIT_SHRINK = True
"""Whether ``sample_smc``'s annealed start fits its Student-t with the correlations shrunk
(:func:`~pymc_crais.core.refit.shrunk_covariance`, the intensity recorded as
``init_annealed_shrinkage``): 1,000 pilot draws in 62 dimensions give correlations noisy
enough that the fitted start's weights had k̂ above 1 at some seeds (with the cap alone,
k̂ 0.56–1.11 at seeds 31–38 against 0.50–0.96 with the shrunk fit, in an exploratory run
with the formula's first version, ``benchmarks/out/pilot_explore-s9.jsonl``)."""
SMC_MIN_PILOT_STAGES = 8
"""``sample_smc``'s annealed start is used only when the pilot chains took at least this
many stages from the prior. A short path means the data move the posterior little from
the prior, so a funnel's neck keeps much of its mass; there the start from the mixture
was less precise than the prior's (``hier_centered``, 5–6 pilot stages, seeds
1000–1011: 6 of 12 runs flagged, error SD 0.078 nat, against 2 of 12 and 0.055 from the
prior; ``benchmarks/out/coverage_s6_hier_centered_mixture_nostagegate.jsonl`` and
``coverage_s6_hier_centered_prior.jsonl``, the former measured with 1,000 draws for k̂)
and saves little, since a run from a fitted start needs 2–8 stages itself. The applied
tier's hierarchical models take 9–18."""
SMC_START_KHAT = KHAT_INFINITE_MEAN
"""``sample_smc``'s annealed start is kept when its weights' Pareto k̂ is below this: their
mean is finite (k̂ < 1), so the start covers the posterior's mass, if with a heavy tail
that the run's stages then temper. In 60 and more dimensions a Student-t fitted to draws
rarely reaches k̂ ≤ 0.7 (``applied_hier60_centred``: 0.61–0.95 at seeds 6 and 1000–1004,
and right from it). Where it is above 1 the start missed a region and the prior stays:
the latent AR(1) 1.54–5.42, the local level 2.11–3.04, the 302-d regression 4.47–10.7 at
the same seeds (``benchmarks/out/validate-s6-mixture-nogate-seed6.json``: from the mixture
the AR(1) came out 0.49 nat low with an MCSE of 0.044, its only flag one chain's k̂ 0.74)."""
SMC_START_DRAWS = 2000
"""Draws of the mixture whose weights' k̂ is measured (half of them from the prior, whose
weights are mostly negligible: twice ``init="auto"``'s pilot of 1,000 Student-t draws)."""
DEFENSIVE_WEIGHT = 0.5
"""Weight of the prior in ``sample_smc``'s annealed start (a defensive mixture)."""
SMC_ANNEALED_REASON = (
    "the Laplace fit failed, so the start was to be the prior; smaller SMC chains ran from "
    "it, and the start is a Student-t fitted to their particles mixed with the prior "
    f"(weight {DEFENSIVE_WEIGHT}), whose importance weights have Pareto k-hat below "
    f"{SMC_START_KHAT} (annealed_start)"
)


def smc_pilot_particles(draws: int, fraction: float | None = None) -> int:
    """Particles per chain of ``sample_smc``'s annealed start: ``fraction`` (default
    :data:`SMC_PILOT_FRACTION`) of ``draws``, at least 100, at most ``draws``. (Above 150
    dimensions the HMC kernel's metric is then diagonal; with ``4·d`` particles, enough for
    the dense one, the start kept the prior all the same where it was tried — the local
    level, the 302-d regression at seed 6 — and the 302-d regression's pilot took 70 s
    instead of 11.)"""
    fraction = SMC_PILOT_FRACTION if fraction is None else fraction
    return int(min(draws, max(math.ceil(draws * fraction), 100)))


def smc_needs_annealed_start(setup) -> bool:
    """Whether ``sample_smc`` should look for a start by a smaller SMC run: ``init="auto"``
    fell back to the prior because the Laplace fit failed (a funnel, a boundary or a ridge:
    ``init_n_modes`` is NaN, no mode search ran; a prior chosen because the search found
    several modes is kept), the variables are continuous and the model has a gradient."""
    a = setup.attrs
    return bool(
        a.get("init") == "auto"
        and a.get("init_choice") == "prior"
        and np.isnan(float(a.get("init_n_modes", 0.0)))
        and not setup.layout.has_discrete
        and setup.model_density.has_gradient
    )


def smc_annealed_start(setup):
    """``sample_smc``'s start when :func:`smc_needs_annealed_start`: ``(setup, attrs)``.

    :data:`PILOT_CHAINS` SMC chains of :func:`smc_pilot_particles` particles each run from
    the prior (:func:`smc_pilot`); if they took at least :data:`SMC_MIN_PILOT_STAGES`
    stages, a Student-t fitted to their particles (scale × ``SCALE``,
    ``DF``; then widened, × ``WIDEN``, ``WIDE_DF``), mixed with the prior, becomes the start
    if :data:`SMC_START_DRAWS` of its draws have importance weights against the posterior with
    Pareto k̂ below :data:`SMC_START_KHAT` (draws from a child of the run-level generator).
    Otherwise the prior stays: from a start that misses part of the posterior (a funnel's
    neck the small run did not reach) a short run is precise and wrong; from the prior the
    same run shows its error. ``attrs`` records what was tried (empty when nothing was);
    the run's ``log Ẑ`` is its own chains', from their own generators.
    """
    if not smc_needs_annealed_start(setup):
        return setup, {}
    draws, attrs = smc_pilot(setup, smc_pilot_particles(setup.draws), SMC_PILOT_MAX_TRANSITIONS)
    if attrs.get("init_annealed_stages", 0) < SMC_MIN_PILOT_STAGES:
        draws = None  # a short path from the prior: it stays (see SMC_MIN_PILOT_STAGES)
    start, spent = _smc_fit(setup, draws, attrs)
    attrs["n_logp_evals_annealed_start"] += spent
    if start is None:
        return setup, attrs
    attrs.update(init_annealed=True, init_choice="annealed", init_reason=SMC_ANNEALED_REASON,
                 init_first_choice="prior", init_defensive_weight=DEFENSIVE_WEIGHT)  # fmt: skip
    new = copy.copy(setup)
    new.density, new.draw = start
    return new, attrs


def _smc_fit(setup, draws, attrs):
    """Fit the Student-t (then the widened one) to ``draws``, mixed with the prior
    (:class:`~pymc_crais.core.defensive.DefensiveMixtureDensity`, weight
    :data:`DEFENSIVE_WEIGHT`), and measure its weights (recorded in ``attrs``). Returns
    ``((density, draw) of the first whose k̂ is below`` :data:`SMC_START_KHAT` ``or None,
    model evaluations spent)``."""
    if draws is None:
        return None, 0
    rng = setup.aux_rng.spawn(1)[0]
    md = setup.model_density
    before = md.n_evals
    if SMC_FIT_SHRINK:
        attrs["init_annealed_shrinkage"] = _shrinkage(draws)
    for key, scale, df in (("", SCALE, DF), ("_wide", SCALE * WIDEN, WIDE_DF)):
        proposal = student_t_from_draws(draws, scale=scale, df=df, shrink=SMC_FIT_SHRINK)
        if proposal is None:
            break
        start = defensive_start(md, proposal, setup.draw, DEFENSIVE_WEIGHT)
        k = start_khat(start, md, rng, SMC_START_DRAWS)
        attrs[f"init_annealed_pareto_k{key}"] = k
        if k < SMC_START_KHAT:
            return start, int(md.n_evals - before)
    return None, int(md.n_evals - before)


def _shrinkage(draws) -> float:
    """The Ledoit–Wolf intensity of the fit to ``draws`` (NaN where it cannot be computed)."""
    try:
        return float(shrunk_covariance(draws)[1])
    except ValueError:
        return float("nan")
