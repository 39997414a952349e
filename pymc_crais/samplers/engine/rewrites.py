"""Graph rewrites that make common model log-densities cheaper to evaluate in batch.

PyMC writes the Bernoulli log-density with a logit parameter as

``check(switch(y, log(sigmoid(η)), log1p(-sigmoid(η))), 0 <= sigmoid(η) <= 1)``

which PyTensor's stabilization turns into ``switch(y, -softplus(-η), -softplus(η))``. Every
element then costs two softplus evaluations (both branches of an elementwise ``switch``
are computed) plus a sigmoid for the parameter check, and the gradient needs a further
division: about six transcendental functions per data row and particle, where
``where(y, η, 0) − softplus(η)`` and its gradient ``where(y, 1, 0) − sigmoid(η)`` need three.
For logistic regressions the likelihood is nearly all of the work, so this is the
difference between PyTensor and hand-written NumPy (``benchmarks/bench_logp.py``).

The rewrites here are exact identities, applied to the model's log-density graph before
it is vectorized and differentiated (:func:`simplify_logp_graph`):

- :func:`local_switch_neg_softplus`: ``switch(c, -softplus(-x), -softplus(x))`` →
  ``switch(c, x, 0) − softplus(x)`` (and the mirrored form), since
  ``softplus(-x) = softplus(x) − x``. The absolute rounding error is at most a few ulp of
  ``x``.
- :func:`local_sigmoid_range_check`: the conditions ``sigmoid(x) >= 0`` and
  ``sigmoid(x) <= 1`` of a parameter check are replaced by ``True``. They fail only for a
  NaN ``x``, where the check returned ``-inf``; without it the log-density is NaN, which
  :func:`pymc_crais.core.density.sanitize_log_density` maps to ``-inf`` all the same (zero
  weight, a rejected move).

Any other graph passes through unchanged; if rewriting fails for an unforeseen graph the
original graph is used (see :func:`simplify_logp_graph`).

One more rewrite runs late, inside the compilation (:func:`with_fast_softplus`), because
PyTensor's stabilization would turn it back into ``softplus``:

- :func:`local_softplus_to_log_exp`: ``softplus(x)`` → ``maximum(x, 0) + log(1 + exp(−|x|))``
  for float64 ``x`` whose every use adds, subtracts, sums, negates or scales it by a
  constant. PyTensor's own softplus evaluates ``log1p(exp(x))`` for ``x`` up to 18, and
  ``log1p`` of large arguments is slow (about 26 ns an element against 11 ns for this
  form under Numba). It is not bit-identical: ``log(1 + e)`` for ``e = exp(−|x|) ≤ 1`` has an
  absolute error below ``2.3·10⁻¹⁶`` (half an ulp of ``1 + e``, through a function of slope
  at most 1), which is below the rounding of any sum of log-densities it enters. For
  ``x < −37`` it returns 0 where softplus returns ``exp(x) < 10⁻¹⁶``. ``±inf`` and NaN map
  as softplus maps them. In a sum of log-density terms an absolute error is an error in log
  space (a relative error of the density); a softplus used otherwise (``log(softplus(x))``,
  a scale parameter), where a tiny value's relative error would matter, is left alone. The
  gradient is not affected: it was formed from ``softplus`` (``sigmoid``) before this
  rewrite runs.
- :func:`local_sigmoid_to_exp`: that gradient's ``sigmoid(x)`` → ``switch(x ≥ 0, 1, e) /
  (1 + e)`` with the same ``e = exp(−|x|)``, so that a logistic density and its gradient
  share one exponential per element (PyTensor's sigmoid computes its own).
"""

from __future__ import annotations

import pytensor.tensor as pt
from pytensor.graph.basic import Constant
from pytensor.graph.fg import FunctionGraph, Output
from pytensor.graph.rewriting.basic import in2out, node_rewriter
from pytensor.graph.rewriting.utils import rewrite_graph
from pytensor.scalar import basic as ps
from pytensor.scalar.math import Softplus
from pytensor.tensor.elemwise import CAReduce, Elemwise
from pytensor.tensor.math import sigmoid

__all__ = [
    "checks_per_particle",
    "local_fast_logistic",
    "local_sigmoid_range_check",
    "local_sigmoid_to_exp",
    "local_softplus_to_log_exp",
    "local_switch_neg_softplus",
    "simplify_logp_graph",
    "with_fast_softplus",
]


def _elemwise_of(var, scalar_op_type):
    """The single input of ``var`` when ``var = Elemwise(scalar_op_type)(input)``, else None."""
    node = var.owner
    if node is None or not isinstance(node.op, Elemwise):
        return None
    if not isinstance(node.op.scalar_op, scalar_op_type) or len(node.inputs) != 1:
        return None
    return node.inputs[0]


def _negated(var):
    """``x`` when ``var`` is ``-x`` written as ``neg(x)`` or ``mul(-1, x)`` (canonical form)."""
    inner = _elemwise_of(var, ps.Neg)
    if inner is not None:
        return inner
    node = var.owner
    if (
        node is None
        or not isinstance(node.op, Elemwise)
        or not isinstance(node.op.scalar_op, ps.Mul)
    ):
        return None
    if len(node.inputs) != 2:
        return None
    a, b = node.inputs
    if _is_constant(a, -1):
        return b
    if _is_constant(b, -1):
        return a
    return None


def _neg_softplus_arg(var):
    """``x`` when ``var = -softplus(x)``, else None."""
    inner = _negated(var)
    return None if inner is None else _elemwise_of(inner, Softplus)


@node_rewriter([pt.switch])
def local_switch_neg_softplus(fgraph, node):
    """``switch(c, -softplus(-x), -softplus(x))`` → ``switch(c, x, 0) − softplus(x)``.

    The mirrored ``switch(c, -softplus(x), -softplus(-x))`` becomes
    ``switch(c, 0, x) − softplus(x)``. This is Bernoulli-logit's log-density after
    stabilization; the rewrite halves its transcendental functions and those of its
    gradient.
    """
    cond, a, b = node.inputs
    sa, sb = _neg_softplus_arg(a), _neg_softplus_arg(b)
    if sa is None or sb is None:
        return None
    zero = pt.zeros((), dtype=node.outputs[0].dtype)
    if _negated(sa) is sb:  # a = -softplus(-x), b = -softplus(x), x = sb
        x = sb
        out = pt.switch(cond, x, zero) - pt.softplus(x)
    elif _negated(sb) is sa:  # a = -softplus(x), b = -softplus(-x), x = sa
        x = sa
        out = pt.switch(cond, zero, x) - pt.softplus(x)
    else:
        return None
    out = out.astype(node.outputs[0].dtype)
    if out.type.broadcastable != node.outputs[0].type.broadcastable:
        return None  # a broadcasting pattern this rewrite does not handle: leave it
    return [out]


def _is_constant(var, value) -> bool:
    if not isinstance(var, Constant):
        return False
    data = var.data
    try:
        return bool((data == value).all())
    except AttributeError:
        return bool(data == value)


@node_rewriter([pt.ge, pt.le])
def local_sigmoid_range_check(fgraph, node):
    """``sigmoid(x) >= 0`` and ``sigmoid(x) <= 1`` → ``True`` (they fail only for NaN ``x``)."""
    lhs, rhs = node.inputs
    x = _elemwise_of(lhs, type(sigmoid.scalar_op))
    if x is None:
        return None
    bound = 0 if isinstance(node.op.scalar_op, ps.GE) else 1
    if not _is_constant(rhs, bound):
        return None
    out = pt.ones_like(x, dtype="bool")
    if out.type.broadcastable != node.outputs[0].type.broadcastable:
        return None  # the bound broadcasts x: leave it
    return [out]


_REWRITER = in2out(local_sigmoid_range_check, local_switch_neg_softplus, name="pymc_crais_logp")


def checks_per_particle(outputs: list, check_bounds: bool = True) -> list:
    """PyMC's parameter checks as ``switch(all(conditions), value, -inf)`` in the graph of
    one particle, before the graph is batched.

    A log-density term with parameter conditions (``σ > 0``, ``0 ≤ p ≤ 1``) is a
    ``CheckParameterValue`` node, which PyMC's compilation turns into
    ``switch(all(conditions), value, -inf)``. Batched as it is, its conditions are
    reduced over the whole batch (PyTensor vectorizes a check as one assertion over
    all rows): one particle whose scale underflowed to 0 gave every particle of the
    call ``-inf``, and each HMC transition with such a particle rejected all moves.
    Rewritten here, on the graph of one particle, the reduction covers that
    particle's conditions only, and :func:`~pytensor.graph.replace.vectorize_graph`
    batches the switch row by row. With ``check_bounds=False`` (``pm.Model(
    check_bounds=False)``) the checks are removed, as PyMC's compilation does. Checks
    that PyMC does not let become ``-inf`` are left as they are.

    Parameters
    ----------
    outputs : list of pytensor.tensor.TensorVariable
        Log-density graphs of one particle (their inputs are kept).
    check_bounds : bool, default True
        The model's ``check_bounds``.

    Returns
    -------
    list of pytensor.tensor.TensorVariable
    """
    from pymc.logprob.utils import (
        CheckParameterValue,
        local_check_parameter_to_ninf_switch,
        local_remove_check_parameter,
    )
    from pytensor.graph.traversal import applys_between

    outputs = list(outputs)
    if not any(isinstance(n.op, CheckParameterValue) for n in applys_between([], outputs)):
        return outputs
    rewrite = local_check_parameter_to_ninf_switch if check_bounds else local_remove_check_parameter
    return apply_node_rewriters(outputs, [rewrite], "pymc_crais_checks")


def apply_node_rewriters(outputs: list, rewriters: list, name: str) -> list:
    """``outputs`` with the node ``rewriters`` applied (one inputs-to-outputs walk) on a
    clone of their graph, so the model's own graph is not touched; the graph's inputs
    (data, shared random generators) are kept."""
    fgraph = FunctionGraph(outputs=list(outputs), clone=True, copy_inputs=False)
    in2out(*rewriters, name=name).rewrite(fgraph)
    return list(fgraph.outputs)


def simplify_logp_graph(outputs: list) -> list:
    """Canonicalize and stabilize ``outputs``, then apply this module's rewrites.

    The graph is cloned (its inputs are kept), so the model's own graph is not touched.
    If anything fails, ``outputs`` are returned unchanged: these rewrites only make the
    compiled function faster, never different.

    Parameters
    ----------
    outputs : list of pytensor.tensor.TensorVariable

    Returns
    -------
    list of pytensor.tensor.TensorVariable
    """
    try:
        new = rewrite_graph(
            list(outputs),
            include=("canonicalize", "stabilize"),
            custom_rewrite=_REWRITER,
            clone=True,
        )
    except Exception:  # pragma: no cover - defensive: an exotic graph the rewrites trip on
        return list(outputs)
    return [n.astype(o.dtype) if n.dtype != o.dtype else n for n, o in zip(new, outputs)]


def _additive_client(client) -> bool:
    """Whether ``client`` (a node using a softplus term) only adds, subtracts, sums, negates
    or scales it by constants, or is a graph output (the outputs here are log-densities)."""
    if isinstance(client.op, Output):
        return True
    if isinstance(client.op, CAReduce):  # a sum
        return isinstance(client.op.scalar_op, ps.Add)
    if not isinstance(client.op, Elemwise):
        return False
    op = client.op.scalar_op
    if isinstance(op, ps.Add | ps.Sub | ps.Neg):
        return True
    if isinstance(op, ps.Mul):
        return sum(not isinstance(i, Constant) for i in client.inputs) == 1
    return False


@node_rewriter([pt.softplus])
def local_softplus_to_log_exp(fgraph, node):
    """``softplus(x)`` → ``maximum(x, 0) + log(1 + exp(−|x|))`` for float64 ``x`` in sums.

    Applies only where every use of the softplus adds, subtracts, negates or scales it by a
    constant (a log-density term): there the absolute error below ``2.3·10⁻¹⁶`` is an error
    in log space, i.e. a relative error of the density. Elsewhere (``log(softplus(x))``, a
    softplus used as a scale parameter) the relative error of a tiny ``softplus(x)`` would
    matter, so those nodes keep PyTensor's softplus. Meant to run after stabilization (which
    would undo it) and before elementwise fusion (so the new operations join one loop); see
    :func:`with_fast_softplus`.
    """
    (x,) = node.inputs
    if x.dtype != "float64" or node.outputs[0].dtype != "float64":
        return None
    clients = fgraph.clients.get(node.outputs[0], []) if fgraph is not None else []
    if not clients or not all(_additive_client(c) for c, _ in clients):
        return None
    out = pt.maximum(x, 0.0) + pt.log(1.0 + pt.exp(-pt.abs(x)))
    if out.type.broadcastable != node.outputs[0].type.broadcastable:  # pragma: no cover
        return None
    return [out]


@node_rewriter([pt.sigmoid])
def local_sigmoid_to_exp(fgraph, node):
    """``sigmoid(x)`` → ``switch(x ≥ 0, 1, e) / (1 + e)`` with ``e = exp(−|x|)``, float64.

    The same ``exp(−|x|)`` as :func:`local_softplus_to_log_exp`'s, so that a logistic
    log-density and its gradient (``sigmoid``, the derivative of ``softplus``) share one
    exponential per element instead of two (about 17 % of a Sonar-sized logistic
    regression's batched density-and-gradient call). Within a few ulp of
    :func:`scipy.special.expit` (relative) wherever that result is a normal number, in
    both tails; ``±inf`` → 1 and 0, NaN → NaN.
    """
    (x,) = node.inputs
    if x.dtype != "float64" or node.outputs[0].dtype != "float64":
        return None
    e = pt.exp(-pt.abs(x))
    out = pt.switch(pt.ge(x, 0.0), 1.0, e) / (1.0 + e)
    if out.type.broadcastable != node.outputs[0].type.broadcastable:  # pragma: no cover
        return None
    return [out]


@node_rewriter([pt.softplus, pt.sigmoid])
def local_fast_logistic(fgraph, node):
    """:func:`local_softplus_to_log_exp` and :func:`local_sigmoid_to_exp` as one node
    rewriter (what :func:`with_fast_softplus` registers: a walk over two separate rewriters
    holds a cache that cannot be pickled, and compiled functions are sent to workers)."""
    if isinstance(node.op.scalar_op, Softplus):
        return local_softplus_to_log_exp.transform(fgraph, node)
    return local_sigmoid_to_exp.transform(fgraph, node)


#: Where :func:`with_fast_softplus` puts its rewrite in PyTensor's rewrite database: after
#: canonicalize (1), stabilize (1.5), specialize (2) and uncanonicalize (3), before the
#: add/mul flattening (48) and the elementwise fusion (49).
FAST_SOFTPLUS_POSITION = 47.5


def with_fast_softplus(compile_kwargs: dict) -> dict:
    """``compile_kwargs`` whose mode also runs :func:`local_softplus_to_log_exp` and
    :func:`local_sigmoid_to_exp`.

    The rewrite is registered in a copy of the mode (``compile_kwargs["mode"]``, or PyTensor's
    default) at :data:`FAST_SOFTPLUS_POSITION`; the linker is unchanged. A mode that cannot
    take an extra rewrite is returned as it was.

    Parameters
    ----------
    compile_kwargs : dict
        Keyword arguments for PyMC's ``compile`` / ``pytensor.function``.

    Returns
    -------
    dict
    """
    from pytensor.compile.mode import get_mode

    try:
        mode = get_mode(compile_kwargs.get("mode"))
        rewriter = in2out(local_fast_logistic, name="pymc_crais_fast_softplus")
        mode = mode.register((rewriter, FAST_SOFTPLUS_POSITION))
    except Exception:  # pragma: no cover - a custom mode without a rewrite query
        return dict(compile_kwargs)
    return {**compile_kwargs, "mode": mode}
