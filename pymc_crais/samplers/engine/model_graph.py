"""The pieces of a model's batched graph and its compilers, shared by
:mod:`~pymc_crais.samplers.engine.compile` (the model's density and gradient) and
:mod:`~pymc_crais.samplers.engine.block_gradient` (the gradient in a block of coordinates)."""

from __future__ import annotations

import pytensor.tensor as pt
from pytensor.graph.replace import vectorize_graph

from .jax_data import DataCompiler
from .rewrites import simplify_logp_graph, with_fast_softplus
from .staged import StagedCompiler, numpy_first_kwargs

__all__ = ["batched_model_graph", "model_compilers", "uses_jax"]


def uses_jax(compile_kwargs: dict | None) -> bool:
    """Whether functions compiled with ``compile_kwargs`` run on PyTensor's JAX linker."""
    import pytensor
    from pytensor.compile.mode import get_mode

    mode = (compile_kwargs or {}).get("mode") or pytensor.config.mode
    try:
        return type(get_mode(mode).linker).__name__.startswith("JAX")
    except Exception:  # an unknown mode: PyTensor will say so when compiling
        return False


def batched_model_graph(lp, ll, theta, simplify: bool):
    """``(xb, [log prior, ℓ])`` of a particle matrix ``xb`` (``simplify``: with the rewrites of
    :func:`simplify_logp_graph`, applied after vectorizing: canonical forms can hide batch
    dimensions)."""
    xb = pt.matrix("theta_batch", dtype="float64")
    bouts = vectorize_graph([lp, ll], replace={theta: xb})
    # an output that does not depend on θ (no likelihood terms) is not batched: broadcast
    zeros = pt.zeros((xb.shape[0],), dtype="float64")
    bouts = [o if o.ndim == 1 else o + zeros for o in bouts]
    return xb, simplify_logp_graph(bouts) if simplify else bouts


def model_compilers(ckw: dict, simplify: bool):
    """``(compiler, staged compiler)`` of a model's functions: NumPy first and Numba after a
    budget (:mod:`~pymc_crais.samplers.engine.staged`), the data as inputs on JAX
    (:mod:`~pymc_crais.samplers.engine.jax_data`), the fast softplus where ``simplify``."""
    numpy_ckw = numpy_first_kwargs(ckw)
    if simplify:
        ckw = with_fast_softplus(ckw)
        numpy_ckw = numpy_ckw and with_fast_softplus(numpy_ckw)
    compiler = DataCompiler(ckw, uses_jax(ckw))
    return compiler, StagedCompiler(compiler, numpy_ckw and DataCompiler(numpy_ckw, False))
