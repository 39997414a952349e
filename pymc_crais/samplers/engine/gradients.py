"""Gradients of the batched model graph with respect to the particle matrix, by column block.

The batched graph reads the particles ``xb`` one variable's columns at a time
(``xb[:, a:b]``); :func:`batched_gradients` differentiates with respect to those blocks and
joins the results, which leaves fewer nodes for the compiler than ``pt.grad(cost, xb)``
(used by :mod:`pymc_crais.samplers.engine.compile`).
"""

from __future__ import annotations

import pytensor.tensor as pt

__all__ = ["batched_gradients", "column_block_items", "column_blocks", "slice_reads"]


def column_blocks(outputs, xb, dim: int) -> list | None:
    """The variables ``xb[:, a:b]`` through which alone ``outputs`` read ``xb``, ordered by
    column and covering ``[0, dim)`` once; ``None`` when the graph reads ``xb`` otherwise."""
    items = column_block_items(outputs, xb, dim)
    return None if items is None else [var for _, var in items]


def column_block_items(outputs, xb, dim: int) -> list | None:
    """:func:`column_blocks` with their columns: ``[((a, b), xb[:, a:b]), ...]``."""
    reads = slice_reads(outputs, xb, dim)
    if reads is None or any(len(v) > 1 for v in reads.values()):
        return None
    return [(k, reads[k][0]) for k in sorted(reads)]


def slice_reads(outputs, source, dim: int) -> dict | None:
    """``{(a, b): [variables]}``: the slices ``source[a:b]`` (a vector) or ``source[:, a:b]``
    (a matrix) through which alone ``outputs`` read ``source``, covering ``[0, dim)`` once
    (several nodes may read one slice); ``None`` when the graph reads it otherwise."""
    from pytensor.graph.traversal import applys_between
    from pytensor.tensor.subtensor import Subtensor, get_idx_list

    reads: dict = {}
    lead = [slice(None)] * (source.ndim - 1)
    for node in applys_between([source], outputs):
        if not any(i is source for i in node.inputs):
            continue
        if not (isinstance(node.op, Subtensor) and node.inputs[0] is source):
            return None
        idx = get_idx_list(node.inputs, node.op.idx_list)
        if len(idx) != source.ndim or list(idx[:-1]) != lead or not isinstance(idx[-1], slice):
            return None
        sl = idx[-1]
        const = pt.get_underlying_scalar_constant_value
        try:
            start = 0 if sl.start is None else int(const(sl.start))
            stop = dim if sl.stop is None else int(const(sl.stop))
        except Exception:  # a symbolic bound
            return None
        if sl.step is not None:
            return None
        reads.setdefault((start, stop), []).append(node.outputs[0])
    keys = sorted(reads)
    if not keys or keys[0][0] != 0 or keys[-1][1] != dim:
        return None
    if any(a[1] != b[0] for a, b in zip(keys[:-1], keys[1:], strict=False)):
        return None
    return reads


def batched_gradients(costs, xb, dim: int) -> list:
    """``[∂ cost / ∂ xb for cost in costs]``, each ``(N, dim)``.

    The model's graph reads the particles ``xb`` one variable's columns at a time
    (``xb[:, a:b]``); the gradient of each block is then joined along the columns (one
    ``Join``) instead of being added into a zero matrix block by block (an ``IncSubtensor``
    per block and gradient, and their reshapes), the form ``pt.grad(cost, xb)`` takes.
    Fewer nodes to generate code for: on a cold cache, 6.0–6.3 s CPU instead of 7.1–7.2 s
    for a 3-parameter regression's gradient function (29 nodes instead of 34). The values
    are the same (``0 + g`` is ``g``, except that ``-0.0`` stays ``-0.0``). Where the graph
    reads ``xb`` in another way, ``pt.grad(cost, xb)`` is used.
    """
    blocks = column_blocks(costs, xb, dim)
    if blocks is None:
        return [pt.grad(c, xb, disconnected_inputs="ignore") for c in costs]
    out = []
    for c in costs:
        grads = pt.grad(c, blocks, disconnected_inputs="ignore")
        out.append(grads[0] if len(grads) == 1 else pt.concatenate(grads, axis=1))
    return out
