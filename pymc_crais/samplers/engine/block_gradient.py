"""The model on groups of points that share their hyperparameters, with the gradient in the
latent block alone: where that costs much less than the whole gradient at every point.

The conditional-Laplace start (:mod:`pymc_crais.core.conditional_laplace`) runs Newton's
method on the latent block ``x`` with the hyperparameters ``θ`` held fixed: ``d_x + 1``
(or ``c + 1``) gradients a ``θ`` draw and step, all at that ``θ``, of which it reads only the
latent columns (:meth:`~pymc_crais.core.density.BatchedDensity.evaluate_grouped`). Where ``θ``
reaches the density through a matrix factorization, the whole gradient at every point pays
twice: for ``pm.gp.Latent``, whose values are ``L(θ) v`` with ``L`` the Cholesky factor of
the kernel matrix, each point rebuilds the kernel matrix and its factor, and reverse mode
through ``L`` adds two triangular solves and products of ``d_x × d_x`` matrices.

:func:`add_block_gradient` rebuilds the model's graph with each variable's value a variable of
its own, vectorized over ``(M, 1)`` groups for the hyperparameters and ``(M, k)`` points for
the latent variables: what depends on ``θ`` alone (the kernel matrix, its factor) is computed
once a group, and only the latent gradient is taken. The latent GP of the applied tier (40
points): 1.4 µs a point against 80 µs for the whole gradient (Numba), its Newton runs 10.6 →
1.5 s a run. It is compiled only where the whole gradient's graph holds more matrix nodes
(linear algebra, products of two matrices) than the block's, a property of the graph, not of a
clock, so a run's bits do not depend on the machine's load; a model whose ``θ`` enters
elementwise (random effects, state-space models, regressions) compiles nothing and evaluates
all the points with the whole gradient in one call; so does a graph that does not vectorize
over groups, and the JAX back-end.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt

from .compile import cached_on_model, initial_point_vector, model_scalar_graph
from .gradients import batched_gradients, column_block_items, slice_reads
from .model_graph import batched_model_graph, model_compilers, uses_jax
from .reproducible import pytensor_lock
from .rewrites import simplify_logp_graph
from .staged import TwoStage

__all__ = ["add_block_gradient", "matrix_nodes"]

LINALG_MODULE = "pytensor.tensor.linalg"


def matrix_nodes(inputs, outputs) -> int:
    """How many nodes between ``inputs`` and ``outputs`` cost more than their data: linear
    algebra (factorizations, solves, inverses, determinants, batched or not) and products of
    two matrices."""
    from pytensor.graph.traversal import applys_between
    from pytensor.tensor.blockwise import Blockwise
    from pytensor.tensor.math import Dot

    n = 0
    for node in applys_between(inputs, outputs):
        op = node.op.core_op if isinstance(node.op, Blockwise) else node.op
        if type(op).__module__.startswith(LINALG_MODULE):
            n += 1
        elif isinstance(op, Dot) and all(_matrix(i.type) for i in node.inputs):
            n += 1
    return n


def _matrix(t) -> bool:
    """A matrix operand: two trailing dimensions, neither known to be 1 (``A @ v`` is
    ``A @ v[:, None]``)."""
    shape = getattr(t, "shape", ())
    return len(shape) >= 2 and all(s != 1 for s in shape[-2:])


def add_block_gradient(model, density, block, compile_kwargs: dict, simplify: bool = True) -> bool:
    """Give ``density`` (the :class:`~pymc_crais.samplers.engine.model_density.ModelDensity` of
    ``model``) a function of groups of points sharing the coordinates outside ``block``, with
    the gradient in ``block``, where that saves matrix work (module docstring); whether it has
    one now.

    ``block`` must be a union of whole variables, in increasing order (a
    :class:`~pymc_crais.core.conditional_laplace.Blocks`' latent block); anything else is
    left to the whole gradient. Compiled once per model and options; not on JAX (its calls
    would change shape with every Newton step, each a compilation, and its batched chains
    evaluate through a gate without it).
    """
    key = tuple(int(i) for i in np.asarray(block).ravel())
    if not getattr(density, "vectorized", False) or getattr(density, "_fn_grad", None) is None:
        return False
    if uses_jax(compile_kwargs):
        return False
    if key in density.block_functions:
        return True
    ckw = dict(compile_kwargs)
    with pytensor_lock():
        # no matrix work in the density, none in its gradient: nothing to compile (one look
        # a model, not a batched graph and its gradients a split)
        if not cached_on_model(model, ckw, ("matrix_work",),
                               lambda: _has_matrix_work(model, density.layout)):  # fmt: skip
            return False
        fn = cached_on_model(model, ckw, ("grouped_gradient", key, simplify),
                             lambda: _compile(model, density, key, ckw, simplify))  # fmt: skip
    if fn is None:
        return False
    if isinstance(fn, TwoStage) and density.numpy_cost is None:
        fn = fn.then  # the density has no NumPy stage to account for
    density.block_functions = {**density.block_functions, key: fn}
    return True


def _has_matrix_work(model, layout) -> bool:
    (lp, ll), theta = model_scalar_graph(model, layout)
    return matrix_nodes([theta], [lp, ll]) > 0


def _compile(model, density, key: tuple, ckw: dict, simplify: bool):
    try:
        return _compile_grouped(model, density, key, ckw, simplify)
    except Exception:  # a graph this cannot rebuild or vectorize: the whole gradient
        return None


def _compile_grouped(model, density, key: tuple, ckw: dict, simplify: bool):
    layout = density.layout
    (lp, ll), theta = model_scalar_graph(model, layout)
    pieces = slice_reads([lp, ll], theta, layout.dim)
    if pieces is None:
        return None
    latent = [cols for cols in sorted(pieces) if cols[0] in key]
    if tuple(i for a, b in latent for i in range(a, b)) != key:
        return None  # not whole variables in order
    if not _saves_matrix_work(lp, ll, theta, layout.dim, key, simplify):
        return None
    inputs, outputs = _grouped_graph(lp, ll, pieces, latent, simplify)
    _, stages = model_compilers(ckw, simplify)
    fn = stages.compile(inputs, outputs)
    x0 = initial_point_vector(model, layout)
    shared = np.setdiff1d(np.arange(layout.dim), np.array(key))
    args = (x0[None, shared], np.tile(x0[np.array(key)], (1, 2, 1)))
    if isinstance(fn, TwoStage):
        try:
            fn.first(*args)
        except Exception:  # no Python implementation of some Op: Numba alone
            fn = fn.then
    if not isinstance(fn, TwoStage):
        fn(*args)  # Numba's JIT here, once, not in every worker process
    return fn


def _saves_matrix_work(lp, ll, theta, dim: int, key: tuple, simplify: bool) -> bool:
    """Whether the block's gradient has fewer matrix nodes than the whole one (flat batched
    graphs)."""
    xb, (blp, bll) = batched_model_graph(lp, ll, theta, simplify)
    items = column_block_items([blp, bll], xb, dim)
    if items is None:
        return False
    wrt = [var for cols, var in items if cols[0] in key]
    costs = [blp.sum(), bll.sum()]
    grads = [pt.concatenate(pt.grad(c, wrt, disconnected_inputs="ignore"), axis=1) for c in costs]
    whole = batched_gradients(costs, xb, dim)
    return matrix_nodes([xb], [blp, bll, *grads]) < matrix_nodes([xb], [blp, bll, *whole])


def _grouped_graph(lp, ll, pieces: dict, latent: list, simplify: bool):
    """``([shared (M, d_s), latent (M, k, d_x)], [log prior, ℓ (M, k), their gradients in the
    latent columns (M, k, d_x)])``: each variable's slice of ``θ`` (or its reshape to the
    variable's shape) replaced by a variable, then vectorized with batch ``(M, 1)`` for the
    shared variables and ``(M, k)`` for the latent ones, so that what depends only on the
    shared ones is computed once a group."""
    from pytensor.graph.replace import graph_replace, vectorize_graph
    from pytensor.graph.traversal import applys_between
    from pytensor.tensor.shape import Reshape

    shared_in = pt.matrix("shared_rows", dtype="float64")
    latent_in = pt.tensor3("latent_rows", dtype="float64")
    reshaped: dict = {}  # a slice's Reshape outputs (a variable's value), by slice
    sliced = {var: cols for cols, vs in pieces.items() for var in vs}
    for node in applys_between(list(sliced), [lp, ll]):
        src = node.inputs[0] if node.inputs else None
        if isinstance(node.op, Reshape) and src in sliced:
            reshaped.setdefault(sliced[src], []).append(node.outputs[0])
    to_var, to_batch = {}, {}
    offsets = {"shared": 0, "latent": 0}
    for cols in sorted(pieces):
        a, b = cols
        w, side = b - a, "latent" if cols in latent else "shared"
        o = offsets[side]
        offsets[side] = o + w
        src = latent_in[:, :, o : o + w] if side == "latent" else shared_in[:, None, o : o + w]
        lead = (src.shape[0], src.shape[1]) if side == "latent" else (src.shape[0], 1)
        for var in [*pieces[cols], *reshaped.get(cols, [])]:
            shape = (w,) if var in sliced else _reshape_target(var)
            core = pt.tensor(dtype=var.dtype, shape=shape)
            to_var[var] = core
            to_batch[core] = src if len(shape) == 1 else src.reshape((*lead, *shape))
    outs = graph_replace([lp, ll], to_var, strict=False)
    outs = vectorize_graph(outs, replace=to_batch)
    zeros = pt.zeros((latent_in.shape[0], latent_in.shape[1]), dtype="float64")
    outs = [o + zeros for o in outs]  # (M, k) also for terms of the shared variables alone
    if simplify:
        outs = simplify_logp_graph(outs)
    grads = [pt.grad(o.sum(), latent_in, disconnected_inputs="ignore") for o in outs]
    return [shared_in, latent_in], [*outs, *grads]


def _reshape_target(var) -> tuple:
    """The constant shape a Reshape node gives ``var`` (``ValueError`` if not constant)."""
    target = var.owner.inputs[1]
    n = pt.get_vector_length(target)
    return tuple(int(pt.get_underlying_scalar_constant_value(target[i])) for i in range(n))
