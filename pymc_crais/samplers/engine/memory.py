"""Bounded memory: a batched model call evaluated in blocks of particles.

One batched call on ``N`` particles of a model with ``n`` observations holds several
``(N, n)`` arrays at once (the linear predictor, its softplus, the residuals of the
gradient...): 2,000 particles of a logistic regression with 10⁶ rows are 16 GB an array.
:func:`block_rows` bounds that: it estimates the bytes one particle needs from the number of
observed elements and returns how many particles fit in the ``memory_budget``;
:func:`call_in_blocks` evaluates a population that many rows at a time and concatenates.
Every output of the model functions is per particle, so a block computes the same rows as
the whole call: bit for bit for elementwise graphs; where a BLAS product is involved (a
regression's ``X β``) its rounding can depend on the number of rows, in the last bits
(``tests/samplers/test_scale.py`` checks both).
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = [
    "BYTES_PER_ELEMENT",
    "BYTES_PER_ELEMENT_JAX",
    "DEFAULT_MEMORY_BUDGET",
    "MIN_PADDED_ROWS",
    "block_rows",
    "call_in_blocks",
    "check_memory_budget",
    "jax_on_accelerator",
    "observed_elements",
    "padded_rows",
]

DEFAULT_MEMORY_BUDGET = 2**30
"""Default ``memory_budget`` in bytes (1 GiB) of one batched model call (with JAX on a GPU
too: a bigger budget there halves the sampling time at 10⁶ rows but compiles more shapes, and
the whole default run took longer; docs/scale.md, the GPU check)."""

BYTES_PER_ELEMENT = 32
"""Bytes a particle is assumed to need per observed element in a batched call with
gradients (C and Numba backends): four float64 arrays of the data's size alive at once.
Measured on a logistic regression (``benchmarks/bench_bigdata.py --memory``,
benchmarks/reports/benchmarks.md): the peak RSS of one Numba call grows by 8.0 bytes per particle and row
(PyTensor fuses the elementwise terms, so one ``(N, n)`` array is alive); four times that
leaves room for models whose graphs keep more data-sized temporaries."""

BYTES_PER_ELEMENT_JAX = 192
"""The same for the JAX backend, whose call keeps more temporaries: one call grew the peak
RSS by 45–53 bytes per particle and row (CPU JAX, 33 to 500 particles on 2·10⁴ and 10⁵ rows,
benchmarks/reports/benchmarks.md; XLA keeps five ``(N, n)`` float64 buffers of the logistic regression's
gradient graph, two of them broadcast constants); four times 48 (their mean is 48.9), the
margin of :data:`BYTES_PER_ELEMENT` (four times 8). With half of that (96) a whole JAX run at 10⁶ rows peaked at
1171 MiB under the default 1 GiB budget, the call's blocks holding half the budget; with 192,
914 MiB."""


def check_memory_budget(value) -> float:
    """``memory_budget`` as a number of bytes (``None``: the default, 1 GiB).

    Raises
    ------
    ValueError
        Naming the argument and the fix, for anything but a positive number (``inf``: no
        blocks).
    """
    if value is None:
        return float(DEFAULT_MEMORY_BUDGET)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ValueError(
            f"memory_budget must be a positive number of bytes (e.g. memory_budget=4 * 2**30 "
            f"for 4 GiB, or float('inf') to evaluate every particle in one call), got {value!r}"
        )
    return float(value)


MIN_PADDED_ROWS = 8
"""The smallest padded call of :func:`call_in_blocks` (``pad=True``)."""


def jax_on_accelerator() -> bool:
    """Whether JAX's default device is an accelerator (a GPU or TPU), not the CPU."""
    import jax

    return jax.devices()[0].platform != "cpu"


def _data_size(var) -> int:
    """Elements of a constant or shared variable's value (0 if it has none)."""
    if hasattr(var, "get_value"):
        return int(np.size(var.get_value(borrow=True)))
    data = getattr(var, "data", None)
    return 0 if data is None else int(np.size(data))


def observed_elements(model) -> int:
    """Total elements of the model's observed data (what one particle's call scales with)."""
    total = 0
    for rv in model.observed_RVs:
        total += _data_size(model.rvs_to_values[rv])
    return total


def block_rows(model, dim: int, memory_budget: float, jax: bool = False) -> int | None:
    """How many particles one batched call may take within ``memory_budget`` bytes.

    Parameters
    ----------
    model : pymc.Model
    dim : int
        ``d``, the particles' dimension (the floor of the per-particle size).
    memory_budget : float
        Bytes (``inf``: no limit).
    jax : bool, default False
        The functions run on PyTensor's JAX backend (:data:`BYTES_PER_ELEMENT_JAX`).

    Returns
    -------
    int or None
        ``None`` when no block is needed for any population size (infinite budget), else
        at least 1.
    """
    if not np.isfinite(memory_budget):
        return None
    per_element = BYTES_PER_ELEMENT_JAX if jax else BYTES_PER_ELEMENT
    per_particle = per_element * max(observed_elements(model), dim, 1)
    return max(1, int(memory_budget // per_particle))


def padded_rows(m: int, rows: int | None) -> int:
    """Rows of the call that evaluates ``m`` particles with padding: the next power of two
    (at least :data:`MIN_PADDED_ROWS`), never more than the block size ``rows``."""
    target = max(MIN_PADDED_ROWS, 1 << max(0, m - 1).bit_length())
    return max(m, target if rows is None else min(rows, target))


def call_in_blocks(fn, x: np.ndarray, rows: int | None, pad: bool = False) -> list:
    """``fn(x)`` for a batched ``fn`` returning per-particle arrays, ``rows`` particles a call.

    Parameters
    ----------
    fn : callable
        ``(N, d) -> sequence of arrays with N rows first``.
    x : numpy.ndarray, shape (N, d)
    rows : int or None
        Block size (``None`` or ``>= N``: one call).
    pad : bool, default False
        Pad each call to :func:`padded_rows` rows (copies of its last particle, whose
        outputs are dropped), so that ``fn`` only ever sees a few shapes: JAX compiles
        each new shape, which on a GPU costs more than the padded rows (set for JAX on an
        accelerator; under the default budget a 10⁶-row model's calls are then all of one
        shape, its block size; docs/scale.md, the GPU check).

    Returns
    -------
    list of numpy.ndarray
    """
    n = x.shape[0]
    if n == 0 or (not pad and (rows is None or n <= rows)):
        return fn(x)
    step = n if rows is None else min(rows, n)
    parts = []
    for i in range(0, n, step):
        block = x[i : i + step]
        m = block.shape[0]
        extra = padded_rows(m, rows) - m if pad else 0
        if extra:
            block = np.concatenate([block, np.repeat(block[-1:], extra, axis=0)])
        # to NumPy at once: JAX returns before it has computed, and blocks left in flight
        # would all hold their temporaries together
        parts.append([np.asarray(o)[:m] for o in fn(np.ascontiguousarray(block))])
    if len(parts) == 1:
        return parts[0]
    return [np.concatenate([p[k] for p in parts]) for k in range(len(parts[0]))]
