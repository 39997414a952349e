"""The model's gradient in a block of coordinates alone, where it costs much less than the
whole gradient.

The conditional-Laplace start (:mod:`pymc_crais.core.conditional_laplace`) runs Newton's
method on the latent block ``x`` with the hyperparameters ``θ`` held fixed: ``d_x + 1``
(or ``c + 1``) gradients a ``θ`` draw and step, of which it reads only the latent columns
(:meth:`~pymc_crais.core.density.BatchedDensity.evaluate_block`). Where ``θ`` reaches the
density through a matrix factorization, the whole gradient pays for differentiating it: for
``pm.gp.Latent``, whose values are ``L(θ) v`` with ``L`` the Cholesky factor of the kernel
matrix, reverse mode through ``L`` takes two triangular solves and products of ``d_x × d_x``
matrices a particle, and the latent block's gradient alone costs about a third of the whole
one (40 points: 27 against 80 µs a particle, Numba).

:func:`add_block_gradient` compiles a function of the values and the block's gradient only
where the graph of the whole gradient holds more matrix nodes (linear algebra, products of
two matrices) than the block's, a property of the graph, not of a clock: the run's bits do not
depend on the machine's load. A model whose ``θ`` enters elementwise (random effects,
state-space models, regressions) gains nothing and compiles nothing.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt

from .compile import cached_on_model, initial_point_vector, model_scalar_graph
from .gradients import batched_gradients, column_block_items
from .model_graph import batched_model_graph, model_compilers
from .reproducible import pytensor_lock
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
    ``model``) a function of its values and gradient in the coordinates ``block`` where that
    saves matrix work (module docstring); whether it has one now.

    ``block`` must be a union of whole variables, in increasing order (a
    :class:`~pymc_crais.core.conditional_laplace.Blocks`' latent block); anything else is
    left to the whole gradient. Compiled once per model and options.
    """
    key = tuple(int(i) for i in np.asarray(block).ravel())
    if not getattr(density, "vectorized", False) or getattr(density, "_fn_grad", None) is None:
        return False
    if key in density.block_functions:
        return True
    with pytensor_lock():
        fn = cached_on_model(
            model, dict(compile_kwargs), ("block_gradient", key, simplify),
            lambda: _compile(model, density, key, dict(compile_kwargs), simplify),
        )  # fmt: skip
    if fn is None:
        return False
    if isinstance(fn, TwoStage) and density.numpy_cost is None:
        fn = fn.then  # the density has no NumPy stage to account for
    density.block_functions = {**density.block_functions, key: fn}
    return True


def _compile(model, density, key: tuple, ckw: dict, simplify: bool):
    layout = density.layout
    (lp, ll), theta = model_scalar_graph(model, layout)
    xb, (blp, bll) = batched_model_graph(lp, ll, theta, simplify)
    items = column_block_items([blp, bll], xb, layout.dim)
    if items is None:
        return None
    chosen = [(cols, var) for cols, var in items if cols[0] in key]
    if tuple(i for (a, b), _ in chosen for i in range(a, b)) != key:
        return None  # not whole variables in order
    wrt = [var for _, var in chosen]
    costs = [blp.sum(), bll.sum()]
    grads = [pt.concatenate(pt.grad(c, wrt, disconnected_inputs="ignore"), axis=1) for c in costs]
    whole = batched_gradients(costs, xb, layout.dim)
    if matrix_nodes([xb], [blp, bll, *grads]) >= matrix_nodes([xb], [blp, bll, *whole]):
        return None
    _, stages = model_compilers(ckw, simplify)
    fn = stages.compile([xb], [blp, bll, *grads])
    x0 = np.tile(initial_point_vector(model, layout), (2, 1))
    if isinstance(fn, TwoStage):
        try:
            fn.first(x0)
        except Exception:  # no Python implementation of some Op: Numba alone
            fn = fn.then
    if not isinstance(fn, TwoStage):
        fn(x0)  # Numba's JIT here, once, not in every worker process
    return fn
