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
first start is kept. The ``pm.sample_smc`` kernel :class:`pymc_crais.CRAIS` plans once per
PyMC chain, so there each chain anneals its own start.
"""

from __future__ import annotations

import copy

import numpy as np

from ...core.paths import make_path
from ...core.refit import student_t_from_draws
from .anneal_chain import run_anneal_chains
from .init_auto import DF, SCALE
from .options import is_auto
from .posterior_refit import restart_setup
from .runner import ChainFailedError
from .smc_settings import SMCSettings
from .start_point import StartPoint, start_length_point

__all__ = [
    "ANNEALED_START_KHAT",
    "PILOT_CHAINS",
    "anneal_if_far",
    "annealed_start",
    "needs_annealed_start",
]

ANNEALED_START_KHAT = 0.7
"""Pareto k̂ of the start's importance weights above which CR-AIS anneals to a start."""
PILOT_CHAINS = 2
"""SMC chains of the annealed start (each with the run's ``draws`` particles)."""
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
            setup, start = new_setup, new
            attrs.update(init_choice="annealed", init_reason=ANNEALED_REASON)
        else:
            attrs["init_annealed"] = False
    attrs["n_logp_evals_start"] = spent
    return setup, start, attrs


def annealed_start(setup):
    """Run the SMC chains from ``setup``'s start and fit the Student-t to their particles.

    Returns ``(new_setup, attrs)``: ``setup`` with the Student-t as its start (its chain
    generators unchanged; the SMC chains draw from children of the run-level generator), and
    the attributes that record it; ``(setup, attrs)`` when nothing could be fitted (a chain
    without a finite ``log Ẑ``, draws without a positive-definite covariance).
    """
    settings = SMCSettings.from_kwargs({})  # sample_smc's defaults
    schedule = settings.schedule.build(
        None, None, settings.threshold, settings.max_step, settings.min_step
    )
    pilot = copy.copy(setup)
    pilot.chains = min(PILOT_CHAINS, setup.chains)
    pilot.chain_rngs = list(setup.aux_rng.spawn(pilot.chains))
    pilot.cores = min(setup.cores, pilot.chains)
    before = setup.model_density.n_evals
    attrs = {"init_annealed": False, "init_annealed_chains": int(pilot.chains)}
    try:
        chains, seconds = run_anneal_chains(
            pilot, make_path(0.0, 0.0), schedule, "CR-AIS start (SMC)", settings.anneal_options()
        )
    except ChainFailedError as err:  # keep the first start; the final run will say more
        attrs.update(
            init_annealed_failed=f"{type(err).__name__}: {err}"[:300],
            n_logp_evals_annealed_start=int(setup.model_density.n_evals - before),
        )
        return setup, attrs
    attrs.update(
        init_annealed_stages=int(max(c.n_stages for c in chains)),
        init_annealed_seconds=float(seconds),
        n_logp_evals_annealed_start=int(sum(c.n_logp_evals for c in chains)),
    )
    lz = np.array([c.log_marginal_likelihood for c in chains], dtype=np.float64)
    proposal = None
    # a chain stopped by its stage cap ends at a tempered target, not the posterior
    if np.all(np.isfinite(lz)) and not any(c.hit_max_steps for c in chains):
        draws = np.concatenate([c.x for c in chains])
        proposal = student_t_from_draws(draws, scale=SCALE, df=DF)
    if proposal is None:
        return setup, attrs
    attrs["init_annealed"] = True
    return restart_setup(setup, proposal, setup.chain_rngs), attrs
