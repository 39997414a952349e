"""``pmc.bridge_sampling``: ``log Z`` from the posterior draws a result already has (NUTS).

The draws of the ``posterior`` group (constrained, named) are mapped to the model's
unconstrained value space by the model's own transforms, in one compiled batched call; the
model's log-density (log prior with Jacobians plus log-likelihood) is evaluated by the
package's batched compiled function (:mod:`pymc_crais.samplers.engine.compile`); the estimator is
:func:`pymc_crais.core.bridge.bridge_estimate`. The input's convergence (R-hat, divergences,
effective draws) and the estimate's own checks (Pareto k̂ of the proposal's importance
weights, convergence of the iteration) end in an :class:`~pymc_crais.UnreliableEvidenceWarning`
when one fails. The output is the input with an ``evidence`` group
(:mod:`pymc_crais.evidence_group`).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.replace import clone_replace, vectorize_graph

from ..core.bridge import PROPOSALS, bridge_estimate
from ..core.initial import LaplaceFit
from ..core.mode_search import search_modes
from ..evidence_group import attach_evidence
from ..tail_stats import KHAT_THRESHOLD, arviz_array_stats, pareto_khat
from ..warnings import UnreliableEvidenceWarning, user_stacklevel
from .engine.compile import (
    ParameterLayout,
    PerParticleFallbackWarning,
    cached_on_model,
    compile_model_density,
    parameter_layout,
    resolve_compile_kwargs,
)
from .engine.memory import block_rows, check_memory_budget
from .engine.prior import prior_sampler
from .engine.reproducible import compile_function

__all__ = ["RHAT_THRESHOLD", "bridge_sampling", "unconstrained_draws"]

RHAT_THRESHOLD = 1.01
"""Largest rank-normalized split R-hat of the input draws (Vehtari et al. 2021)."""
MIN_ESS_PER_CHAIN = 100
"""Fewest effective draws per chain, for every parameter and for the bridge's posterior term."""


class UnconstrainedMapper:
    """Constrained draws ``{rv name: (N, *shape)}`` to raveled unconstrained ``(N, d)``,
    by each free variable's transform (``forward``) in one compiled batched call."""

    def __init__(self, model, layout: ParameterLayout, compile_kwargs: dict):
        free = list(model.free_RVs)
        self.names = [rv.name for rv in free]
        holders = {rv: rv.type(f"{rv.name}_constrained") for rv in free}
        outs = []
        for rv in free:
            transform = model.rvs_to_transforms.get(rv)
            value = holders[rv]
            if transform is not None:
                value = transform.forward(value, *rv.owner.inputs)
            outs.append(pt.as_tensor_variable(value).astype("float64").ravel())
        # the transforms' parameters may be other free variables: read from their draws
        outs = clone_replace(outs, replace=holders, rebuild_strict=False)
        theta = pt.concatenate(outs) if len(outs) > 1 else outs[0]
        inputs = [holders[rv] for rv in free]
        self.vectorized = True
        try:
            batched = [pt.tensor(f"{h.name}_batch", dtype=h.dtype, shape=(None, *h.type.shape)) for h in inputs]
            out = vectorize_graph(theta, replace=dict(zip(inputs, batched, strict=True)))
            self._fn = compile_function(batched, [out], compile_kwargs)
        except Exception as err:
            warnings.warn(
                f"could not vectorize the map to unconstrained space ({type(err).__name__}: "
                f"{err}); converting the draws one at a time",
                PerParticleFallbackWarning,
                stacklevel=user_stacklevel(),
            )
            self.vectorized = False
            self._fn = compile_function(inputs, [theta], compile_kwargs)
        self.dim = layout.dim

    def __call__(self, values: dict) -> np.ndarray:
        arrays = [np.asarray(values[name]) for name in self.names]
        if self.vectorized:
            out = np.asarray(self._fn(*arrays)[0])
        else:
            out = np.stack([np.asarray(self._fn(*row)[0]) for row in zip(*arrays, strict=True)])
        return out.reshape(arrays[0].shape[0], self.dim)


def unconstrained_draws(posterior, model, layout: ParameterLayout, compile_kwargs: dict | None = None):
    """The draws of a ``posterior`` group as ``(chains, draws, d)`` in unconstrained space.

    Parameters
    ----------
    posterior : xarray.Dataset or DataTree node
        With every free variable of ``model`` by name, dims ``(chain, draw, ...)``.
    model : pymc.Model
    layout : ParameterLayout
    compile_kwargs : dict, optional
    """
    names = [rv.name for rv in model.free_RVs]
    missing = [n for n in names if n not in posterior.data_vars]
    if missing:
        raise ValueError(
            f"idata: the posterior group lacks the free variables {missing} of the model; pass "
            "the model the draws came from (model=...), or a result of pm.sample() on it"
        )
    first = posterior[names[0]]
    chains, draws = int(first.sizes["chain"]), int(first.sizes["draw"])
    values = {}
    for rv in model.free_RVs:
        arr = posterior[rv.name].transpose("chain", "draw", ...).values
        values[rv.name] = np.ascontiguousarray(arr, dtype=rv.dtype).reshape(chains * draws, *arr.shape[2:])
    ckw = dict(compile_kwargs or {})
    mapper = cached_on_model(model, ckw, ("unconstrained",), lambda: UnconstrainedMapper(model, layout, ckw))
    return mapper(values).reshape(chains, draws, layout.dim)


def _input_checks(idata, theta: np.ndarray) -> tuple[dict, dict]:
    """R-hat, divergences and effective draws of the input, and the failed checks' reasons."""
    stats = arviz_array_stats()
    per_param = np.moveaxis(theta, -1, 0)  # (d, chains, draws)
    chains = theta.shape[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rhat = np.asarray(stats.rhat(per_param, chain_axis=-2, draw_axis=-1), dtype=float)
        ess = np.asarray(stats.ess(per_param, chain_axis=-2, draw_axis=-1, method="bulk"), dtype=float)
    rhat_max = float(np.nanmax(rhat)) if np.isfinite(rhat).any() else float("nan")
    ess_min = float(np.nanmin(ess)) if np.isfinite(ess).any() else float("nan")
    n_div = 0
    try:
        n_div = int(np.sum(idata["sample_stats"]["diverging"].values))
    except (KeyError, TypeError):
        pass
    reasons = {}
    if not rhat_max <= RHAT_THRESHOLD:
        reasons["rhat"] = (
            f"the input chains have not converged (largest R-hat {rhat_max:.3f} > "
            f"{RHAT_THRESHOLD}): run pm.sample longer (more tune and draws) or reparameterize"
        )
    if n_div:
        reasons["divergences"] = (
            f"the input has {n_div} divergent transitions, so its draws may miss part of the "
            "posterior: raise target_accept or reparameterize (non-centred) and sample again"
        )
    if not ess_min >= MIN_ESS_PER_CHAIN * chains:
        reasons["ess"] = (
            f"too few effective draws (smallest bulk ESS {ess_min:.0f} < {MIN_ESS_PER_CHAIN} "
            f"per chain, {MIN_ESS_PER_CHAIN * chains} for {chains}): draw more"
        )
    return {"rhat_max": rhat_max, "ess_bulk_min": ess_min, "n_divergent": n_div}, reasons


MODE_SEPARATION = 3.0
"""Whitened distance (in the draws' covariance) from the draws' mean beyond which the end
of a mode search is a mode the chains did not visit."""


def _unvisited_modes(model, layout, ckw, density, theta, rng, n_starts: int) -> tuple[float, str, int]:
    """Local maxima that short L-BFGS runs from ``n_starts`` prior draws reach far from the
    posterior draws (``core.mode_search.search_modes`` around the draws' mean and covariance):
    ``(count, note, evaluations)``; NaN and the reason where the search cannot run."""
    if n_starts == 0:
        return float("nan"), "not run (mode_search=0)", 0
    if not density.has_gradient:
        return float("nan"), "not run: the model's gradient could not be compiled", 0
    x = theta.reshape(-1, layout.dim)
    cov = np.atleast_2d(np.cov(x, rowvar=False))
    try:
        np.linalg.cholesky(cov)
        starts = prior_sampler(model, layout, ckw).draw(rng, n_starts)
    except Exception as err:  # improper prior, or draws that do not move
        return float("nan"), f"not run: {type(err).__name__}: {err}"[:200], 0
    center = LaplaceFit(x.mean(axis=0), cov, 0.0, 0, True)
    with np.errstate(all="ignore"):
        found = search_modes(density, starts, center, separation=MODE_SEPARATION)
    note = f"{found.n_starts} L-BFGS runs from prior draws, {found.n_unsettled} unsettled"
    return float(found.n_modes - 1), note, found.n_evals


def _ess_mean(values: np.ndarray) -> float:
    """ESS of the mean of per-draw values ``(chains, m)``, chains kept apart (ArviZ)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(arviz_array_stats().ess(values, chain_axis=-2, draw_axis=-1, method="mean"))


def bridge_sampling(
    idata,
    model=None,
    *,
    proposal: str = "auto",
    df: float = 4.0,
    warp: bool = False,
    n_proposal: int | None = None,
    random_seed=None,
    tol: float = 1e-10,
    max_iter: int = 1000,
    mode_search: int = 32,
    backend: str | None = None,
    compile_kwargs: dict | None = None,
):
    """``log Z`` of ``model`` by bridge sampling on the posterior draws of ``idata``.

    The draws (e.g. of ``pm.sample()``) are mapped to the model's unconstrained space by
    its transforms; the first half of each chain fits the proposal (a multivariate normal
    or t with the draws' mean and covariance), the second halves and as many proposal
    draws enter the iterative optimal bridge of Meng & Wong (1996). The error is the
    relative mean-squared error of Frühwirth-Schnatter (2004), with the posterior term's
    autocorrelation from its effective sample size (ArviZ, chains kept apart).

    Parameters
    ----------
    idata : xarray.DataTree
        A result with a ``posterior`` group holding every free variable of ``model``
        (``pm.sample()``'s output, or that of any PyMC sampler), dims ``(chain, draw, ...)``.
    model : pymc.Model, optional
        The model the draws came from; default the model of the ``with`` context.
    proposal : {"auto", "normal", "t"}, default "auto"
        The proposal's family. ``"auto"``: the normal, and where the posterior's tails
        are heavier than the normal's (Pareto k̂ of its importance weights above 0.7) the
        t, on fresh proposal draws (its errors are larger where the normal suffices). The
        one used is the group's ``proposal`` attribute.
    df : float, default 4.0
        Degrees of freedom of the t proposal (> 2).
    warp : bool, default False
        Bridge the warp-III transform of the posterior (Meng & Schilling 2002): centred,
        whitened and symmetrized, which suits skewed posteriors; twice the model
        evaluations.
    n_proposal : int, optional
        Proposal draws (default: as many as posterior draws enter the bridge).
    random_seed : int, numpy.random.Generator or None
        Seeds the proposal draws; the same seed gives the same estimate.
    tol : float, default 1e-10
        The iteration stops when ``log Z`` changes by less than this.
    max_iter : int, default 1000
        Most iterations.
    mode_search : int, default 32
        Short L-BFGS runs from this many prior draws look for local maxima of the
        posterior far from the draws (a mode the chains never visited); 0 skips the search.
    backend, compile_kwargs : optional
        Compilation options, as for ``pm.sample_smc``.

    Returns
    -------
    xarray.DataTree
        A copy of ``idata`` with an ``evidence`` group: ``log_marginal_likelihood``, its
        ``log_marginal_likelihood_mcse``, ``pareto_k`` (of the proposal's importance
        weights), ``n_iterations``, ``converged``, ``ess_posterior_term``, ``rhat_max``,
        ``ess_bulk_min``, ``n_divergent``, ``n_posterior``, ``n_proposal``,
        ``n_logp_evals``, ``n_unvisited_modes`` and the attributes ``method="bridge"``,
        ``flags``, ``proposal``, ``warp``, ``mode_search``. :func:`pymc_crais.log_marginal_likelihood`, :func:`pymc_crais.compare`,
        :func:`pymc_crais.bayes_factor` and :func:`pymc_crais.cross_check` read it.

    Raises
    ------
    ValueError
        Discrete free variables (naming them: bridge sampling needs a density on a
        continuous space; use ``pmc.sample_smc``), a missing posterior group or variable,
        or invalid options.

    Warns
    -----
    UnreliableEvidenceWarning
        With the reasons and what to do, when a check fails (named in the group's
        ``flags``): ``rhat`` (an R-hat above 1.01), ``divergences``, ``ess`` (fewer than
        100 effective draws per chain, of a parameter or of the bridge's posterior term),
        ``pareto_k`` (k̂ of the proposal weights above 0.7: the posterior has heavier
        tails than the proposal), ``not_converged`` and ``modes`` (the mode search found
        local maxima far from the draws).

    Notes
    -----
    Prefer it when the posterior is unimodal and a NUTS run exists (docs/bridge.md). A
    mode that the chains missed is missed by the estimate too; the mode search finds such
    modes where a run from a prior draw ends in one, not always: compare with an
    annealing estimate with :func:`pymc_crais.cross_check`.
    """
    import pymc as pm

    model = pm.modelcontext(model)
    if proposal not in ("auto", *PROPOSALS):
        raise ValueError(f"proposal must be 'auto', 'normal' or 't', got {proposal!r}")
    if not (isinstance(max_iter, int | np.integer) and max_iter >= 1):
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")
    if not (isinstance(mode_search, int | np.integer) and mode_search >= 0):
        raise ValueError(f"mode_search must be an integer >= 0, got {mode_search!r}")
    layout = parameter_layout(model)
    if layout.has_discrete:
        raise ValueError(
            f"bridge sampling needs continuous parameters, but the model has discrete free "
            f"variables {layout.discrete_names}; estimate its evidence with pmc.sample_smc"
        )
    try:
        posterior = idata["posterior"]
    except (KeyError, TypeError):
        raise ValueError(
            "idata has no posterior group; pass the result of pm.sample() (or of another "
            "PyMC sampler) on the model"
        ) from None
    ckw = resolve_compile_kwargs(backend, compile_kwargs)
    theta = unconstrained_draws(posterior, model, layout, ckw)
    checked, reasons = _input_checks(idata, theta)
    density = compile_model_density(model, gradient=mode_search > 0, compile_kwargs=ckw)
    density.block_rows = block_rows(model, layout.dim, check_memory_budget(None))
    # with a gradient function, values from it: no second compilation
    with_grad = density.has_gradient and not density.value_function_compiled

    def log_density(x):
        ev = density.evaluate(x, gradient=with_grad)
        return ev.log_q0 + ev.delta

    rng = random_seed if isinstance(random_seed, np.random.Generator) else np.random.default_rng(random_seed)
    # "auto": the normal, and the t where the normal's weights are heavy-tailed
    families = ("normal", "t") if proposal == "auto" else (proposal,)
    n_evals = 0
    for family in families:
        res = bridge_estimate(
            theta, log_density, rng, proposal=family, df=df, warp=warp, n_proposal=n_proposal,
            ess=_ess_mean, tol=tol, max_iter=int(max_iter),
        )  # fmt: skip
        n_evals += res.n_evals
        khat = pareto_khat(res.log_weights_proposal)
        if not khat > KHAT_THRESHOLD:
            break
    if res.ess_posterior < MIN_ESS_PER_CHAIN * theta.shape[0] and "ess" not in reasons:
        reasons["ess"] = (
            f"too few effective draws in the bridge's posterior term (ESS "
            f"{res.ess_posterior:.0f} < {MIN_ESS_PER_CHAIN} per chain, "
            f"{MIN_ESS_PER_CHAIN * theta.shape[0]} for {theta.shape[0]}): draw more"
        )
    if khat > KHAT_THRESHOLD:
        reasons["pareto_k"] = (
            f"the proposal's importance weights are heavy-tailed (Pareto k̂ {khat:.2f} > "
            f"{KHAT_THRESHOLD}): the posterior has heavier tails than the {family} "
            "proposal, so the estimate rests on few draws there; try a t proposal with "
            "fewer degrees of freedom (df=3) or warp=True for a skewed posterior, and check "
            "with pmc.sample_smc"
        )
    if not res.converged:
        reasons["not_converged"] = (
            f"the bridge iteration did not converge in {res.n_iterations} iterations: raise "
            "max_iter, or check the draws (a posterior far from the proposal)"
        )
    n_modes, mode_note, mode_evals = _unvisited_modes(model, layout, ckw, density, theta, rng, mode_search)
    if n_modes > 0:
        reasons["modes"] = (
            f"L-BFGS runs from {mode_search} prior draws found {n_modes:.0f} local maxima "
            "far from the posterior draws: the posterior has modes the chains never visited, "
            "and the estimate omits their mass; estimate log Z with pmc.sample_smc and compare "
            "with pmc.cross_check"
        )
    if reasons:
        warnings.warn(
            f"bridge sampling: log Z = {res.log_z:.3f} ± {res.mcse:.3f} is unreliable: "
            + "; ".join(reasons.values()) + ".",
            UnreliableEvidenceWarning,
            stacklevel=user_stacklevel(),
        )
    values = {
        "pareto_k": khat,
        "n_iterations": res.n_iterations,
        "converged": res.converged,
        "ess_posterior_term": res.ess_posterior,
        "n_posterior": res.n_posterior,
        "n_proposal": res.n_proposal,
        "n_logp_evals": n_evals + mode_evals,
        "n_unvisited_modes": n_modes,
        **checked,
    }
    attrs = {"mode_search": mode_note, "proposal": family, "warp": int(bool(warp)), "df": float(df) if family == "t" else "None"}
    return attach_evidence(
        idata, log_z=res.log_z, mcse=res.mcse, method="bridge", flags=list(reasons),
        values=values, attrs=attrs,
    )  # fmt: skip
