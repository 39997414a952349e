"""``sample_smc``'s conditional-Laplace start, for latent-Gaussian models.

Where the automatic start found no usable Laplace fit (a centred funnel: the joint mode runs
off to a zero scale) or one whose pilot weights are heavy-tailed (Pareto k̂ above 0.7, the
start that annealing would otherwise leave from), the model is split into hyperparameters
``θ`` and a latent block ``x`` (:func:`model_blocks`) and the proposal of
:mod:`pymc_crais.core.conditional_laplace` is built: a Student-t over ``θ`` at the mode of
its Laplace marginal, and ``x | θ`` from the Laplace (Gaussian) approximation of its
conditional, by Newton's method for each drawn ``θ``. It is kept when

1. Newton runs at ``θ̂`` from :data:`N_GUARD` draws of the current start reach the same
   latent mode (a conditional posterior with several modes, such as a mixture's relabelled
   components, keeps the rule it had), and
2. the importance weights of :data:`PILOT_DRAWS` of its draws (one per ``θ`` draw) have
   Pareto k̂ at most :data:`KHAT`, for the better of the first proposal and one refitted to
   the first pilot's weighted ``θ`` draws (:func:`_refit`: a kernel estimate after a light
   pilot, the weighted moments after a heavy one; the fit's Student-t :data:`WIDE_SCALE`
   times wider where too few carry weight and the Laplace fit failed). The proposal over ``θ``
   is a defensive mixture: a Student-t at the fit (or the refit) with a wider one at the fit
   (:func:`_theta_proposal`), and
3. beside a Laplace fit, that pilot predicts the run's pooled MCSE within ``target_mcse``
   (CR-AIS: also without one, within :data:`CRAIS_TARGET_FACTOR` × it).

The run then has one stage: its chains draw from the proposal (each ``θ`` draw with
``c`` draws of ``x``), weight the draws exactly against the posterior, and move them at
``τ = 1`` (:func:`pymc_crais.core.anneal.anneal_stages` with a
:class:`~pymc_crais.core.conditional_laplace.WeightedStart`). ``log Ẑ`` is the
importance-sampling estimate, its error the weights' (a family per ``θ`` draw).

The copies ``c``: the pilots draw :data:`COPIES` per ``θ``; a Newton run costs ``c_H + 1``
gradients a step (``c_H`` the Hessian's colours), a copy one evaluation. Where the kept pilot
is light-tailed (k̂ ≤ :data:`TRUST_KHAT`), its split of the weights' variance (the part ``θ``
decides, the part copies average out: :mod:`pymc_crais.core.families`) gives the most copies
up to :data:`MAX_COPIES` predicted to meet ``target_mcse`` (down to :data:`MIN_COPIES` only
where :data:`COPIES` miss it). The same prediction skips a refit pilot or a second split that
would cost more than it could save (:meth:`_Target.saving`). One copy a ``θ`` where the Newton
runs have their own gradient (:mod:`~pymc_crais.samplers.engine.block_gradient`: a latent GP)
and, the Laplace fit having failed, where the start rests on a refit after a first pilot above
:data:`KHAT`.

Which coordinates are latent: those of the continuous free variables with no value transform
and more than one element (random effects, states, coefficients, a GP's values); the others
are hyperparameters, at most :data:`MAX_HYPER`. Untransformed scalars are tried both ways
(:func:`candidate_blocks`); the split whose kept pilot has the lighter weights wins. Beside a
Laplace fit a split needs a transformed (scale) hyperparameter: a location alone (an intercept)
moves ``x | θ``'s mode, not its shape (Sonar's: predicted 0.045–0.095, refused, 0.75 s of 4.7).
"""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np

from ...core.conditional_laplace import Blocks, ConditionalLaplace, fit_hyper, latent_newton
from ...core.families import (
    copies_for_mcse,
    family_log_weights,
    family_size,
    family_variances,
    predicted_family_mcse,
)
from ...core.initial import StudentTInitial
from ...core.latent_hessian import latent_sparsity
from ...core.mode_mixture import StudentTMixture
from ...core.schedules.run_length import relative_variance
from ...core.weights import normalized_weights
from .block_gradient import add_block_gradient
from .compile import initial_point_vector
from .init_auto import DF, SCALE, khat
from .start_point import DEFAULT_TARGET_MCSE

__all__ = ["CONDITIONAL_MAX_MCMC_STEPS", "CRAIS_TARGET_FACTOR", "COPIES", "KHAT", "MAX_COPIES",
           "MAX_HYPER", "MAX_LATENT", "MIN_COPIES", "N_GUARD", "PILOT_DRAWS", "TRUST_KHAT",
           "ConditionalLaplaceDraw", "candidate_blocks", "model_blocks",
           "one_step_conditional_start", "smc_conditional_start",
           "smc_needs_conditional_start"]  # fmt: skip

MAX_HYPER = 8
"""The most hyperparameter coordinates (a Nelder–Mead search and a Student-t over them)."""
COPIES, MIN_COPIES, MAX_COPIES = 4, 2, 16
"""Draws of ``x`` per ``θ`` draw (one Newton run serves them) in the pilots; the fewest in a run,
where :data:`COPIES` miss the target (at most twice their Newton runs); the most."""
TRUST_KHAT = 0.5
"""The largest family k̂ of a pilot whose weights size the copies (else :data:`COPIES`)."""
PILOT_DRAWS = 1000  # draws of each pilot whose weights' Pareto k̂ is measured
KHAT = 0.7
"""The start is kept when its pilot weights' Pareto k̂ (one weight per ``θ`` draw, the mean
of its copies') is at most this: the run is one importance-sampling stage."""
WIDE_WEIGHT, WIDE_SCALE, WIDE_DF = 0.2, 2.0, 3.0
"""The defensive component of the proposal over ``θ`` (:func:`_theta_proposal`)."""
REFIT_WIDE_WEIGHT = 0.05
"""Its weight in the refit after a light first pilot (20 % floors the relative variance)."""
N_GUARD = 16
"""Newton runs at ``θ̂`` from draws of the current start, to see a second latent mode."""
MAX_LATENT = 1000
"""The largest latent block (a Newton step: up to ``d_x + 1`` gradients, a ``d_x``² factor)."""
GUARD_DISTANCE = 1e-3
"""Whitened distance (in the first run's metric) beyond which two Newton ends differ."""
CRAIS_TARGET_FACTOR = 3.0
"""Without a Laplace fit the start is kept when predicted within this many × ``target_mcse``
(else within it): CR-AIS's other starts missed the AR(1) by up to 0.72 (Sonar: ±0.17–0.63)."""
CONDITIONAL_MAX_MCMC_STEPS = 3
"""``sample_smc``'s cap on the moves at τ = 1 after this start (unless ``max_mcmc_steps`` is
given): they break up the families that share a ``θ`` draw (20 were most of the GP's cost)."""
REASON = (
    "latent-Gaussian structure: hyperparameters from a Student-t at their Laplace marginal's "
    "mode, the latent block from its conditional Laplace fit (one importance stage)"
)


def model_blocks(model, layout, *, scalars_latent: bool = False) -> Blocks | None:
    """The hyperparameter / latent split of ``model``'s coordinates (module docstring), or
    ``None`` when the model has discrete variables, no latent block, no hyperparameter or
    more than :data:`MAX_HYPER` of them. ``scalars_latent``: untransformed scalars (a
    group mean, an intercept, an AR coefficient) join the latent block."""
    if layout.has_discrete:
        return None
    hyper, latent = [], []
    for slot, rv in zip(layout.slots, model.free_RVs):
        size = slot.stop - slot.start
        plain = model.rvs_to_transforms.get(rv) is None and (size > 1 or scalars_latent)
        (latent if plain else hyper).extend(range(slot.start, slot.stop))
    if not 2 <= len(latent) <= MAX_LATENT or not hyper or len(hyper) > MAX_HYPER:
        return None
    return Blocks(np.array(hyper), np.array(latent))


def candidate_blocks(model, layout, beside_fit: bool = False) -> list[Blocks]:
    """The splits tried: untransformed scalars as hyperparameters, and as latent (conditional
    on the scales a group mean is Gaussian with its effects, an AR coefficient is not);
    ``beside_fit``: only those with a transformed hyperparameter (module docstring)."""
    tr = model.rvs_to_transforms
    scaled = [i for s, rv in zip(layout.slots, model.free_RVs) if tr.get(rv) is not None
              for i in range(s.start, s.stop)]  # fmt: skip
    out = []
    for scalars_latent in (False, True):
        b = model_blocks(model, layout, scalars_latent=scalars_latent)
        if b is not None and not any(np.array_equal(b.hyper, o.hyper) for o in out):
            out.append(b)
    return [b for b in out if not beside_fit or np.isin(b.hyper, scaled).any()]


class ConditionalLaplaceDraw:
    """A chain's draw from the proposal: ``(rng, n, density) -> WeightedStart`` (its Newton
    runs count among the chain's evaluations)."""

    needs_density = True

    def __init__(self, proposal: ConditionalLaplace):
        self.proposal = proposal

    def __call__(self, rng, n, density):
        return self.proposal.draw(rng, n, density)


def smc_needs_conditional_start(setup) -> bool:
    """Whether the start is tried: ``init="auto"`` found no usable Laplace fit, or one whose
    pilot had k̂ above 0.7 at a single mode, and the model has a gradient."""
    a = setup.attrs
    if a.get("init") != "auto" or not setup.model_density.has_gradient:
        return False
    heavy = float(a.get("init_n_modes", np.nan)) == 1 and float(a.get("init_pareto_k", 0.0)) > 0.7
    return bool(_no_laplace_fit(a) or heavy)


def _no_laplace_fit(a) -> bool:
    """``init="auto"`` fell back to the prior before its mode search: the fit failed."""
    return a.get("init_choice") == "prior" and bool(np.isnan(float(a.get("init_n_modes", np.nan))))


def _weights(proposal, rng, md, n):
    """A pilot: its draws, their family-level log-weights and ``(B, W)`` (``family_variances``)."""
    start = proposal.draw(rng, n, md)
    ev = md.evaluate(start.x, gradient=False)
    with np.errstate(invalid="ignore"):
        lw = ev.log_q0 + ev.delta - start.log_q0
    lw = np.where(np.isfinite(lw), lw, -np.inf)
    return start, family_log_weights(lw, start.family), family_variances(lw, start.family)


class _Target:
    """The run a start is sized for: ``draws`` a chain, ``chains``, ``target_mcse``."""

    def __init__(self, draws: int, chains: int, target_mcse: float, one_copy: bool = False,
                 no_fit: bool = False):  # fmt: skip
        self.draws, self.chains, self.mcse = int(draws), int(chains), float(target_mcse)
        self.one_copy, self.no_fit = bool(one_copy), bool(no_fit)

    def copies(self, k: float, split: tuple[float, float], first_k: float = -np.inf) -> int:
        """The run's copies per ``θ`` for a pilot with family k̂ ``k`` and ``(B, W)``; one
        with ``one_copy``, and where the Laplace fit failed (``no_fit``: the start is kept
        whatever its prediction) after a first pilot's k̂ ``first_k`` above :data:`KHAT` (a
        refit whose tails rest on one pilot; the error is θ's, which copies do not average:
        the AR(1)'s MCSE 0.078–0.120 at 2 copies, at most 0.044 at one over 17 seeds)."""
        if self.one_copy or (self.no_fit and not first_k <= KHAT):
            return 1
        if not k <= TRUST_KHAT or not np.all(np.isfinite(split)):
            return family_size(self.draws, COPIES)
        args = (*split, self.draws, self.chains, self.mcse)
        best = copies_for_mcse(*args, low=COPIES, high=MAX_COPIES)
        if self.predicted(split, best) > self.mcse:  # fewer (more Newton runs), if any divide
            fewer = copies_for_mcse(*args, low=MIN_COPIES, high=best - 1)
            best = fewer if fewer >= MIN_COPIES else best
        return best

    def predicted(self, split: tuple[float, float], copies: int) -> float:
        return predicted_family_mcse(*split, copies, self.draws * self.chains)

    def saving(self, k: float, split: tuple[float, float], newton_evals: float) -> float:
        """The most evaluations a better pilot (a refit, another split) could save the run:
        its Newton runs (``newton_evals`` each) beyond those of :data:`MAX_COPIES` copies;
        unbounded where the pilot's k̂ is above :data:`TRUST_KHAT` (its variance is not
        trusted) or its run misses the target (a better proposal may be what keeps the
        start, or CR-AIS's one-step run)."""
        if not k <= TRUST_KHAT or not np.all(np.isfinite(split)):
            return float("inf")
        if self.predicted(split, self.copies(k, split)) > self.mcse:
            return float("inf")
        if self.one_copy:  # one copy whatever the pilot: no Newton runs to save
            return 0.0
        fewest = self.draws // family_size(self.draws, MAX_COPIES)
        now = self.draws // self.copies(k, split)
        return float(self.chains * (now - fewest) * newton_evals)


def _theta_proposal(fit, mean=None, cov=None, wide_weight=WIDE_WEIGHT) -> StudentTMixture:
    """The defensive Student-t mixture over ``θ``: ``1 − wide_weight`` at ``mean``, ``cov``
    (default: the fit's; covariance × ``SCALE²``, ``DF``), ``wide_weight`` at the fit, scale ×
    :data:`WIDE_SCALE`, df :data:`WIDE_DF` (it bounds the weights where the Laplace marginal
    is skewed or its tails heavier than the fit's)."""
    mean = fit.mode if mean is None else mean
    cov = fit.cov if cov is None else cov
    main = StudentTInitial(mean, cov * SCALE**2, df=DF)
    wide = StudentTInitial(fit.mode, fit.cov * WIDE_SCALE**2, df=WIDE_DF)
    return StudentTMixture((main, wide), np.array([1.0 - wide_weight, wide_weight]))


def _refit(fit, proposal, start, lw, light: bool):
    """The proposal refitted to a pilot's weighted ``θ`` draws (None if the weights cannot
    support a covariance): after a ``light`` pilot (family k̂ ≤ :data:`TRUST_KHAT`) a kernel
    estimate (:func:`_kernel_theta`); after a heavier one the main Student-t at the weights'
    mean and covariance (a kernel estimate lost the AR(1)'s start at one seed in five)."""
    w = normalized_weights(lw)
    theta = start.x[:, proposal.blocks.hyper][np.unique(start.family, return_index=True)[1]]
    if not np.all(np.isfinite(w)) or 1.0 / np.sum(w * w) < 4 * (theta.shape[1] + 1):
        return None
    mean = w @ theta
    c = theta - mean
    cov = (c * w[:, None]).T @ c
    try:
        np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        return None
    if light:
        return replace(proposal, theta=_kernel_theta(fit, theta, w, cov, REFIT_WIDE_WEIGHT))
    return replace(proposal, theta=_theta_proposal(fit, mean, cov, WIDE_WEIGHT))


def _kernel_theta(fit, theta, w, cov, wide_weight) -> StudentTMixture:
    """A weighted kernel estimate of the ``θ`` posterior from a pilot's families: a
    Student-t (``DF``) at each ``θ`` draw of non-negligible weight, its scale matrix the
    weighted covariance times Silverman's factor squared for the weights' ESS, with the
    defensive Student-t at the fit (``wide_weight``). It follows a skewed or long-tailed
    marginal that one Student-t at the weighted mean cannot."""
    d = theta.shape[1]
    ess = 1.0 / np.sum(w * w)
    h = (4.0 / (d + 2.0)) ** (1.0 / (d + 4.0)) * ess ** (-1.0 / (d + 4.0))
    keep = w > 1e-3 / w.size
    wk = w[keep] / np.sum(w[keep])
    comps = [StudentTInitial(t, cov * h**2, df=DF) for t in theta[keep]]
    comps.append(StudentTInitial(fit.mode, fit.cov * WIDE_SCALE**2, df=WIDE_DF))
    return StudentTMixture(tuple(comps), np.append((1.0 - wide_weight) * wk, wide_weight))


def _guard(md, blocks, fit, draws, sparsity=None) -> str | None:
    """Why the latent conditional at ``θ̂`` looks multimodal, or None."""
    theta = np.repeat(fit.mode[None], draws.shape[0] + 1, axis=0)
    starts = np.concatenate([fit.x_at_mode[None], draws[:, blocks.latent]])
    with np.errstate(all="ignore"):
        ends = latent_newton(md, blocks, theta, starts, sparsity=sparsity)
    diff = (ends.x[1:] - ends.x[0]) @ ends.chol[0]  # whitened by P = L Lᵀ at the first end
    dist = np.sqrt(np.sum(diff * diff, axis=1))
    if not np.all(np.isfinite(dist)) or np.any(dist > GUARD_DISTANCE):
        return (
            f"Newton runs at the hyperparameters' mode end apart (whitened {np.nanmax(dist):.3g})"
        )
    return None


def smc_conditional_start(setup, target_mcse: float = DEFAULT_TARGET_MCSE):
    """``(setup, attrs)``: ``setup`` with the conditional-Laplace start when it is kept
    (``attrs["init_choice"] == "conditional_laplace"``), else unchanged; ``attrs`` records
    what was tried (empty when nothing was). The run's copies per ``θ`` are sized for
    ``target_mcse`` (module docstring)."""
    if not smc_needs_conditional_start(setup):
        return setup, {}
    splits = candidate_blocks(setup.model, setup.layout, not _no_laplace_fit(setup.attrs))
    if not splits:
        return setup, {}
    md = setup.model_density
    rng = setup.aux_rng.spawn(1)[0]
    before = md.n_evals
    x0 = initial_point_vector(setup.model, setup.layout)
    guard_draws = setup.draw(rng, N_GUARD)
    tried = []
    for b in splits:
        own = add_block_gradient(setup.model, md, b.latent, setup.compile_kwargs)
        target = _Target(setup.draws, setup.chains, target_mcse, one_copy=own,
                         no_fit=_no_laplace_fit(setup.attrs))  # fmt: skip
        proposal, attrs = _candidate(md, b, x0, guard_draws, rng, target)
        attrs["init_conditional_block_gradient"] = own
        enough = attrs.pop("_enough", False)
        tried.append((proposal, attrs))
        if enough:
            break  # another split would cost more than it could save
    kept = [t for t in tried if t[0] is not None]
    proposal, attrs = min(kept, key=lambda t: t[1]["init_conditional_relvar"]) if kept else tried[0]
    attrs = {**attrs, "init_conditional_splits": len(tried),
             "n_logp_evals_conditional_start": int(md.n_evals - before)}  # fmt: skip
    if proposal is None:
        return setup, attrs
    first = setup.attrs.get("init_choice")
    attrs.update(init_choice="conditional_laplace", init_reason=REASON,
                 init_first_choice=first, init_conditional_copies=proposal.copies)  # fmt: skip
    new = copy.copy(setup)
    new.density, new.draw = md, ConditionalLaplaceDraw(proposal)
    return new, attrs


def one_step_conditional_start(setup, target_mcse: float, no_fit_factor=CRAIS_TARGET_FACTOR):
    """``(setup, attrs, predicted MCSE or None)``: the start kept where its pilot predicts a
    pooled MCSE within ``target_mcse``, or ``no_fit_factor`` × it where the Laplace fit failed
    (``sample_smc``: any, as annealing from the prior there missed the AR(1)); otherwise
    ``setup`` as it was (the attributes say why)."""
    new, attrs = smc_conditional_start(setup, target_mcse)
    if attrs.get("init_choice") != "conditional_laplace":
        return setup, attrs, None
    mcse = float(attrs["init_conditional_predicted_mcse"])
    no_fit = _no_laplace_fit(setup.attrs)
    factor = no_fit_factor if no_fit else 1.0
    if factor == np.inf or mcse <= factor * target_mcse:  # (an infinite factor keeps a NaN)
        return new, attrs, mcse
    for key in ("init_choice", "init_reason", "init_first_choice", "init_conditional_copies"):
        attrs.pop(key, None)
    attrs["init_conditional_reason"] = f"its one-step run is predicted an MCSE of {mcse:.3g} > " \
        f"{factor:g} x target_mcse {target_mcse:.3g}"
    return setup, attrs, None


def _candidate(md, blocks, x0, guard_draws, rng, target: _Target):
    """``(proposal or None, attrs)`` for one split: the fit, the guard, the pilots, the
    copies; ``attrs["_enough"]`` (for the caller) when another split could save the run
    fewer evaluations than this one cost (:meth:`_Target.saving`)."""
    before = md.n_evals
    attrs = {"init_conditional_hyper": int(blocks.hyper.size),
             "init_conditional_latent": int(blocks.latent.size)}  # fmt: skip
    sparsity = latent_sparsity(md, blocks, np.vstack([x0, guard_draws[:2]]))  # 3 points
    attrs["init_conditional_hessian_colors"] = sparsity.n_colors if sparsity else np.nan
    with np.errstate(all="ignore"):
        fit = fit_hyper(md, blocks, x0[blocks.hyper], x0[blocks.latent], sparsity=sparsity)
    if fit.problem:
        return None, {**attrs, "init_conditional_reason": fit.problem}
    if why := _guard(md, blocks, fit, guard_draws, sparsity):
        return None, {**attrs, "init_conditional_reason": why}
    proposal = ConditionalLaplace(blocks, _theta_proposal(fit), fit.x_at_mode, COPIES,
                                  sparsity=sparsity)  # fmt: skip
    pilot_before = md.n_evals
    start, lw, split = _weights(proposal, rng, md, PILOT_DRAWS)
    pilot_cost = md.n_evals - pilot_before
    newton = (pilot_cost - PILOT_DRAWS) / (PILOT_DRAWS // family_size(PILOT_DRAWS, COPIES))
    k, rv = khat(lw), relative_variance(lw)
    attrs["init_conditional_pareto_k"] = k
    attrs["init_conditional_refits"] = 0
    # one refit, where a better proposal could pay for its pilot (a second one made the AR(1)'s
    # weights look light to a pilot and then heavy to the chains: MCSE 0.127 at seed 22)
    worth = target.saving(k, split, newton) > pilot_cost
    refit = _refit(fit, proposal, start, lw, light=bool(k <= TRUST_KHAT)) if worth else None
    if worth and refit is None and target.no_fit:  # too few weighty draws: the fit, wider
        refit = replace(proposal, theta=_theta_proposal(fit, cov=fit.cov * WIDE_SCALE**2))
    if refit is not None:
        _, lw2, split2 = _weights(refit, rng, md, PILOT_DRAWS)
        k2, rv2 = khat(lw2), relative_variance(lw2)
        attrs["init_conditional_refits"] = 1
        attrs["init_conditional_pareto_k_refit"] = k2
        if k2 <= KHAT and (rv2 < rv or not k <= KHAT):
            proposal, k, rv, split = refit, k2, rv2, split2
    attrs["init_conditional_relvar"] = rv
    attrs["init_conditional_between"], attrs["init_conditional_within"] = map(float, split)
    if not k <= KHAT:
        return None, {
            **attrs,
            "init_conditional_reason": f"its pilot weights have k̂ {k:.2f} > {KHAT}",
        }
    copies = target.copies(k, split, first_k=attrs["init_conditional_pareto_k"])
    attrs["init_conditional_newton_evals"] = newton
    attrs["init_conditional_predicted_mcse"] = target.predicted(split, copies)
    attrs["_enough"] = target.saving(k, split, newton) <= md.n_evals - before
    return replace(proposal, copies=copies), {**attrs, "init_conditional_reason": REASON}
