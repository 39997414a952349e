"""All chains in one process, their particles evaluated in one batched model call.

With an accelerator (``backend="jax"``), one process should drive it with big batches
instead of one process per chain, each with small ones. :func:`run_chains_batched` runs
every chain's unchanged code in a thread of its own; each chain's density is a
:class:`GatedDensity` that hands its ``(N, d)`` request to a shared :class:`BatchGate`
and waits. When every chain still running has a request waiting, the gate evaluates them
all in one call on their ``(chains × N, d)`` concatenation (one call per kind: values
alone, or values and gradients), and hands each chain its rows back.

Each chain still draws from its own generator and computes on its own rows, so its result is
the one it gets alone, as long as the model function computes a row the same way in a batch
of any size (checked bit for bit in ``tests/samplers/test_scale.py``, with Numba and JAX).
Only one thread evaluates the model at a time; the rest of a chain's work is NumPy.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable

from ...chain_result import ChainResult
from ...core.batch_gate import BatchGate, GatedDensity, run_gated

__all__ = ["BatchGate", "GatedDensity", "run_chains_batched"]


class _LockedDraw:
    """``draw(rng, n)`` one chain at a time (the compiled prior sampler is re-seeded and
    called, which two threads must not interleave). A draw that evaluates the chain's
    density (``needs_density``: the conditional-Laplace start's Newton runs) calls no
    compiled sampler and must not hold the lock: its evaluations wait at the gate for the
    other chains'."""

    def __init__(self, draw, lock: threading.Lock):
        self.draw, self.lock = draw, lock
        self.needs_density = bool(getattr(draw, "needs_density", False))

    def __call__(self, rng, n, *density):
        if self.needs_density:
            return self.draw(rng, n, *density)
        with self.lock:
            return self.draw(rng, n)


def run_chains_batched(
    tasks: list, run: Callable[[object], ChainResult], on_done: Callable[[ChainResult], None]
) -> tuple[list[ChainResult], BatchGate]:
    """Run ``run(task)`` for every task in a thread of this process, all chains' model
    calls batched together (see the module's description).

    Parameters
    ----------
    tasks : list
        Chain tasks with ``chain``, ``density`` and ``draw`` fields (dataclasses).
    run : callable
        ``run(task) -> ChainResult``.
    on_done : callable
        Called with each chain's result as it finishes.

    Returns
    -------
    (list, BatchGate)
        In the order of ``tasks``, each chain's ``ChainResult`` or, for a chain that
        failed, its exception (the other chains run to their end); and the gate (its call
        statistics).
    """
    density = tasks[0].density
    if any(t.density is not density for t in tasks):
        raise ValueError("batched chains must share one density")
    gate = BatchGate(density, range(len(tasks)))
    lock = threading.Lock()
    gated = [
        dataclasses.replace(
            t, density=GatedDensity(density.dim, gate=gate, key=i), draw=_LockedDraw(t.draw, lock)
        )
        for i, t in enumerate(tasks)
    ]

    def work(i: int) -> ChainResult:
        result = run(gated[i])
        on_done(result)
        return result

    results = run_gated(gate, work, len(tasks))
    return results, gate
