"""Batched forward-sampling graphs: ``n`` independent draws of a PyMC model's variables.

PyTensor's :func:`~pytensor.graph.replace.vectorize_graph` batches a random variable that
has a ``size`` by the new dimensions of its *first* parameter only. A variable whose first
parameter is fixed and another one batched, such as ``b ~ Normal(0, sqrt(s2), shape=d)``
below ``s2 ~ InverseGamma(...)`` (everyday hierarchical PyMC), then fails ("Size length is
incompatible with batched dimensions"), and a random variable that depends on nothing
batched (a random walk's initial value) is drawn once and shared by the whole batch.

:func:`vectorize_random_graph` walks the graph once, node by node. Every random node is
drawn for the whole batch:

* each parameter that became batched gets singleton axes between its new (batch) axes and
  its old ones, so that its old axes still line up with the variable's old batch shape;
* the variable is redrawn with the size ``(*batch_shape, *old batch shape)`` (the old
  ``size``, or the parameters' broadcast batch shape when it had none).

PyMC's symbolic random variables (``ZeroSumNormal``, ``LKJCholeskyCov``, ``Truncated``...)
are rebuilt the same way through their ``rebuild_rv``. One that PyMC cannot rebuild
(``LogitNormal``, the zero-inflated and other mixtures) is replaced by its inner graph,
whose ordinary random variables are then batched as above. Every other node whose inputs became
batched is batched by PyTensor's own rule for its Op, one node at a time; nodes that depend
on nothing random are kept as they are.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import pytensor.tensor as pt
from pytensor.graph.basic import Apply, Variable
from pytensor.graph.replace import vectorize_graph
from pytensor.graph.traversal import toposort
from pytensor.tensor.random.op import RandomVariable
from pytensor.tensor.random.utils import compute_batch_shape
from pytensor.tensor.type_other import NoneTypeT

__all__ = ["vectorize_random_graph"]


def vectorize_random_graph(outputs: Sequence[Variable], batch_shape: Sequence) -> list[Variable]:
    """``outputs`` drawn ``batch_shape`` times independently (batch axes on the left).

    Parameters
    ----------
    outputs : sequence of Variable
        Functions of random variables (e.g. a model's free variables, transformed).
    batch_shape : sequence of int or scalar Variable
        The batch, e.g. ``(n,)`` with ``n`` a symbolic integer.

    Returns
    -------
    list of Variable
        Each output with ``len(batch_shape)`` more leading axes.

    Raises
    ------
    NotImplementedError
        For a random node that cannot be batched (a size depending on other random
        variables, a symbolic random variable with several generators); the caller falls
        back to drawing one particle at a time.
    """
    outputs = list(outputs)
    batch = pt.as_tensor_variable([pt.as_tensor_variable(b).astype("int64") for b in batch_shape])
    batched: dict = {}
    _vectorize_into(outputs, batch, len(batch_shape), batched)
    return [batched.get(out, out) for out in outputs]


def _vectorize_into(outputs: list, batch, n_batch: int, batched: dict) -> None:
    """Batch every node that ``outputs`` depend on, recording ``old → new`` in ``batched``
    (which may already hold the batched versions of some inputs)."""
    for node in toposort(outputs):
        if all(out in batched for out in node.outputs):
            continue  # batched already (an inner graph's walk passes its node's ancestors)
        new_inputs = [batched.get(inp, inp) for inp in node.inputs]
        if is_random_node(node):
            new_outputs = _batched_random_outputs(node, new_inputs, batch, n_batch, batched)
            i = node.outputs.index(node.default_output())
            if new_outputs[i].type.ndim != node.outputs[i].type.ndim + n_batch:
                raise NotImplementedError(f"{node} could not be drawn for the batch")
        elif any(new is not old for new, old in zip(new_inputs, node.inputs, strict=True)):
            # PyTensor's rule for this Op, applied to this node alone
            new_outputs = vectorize_graph(
                list(node.outputs), replace=dict(zip(node.inputs, new_inputs, strict=True))
            )
        else:
            continue  # depends on nothing random: kept as it is
        for out, new in zip(node.outputs, new_outputs, strict=True):
            batched[out] = new


def _batched_random_outputs(node: Apply, new_inputs: list, batch, n_batch: int, batched: dict):
    """The outputs of the random ``node`` drawn for the batch: rebuilt on its batched inputs
    or, for a symbolic random variable PyMC cannot rebuild (``LogitNormal``, the zero-inflated
    mixtures), from its inner graph of ordinary random variables, batched in turn."""
    from pytensor.compile.builders import OpFromGraph

    try:
        return batched_random_node(node, new_inputs, batch).outputs
    except (NotImplementedError, TypeError):
        if not isinstance(node.op, OpFromGraph):
            raise
    inner = inlined_outputs(node)
    _vectorize_into(inner, batch, n_batch, batched)
    return [batched.get(i, i) for i in inner]


def inlined_outputs(node: Apply) -> list[Variable]:
    """The outputs of ``node`` (an ``OpFromGraph``) as its inner graph, written on the
    node's own inputs: the same random draws, from the same generators, made by the
    ordinary random variables inside."""
    from pytensor.graph.replace import clone_replace

    fgraph = node.op.fgraph
    if hasattr(fgraph, "unfreeze"):  # PyTensor keeps inner graphs frozen (immutable)
        fgraph = fgraph.unfreeze()
    return clone_replace(
        list(fgraph.outputs), replace=dict(zip(fgraph.inputs, node.inputs, strict=True))
    )


def is_random_node(node: Apply) -> bool:
    """Whether ``node`` draws random numbers from a generator input, with a size and
    distribution parameters (a PyTensor ``RandomVariable`` or a PyMC symbolic one)."""
    op = node.op
    if isinstance(op, RandomVariable):
        return True
    signature = getattr(op, "extended_signature", None)
    if signature is None or not hasattr(op, "rebuild_rv"):
        return False
    # symbolic variables whose inputs are draws made outside (a random walk's innovations)
    # do not follow their signature: PyTensor's rules batch those, from the batched draws
    (rngs, size, params), _ = op.get_input_output_type_idxs(signature)
    return len(rngs) + (size is not None) + len(params) == len(node.inputs) and bool(rngs)


def batched_random_node(node: Apply, new_inputs: list[Variable], batch) -> Apply:
    """The random ``node`` redrawn for the batch ``batch`` on the (batched) ``new_inputs``.

    Raises
    ------
    NotImplementedError
        When the ``size`` or the generator itself is batched, or a symbolic random
        variable has more than one generator.
    """
    op = node.op
    new_of = dict(zip(node.inputs, new_inputs, strict=True))
    old_params = list(op.dist_params(node))
    new_params = [new_of[p] for p in old_params]
    old_size = op.size_param(node)
    if old_size is None:
        return resized_symbolic_node(node, new_inputs, batch)
    if new_of[old_size] is not old_size:
        raise NotImplementedError(f"the size of {node} depends on random variables")
    rngs = [op.rng_param(node)] if isinstance(op, RandomVariable) else list(op.rng_params(node))
    if len(rngs) != 1:
        raise NotImplementedError(f"{node} has {len(rngs)} random generators")
    rng = rngs[0]
    if new_of[rng] is not rng:
        raise NotImplementedError(f"the random generator of {node} is batched")
    core = list(op.ndims_params)
    old_batch_ndim = node.default_output().type.ndim - op.ndim_supp
    aligned = []
    for new, old, c in zip(new_params, old_params, core, strict=True):
        added = new.type.ndim - old.type.ndim  # batch axes this parameter gained
        missing = old_batch_ndim - (old.type.ndim - c)  # old axes it left to broadcasting
        if added > 0 and missing > 0:
            new = pt.expand_dims(new, tuple(range(added, added + missing)))
        aligned.append(new)
    if not isinstance(old_size.type, NoneTypeT):
        old_batch = old_size
    elif aligned:  # from the new parameters: the old ones may hang on the old draws
        gained = max(new.type.ndim - old.type.ndim for new, old in zip(new_params, old_params))
        old_batch = compute_batch_shape(aligned, core)[gained:]
    else:
        old_batch = pt.zeros((0,), dtype="int64")
    size = pt.concatenate([batch, pt.as_tensor_variable(old_batch).astype("int64")])
    if isinstance(op, RandomVariable):
        return op.make_node(rng, size, *aligned)
    return op.rebuild_rv(*aligned, size=size, rng=rng).owner


def resized_symbolic_node(node: Apply, new_inputs: list[Variable], batch) -> Apply:
    """A symbolic random variable without a size (``LKJCholeskyCov``): rebuilt on its batched
    inputs (its component distributions, drawn for the batch upstream), or drawn ``batch``
    times by PyMC's ``change_dist_size`` when none of them is batched."""
    op = node.op
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        if any(new is not old for new, old in zip(new_inputs, node.inputs, strict=True)):
            new_of = dict(zip(node.inputs, new_inputs, strict=True))
            [rng] = op.rng_params(node)
            params = [new_of[p] for p in op.dist_params(node)]
            return op.rebuild_rv(*params, rng=rng).owner
        from pymc.distributions.shape_utils import change_dist_size

        return change_dist_size(node.default_output(), new_size=batch, expand=True).owner
