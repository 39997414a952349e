"""Map raveled unconstrained particles back to named model variables (deterministics too)."""

from __future__ import annotations

import warnings

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.replace import vectorize_graph

from ...warnings import user_stacklevel
from .compile import (
    ParameterLayout,
    PerParticleFallbackWarning,
    cached_on_model,
    joined_scalar_graph,
    resolve_compile_kwargs,
)
from .reproducible import compile_function, few_calls_compile_kwargs

__all__ = ["PosteriorMapper", "posterior_mapper"]


def posterior_mapper(model, layout: ParameterLayout, compile_kwargs: dict | None = None):
    """A :class:`PosteriorMapper` for ``model``, compiled once per model and options."""
    ckw = dict(compile_kwargs or {})
    return cached_on_model(model, ckw, ("posterior",), lambda: PosteriorMapper(model, layout, ckw))


class PosteriorMapper:
    """Turns an ``(N, d)`` array into ``{name: array of shape (N, *var_shape)}``.

    Outputs are the free random variables in their constrained space (discrete ones
    rounded and cast to their dtype) and every ``pm.Deterministic``, with one batched call.

    Parameters
    ----------
    model : pymc.Model
    layout : ParameterLayout
    compile_kwargs : dict, optional
    """

    def __init__(self, model, layout: ParameterLayout, compile_kwargs: dict | None = None):
        self.layout = layout
        free = list(model.free_RVs)
        constrained = model.replace_rvs_by_values(free)
        deterministics = model.replace_rvs_by_values(model.deterministics)
        self.names = [rv.name for rv in free] + [d.name for d in model.deterministics]
        self.dtypes = [rv.dtype for rv in free] + [d.dtype for d in model.deterministics]
        outs, theta = joined_scalar_graph(model, list(constrained) + list(deterministics), layout)
        # called once a chain: no code generation (few_calls_compile_kwargs)
        ckw = few_calls_compile_kwargs(resolve_compile_kwargs(None, compile_kwargs))
        self.vectorized = True
        try:
            xb = pt.matrix("theta_batch", dtype="float64")
            bouts = vectorize_graph(outs, replace={theta: xb})
            # an output that does not depend on the particles keeps its core shape: broadcast
            self._batched = [b.ndim == o.ndim + 1 for b, o in zip(bouts, outs, strict=True)]
            self._fn = compile_function([xb], bouts, ckw)
        except Exception as err:
            warnings.warn(
                f"could not vectorize the map to named variables ({type(err).__name__}: "
                f"{err}); converting particles one at a time",
                PerParticleFallbackWarning,
                stacklevel=user_stacklevel(),
            )
            self.vectorized = False
            self._batched = [True] * len(self.names)  # the loop stacks every output per row
            self._fn = compile_function([theta], outs, ckw)

    def __call__(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """Named arrays for the particles ``x`` (shape ``(N, d)``); a row repeated (draws
        resampled from weights repeat many) is mapped once."""
        x = np.ascontiguousarray(x, dtype=np.float64)
        x, inverse = _unique_rows(x)
        if self.vectorized:
            values = self._fn(x)
        else:
            rows = [self._fn(row) for row in x]
            values = [np.stack([r[i] for r in rows]) for i in range(len(self.names))]
        out = {}
        for name, dtype, val, batched in zip(self.names, self.dtypes, values, self._batched,
                                             strict=True):  # fmt: skip
            val = np.asarray(val)
            if not batched:  # a constant deterministic: broadcast, into memory of its own
                val = np.broadcast_to(val, (x.shape[0], *val.shape))
                val = val if inverse is not None else val.copy()
            if inverse is not None:
                val = val[inverse]  # (a copy)
            if np.dtype(dtype).kind in "iub":
                val = np.round(val).astype(dtype)
            out[name] = val
        return out


def _unique_rows(x: np.ndarray):
    """``(rows, inverse)``: the distinct rows of ``x`` in order of first appearance, and
    where each row of ``x`` is among them (``(x, None)`` when all are distinct)."""
    if x.shape[0] < 2:
        return x, None
    keys = np.ascontiguousarray(x).view(np.dtype((np.void, x.dtype.itemsize * x.shape[1])))
    _, first, inverse = np.unique(keys.ravel(), return_index=True, return_inverse=True)
    if first.size == x.shape[0]:
        return x, None
    order = np.argsort(first)  # distinct rows in order of first appearance
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return x[first[order]], rank[inverse.ravel()]
