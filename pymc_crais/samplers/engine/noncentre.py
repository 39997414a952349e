"""The ``reparameterize=`` option: non-centring of latent Normal and Student-t variables.

A centred random effect ``a ~ Normal(μ, σ)`` whose ``μ`` or ``σ`` depends on other free
variables makes a funnel: where ``σ`` is small the posterior of ``a`` is narrow, where it is
large, wide, and a kernel tuned to one population cannot move in both. The non-centred form
``z ~ Normal(0, 1)``, ``a = μ + σ z`` has the same joint distribution of the original
variables, hence the same evidence, and no funnel in the prior part of the density.

:func:`noncentred_model` rewrites the model's graph (PyMC's ``fgraph_from_model`` /
``model_from_fgraph``): each such free variable ``a`` becomes a new free variable
``a_noncentred ~ Normal(0, 1)`` (``StudentT(ν, 0, 1)`` for a Student-t ``a``, same dims) and
``a`` a ``pm.Deterministic`` ``μ + σ·a_noncentred``, so the output keeps ``a`` under its own
name (with the same dims) and adds ``a_noncentred``. Because ``z`` is a free variable of its
own, prior draws of it are exact standard draws, never ``(a − μ)/σ`` of an ``a`` drawn with a
scale that overflowed (BUGS' ``τ ~ Gamma(0.001, 0.001)`` makes ``σ = τ^{-1/2}`` infinite in
float64 for about half of the prior draws), and its log-density is the standard one,
finite at every ``z``. Such a particle's ``a`` is infinite, so its likelihood is ``−inf``:
zero weight once ``τ > 0``, which is its weight to within float64.

Only variables with no value transform are rewritten (a Normal has none unless the user set
one); observed variables are never touched. Non-centring is not better everywhere: where
the data pin each group's effect down, the non-centred form is the funnel (docs/validation.md,
"Non-centring", has the measurements), so the option is opt-in.
"""

from __future__ import annotations

import weakref

import pytensor.tensor as pt
import pytensor.tensor.random.basic as ptr
from pytensor.graph.traversal import ancestors

__all__ = [
    "REPARAMETERIZE_CHOICES",
    "candidates",
    "check_reparameterize",
    "noncentred_model",
    "reparameterized",
]

REPARAMETERIZE_CHOICES = ("none", "noncentred")
SUFFIX = "_noncentred"


def check_reparameterize(value) -> str:
    """``value`` checked: ``None`` or ``"none"`` (the model as written), ``"noncentred"``."""
    if value is None:
        return "none"
    if isinstance(value, str) and value in REPARAMETERIZE_CHOICES:
        return value
    raise ValueError(
        f"reparameterize must be one of {REPARAMETERIZE_CHOICES}, got {value!r}; use "
        "'noncentred' to non-centre latent Normal/Student-t variables whose location or scale "
        "depends on other free variables"
    )


def _loc_scale(rv):
    """``(standard draw maker, loc, scale)`` for a Normal or Student-t ``rv``, else ``None``."""
    op = rv.owner.op
    if isinstance(op, ptr.NormalRV):
        _rng, _size, loc, scale = rv.owner.inputs
        return (
            (lambda shape, r: ptr.normal(0.0, 1.0, size=shape, rng=r, return_next_rng=True)[1]),
            loc,
            scale,
        )
    if isinstance(op, ptr.StudentTRV):
        _rng, _size, nu, loc, scale = rv.owner.inputs
        return (
            (lambda shape, r: ptr.t(nu, 0.0, 1.0, size=shape, rng=r, return_next_rng=True)[1]),
            loc,
            scale,
        )
    return None


def noncentred_model(model):
    """``(new model, names)``: ``model`` with every free Normal or Student-t variable whose
    location or scale depends on another free variable non-centred (see the module
    docstring); ``names`` are the rewritten variables, parents first (empty: ``model`` is
    returned as it is)."""
    from pymc.model.fgraph import (
        ModelFreeRV,
        fgraph_from_model,
        model_deterministic,
        model_free_rv,
        model_from_fgraph,
    )

    if not candidates(model):
        return model, []
    # PyMC's fgraph refuses models with custom initial values: cleared while the graph is
    # built (the user's model is restored), then set again on the variables kept
    initvals = dict(model.rvs_to_initial_values)
    try:
        model.rvs_to_initial_values = dict.fromkeys(initvals)
        fgraph, _ = fgraph_from_model(model)
    finally:
        model.rvs_to_initial_values = initvals
    free_dummies = {n.outputs[0] for n in fgraph.apply_nodes if isinstance(n.op, ModelFreeRV)}
    replacements, names = [], []
    for node in fgraph.toposort():
        if not isinstance(node.op, ModelFreeRV) or node.op.transform is not None:
            continue
        rv, _value = node.inputs
        if rv.owner is None:
            continue
        parts = _loc_scale(rv)
        if parts is None:
            continue
        make, loc, scale = parts
        if not (free_dummies & set(ancestors([loc, scale]))):
            continue  # fixed location and scale: no funnel
        op = rv.owner.op  # the draw's shape from size and parameters, not from the draw
        shape = op._infer_shape(op.size_param(rv.owner), op.dist_params(rv.owner))
        z = make(shape, rv.owner.inputs[0])
        name = node.op.name
        z.name = name + SUFFIX
        zval = z.type()
        zval.name = z.name
        zdummy = model_free_rv(z, zval, None, z.name, *node.op.dims)
        a = pt.as_tensor_variable(loc + scale * zdummy).astype(rv.dtype)
        replacements.append((node.outputs[0], model_deterministic(a, name, *node.op.dims)))
        names.append(name)
    if not replacements:
        return model, []
    from pymc.pytensorf import toposort_replace

    toposort_replace(fgraph, tuple(replacements))
    new = model_from_fgraph(fgraph, mutate_fgraph=True)
    for rv, value in initvals.items():
        if value is not None and rv.name in new.named_vars and new[rv.name] in new.free_RVs:
            new.rvs_to_initial_values[new[rv.name]] = value
    return new, names


def candidates(model) -> list[str]:
    """Names of ``model``'s free variables that :func:`noncentred_model` rewrites: Normal or
    Student-t, no value transform, a location or scale with a free variable among its
    ancestors. A clash with an existing ``<name>_noncentred`` is a ``ValueError``."""
    free = set(model.free_RVs)
    out = []
    for rv in model.free_RVs:
        if model.rvs_to_transforms.get(rv) is not None or rv.owner is None:
            continue
        parts = _loc_scale(rv)
        if parts is None or not (free & set(ancestors([parts[1], parts[2]]))):
            continue
        if rv.name + SUFFIX in model.named_vars:
            raise ValueError(
                f"reparameterize='noncentred' would add {rv.name + SUFFIX!r}, a name the model "
                "already uses; rename that variable or use reparameterize='none'"
            )
        out.append(rv.name)
    return out


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""User model -> (its variables' names, rewritten model, names rewritten), kept while the
user's model lives."""


def reparameterized(model, reparameterize: str):
    """``(model to sample, names rewritten)`` for the checked option; the rewritten model is
    built once per model object (so the functions compiled for it are reused)."""
    if reparameterize == "none":
        return model, []
    key = tuple(model.named_vars)  # a variable added since: rebuilt
    hit = _CACHE.get(model)
    if hit is None or hit[0] != key:
        hit = _CACHE[model] = (key, *noncentred_model(model))
    return hit[1], hit[2]
