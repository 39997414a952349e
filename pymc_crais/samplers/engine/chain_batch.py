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

import numpy as np

from ...chain_result import ChainResult
from ...core.density import BatchedDensity, Evaluation

__all__ = ["BatchGate", "GatedDensity", "run_chains_batched"]


class BatchGate:
    """Collects the evaluation requests of several chains and serves them in one call.

    Parameters
    ----------
    density : BatchedDensity
        The shared density (evaluated by whichever chain completes a batch).
    keys : iterable
        One key per chain taking part.

    Attributes
    ----------
    n_calls : int
        Model calls made (a batch with both kinds of request makes two).
    batch_sizes : list of int
        Rows of each call.
    """

    def __init__(self, density: BatchedDensity, keys):
        self.density = density
        self.n_calls = 0
        self.batch_sizes: list[int] = []
        self._active = set(keys)
        self._pending: dict = {}
        self._results: dict = {}
        self._closed = False
        self._cond = threading.Condition()

    def evaluate(self, key, x: np.ndarray, gradient: bool) -> Evaluation:
        """Chain ``key``'s rows ``x``, evaluated with the other chains' waiting requests."""
        with self._cond:
            self._pending[key] = (x, bool(gradient))
            self._dispatch_if_complete()
            while key not in self._results and not self._closed:
                self._cond.wait()
            if key not in self._results:
                raise RuntimeError("the batched run was stopped (KeyboardInterrupt)")
            out = self._results.pop(key)
        if isinstance(out, BaseException):
            raise out
        return out

    def leave(self, key) -> None:
        """Chain ``key`` is done (or failed): the others no longer wait for it."""
        with self._cond:
            self._active.discard(key)
            self._dispatch_if_complete()

    def close(self) -> None:
        """Stop: every waiting chain (and any later request) raises, so the threads end."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _dispatch_if_complete(self) -> None:
        # called with the lock held; every running chain is waiting, so evaluating under
        # the lock blocks nobody
        if self._closed or not self._pending or not self._active <= set(self._pending):
            return
        batch, self._pending = self._pending, {}
        for gradient in (False, True):
            keys = sorted(k for k, (_, g) in batch.items() if g == gradient)
            if keys:
                self._serve(keys, [batch[k][0] for k in keys], gradient)
        self._cond.notify_all()

    def _serve(self, keys: list, xs: list, gradient: bool) -> None:
        sizes = [x.shape[0] for x in xs]
        try:
            ev = self.density.evaluate(np.concatenate(xs), gradient)
        except Exception:  # evaluate each chain alone, so the error reaches the chain it is in
            for key, x in zip(keys, xs, strict=True):
                try:
                    self._results[key] = self.density.evaluate(x, gradient)
                except Exception as err:
                    self._results[key] = err
            return
        self.n_calls += 1
        self.batch_sizes.append(int(sum(sizes)))
        bounds = np.cumsum([0, *sizes])
        for key, lo, hi in zip(keys, bounds[:-1], bounds[1:], strict=True):
            parts = (ev.log_q0, ev.delta, ev.grad_log_q0, ev.grad_delta)
            self._results[key] = Evaluation(*(None if a is None else a[lo:hi] for a in parts))


@dataclasses.dataclass
class GatedDensity(BatchedDensity):
    """One chain's view of a :class:`BatchGate` (counts that chain's evaluations only)."""

    gate: BatchGate | None = None
    key: object = None

    def _evaluate(self, x: np.ndarray, gradient: bool) -> Evaluation:
        return self.gate.evaluate(self.key, x, gradient)


class _LockedDraw:
    """``draw(rng, n)`` one chain at a time (the compiled prior sampler is re-seeded and
    called, which two threads must not interleave)."""

    def __init__(self, draw, lock: threading.Lock):
        self.draw, self.lock = draw, lock

    def __call__(self, rng, n):
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
    results: list = [None] * len(tasks)

    def worker(i: int) -> None:
        try:
            results[i] = run(gated[i])
            on_done(results[i])
        except BaseException as err:  # reported below, in the calling thread
            results[i] = err
        finally:
            gate.leave(i)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(len(tasks))]
    for th in threads:
        th.start()
    try:
        for th in threads:
            th.join()
    except BaseException:  # Ctrl-C: stop the chains at their next model call
        gate.close()
        for th in threads:
            th.join()
        raise
    return results, gate
