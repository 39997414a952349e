"""Several callers' model evaluations served in one batched call (:class:`BatchGate`).

Each caller runs in a thread of its own and evaluates through a :class:`GatedDensity`,
which hands its ``(n, d)`` request to the shared gate and waits. When every caller still
running has a request waiting, the gate evaluates them all in one call on their
concatenation (one call per kind: values alone, or values and gradients) and hands each its
rows back. Which requests share a call depends only on which callers are still running, so
the results are a deterministic function of the callers' own computations. Used for chains
that share an accelerator (``samplers/engine/chain_batch.py``) and for the mode search's
L-BFGS runs (:mod:`pymc_crais.core.mode_search`).
"""

from __future__ import annotations

import dataclasses
import threading

import numpy as np

from .density import BatchedDensity, Evaluation

__all__ = ["BatchGate", "GatedDensity", "run_gated"]


class BatchGate:
    """Collects the evaluation requests of several chains and serves them in one call.

    Parameters
    ----------
    density : BatchedDensity
        The shared density (evaluated by whichever chain completes a batch).
    keys : iterable
        One key per chain taking part.
    one_at_a_time : bool, default False
        Wake the callers one by one after a batched call, each when the one before it asks
        again or leaves, so that they never compute at once. For callers whose own work is
        short and releases the GIL (SciPy's L-BFGS step: the mode search's runs, which this
        made 1.3–2.6 times faster); callers whose own work is long array code (chains)
        can overlap it, and are woken together.

    Attributes
    ----------
    n_calls : int
        Model calls made (a batch with both kinds of request makes two).
    batch_sizes : list of int
        Rows of each call.
    """

    def __init__(self, density: BatchedDensity, keys, one_at_a_time: bool = False):
        self.density = density
        self.one_at_a_time = bool(one_at_a_time)
        self.n_calls = 0
        self.batch_sizes: list[int] = []
        self._active = set(keys)
        self._pending: dict = {}
        self._results: dict = {}
        self._closed = False
        self._lock = threading.Lock()
        # one condition a caller, on the one lock, so that a caller can be woken alone
        self._wake = {key: threading.Condition(self._lock) for key in self._active}
        self._asleep: set = set()

    def evaluate(self, key, x: np.ndarray, gradient: bool) -> Evaluation:
        """Chain ``key``'s rows ``x``, evaluated with the other chains' waiting requests."""
        with self._lock:
            self._pending[key] = (x, bool(gradient))
            self._dispatch_if_complete()
            if key not in self._results and not self._closed:
                self._asleep.add(key)
                self._wake_one()
                while key not in self._results and not self._closed:
                    self._wake[key].wait()
                self._asleep.discard(key)
            if key not in self._results:
                raise RuntimeError("the batched run was stopped (KeyboardInterrupt)")
            out = self._results.pop(key)
        if isinstance(out, BaseException):
            raise out
        return out

    def leave(self, key) -> None:
        """Chain ``key`` is done (or failed): the others no longer wait for it."""
        with self._lock:
            self._active.discard(key)
            self._dispatch_if_complete()
            self._wake_one()

    def close(self) -> None:
        """Stop: every waiting chain (and any later request) raises, so the threads end."""
        with self._lock:
            self._closed = True
            for cond in self._wake.values():
                cond.notify_all()

    def _wake_one(self) -> None:
        # called with the lock held, by a caller about to sleep or leave: with
        # one_at_a_time, wake one sleeping caller whose result is ready, so that callers run
        # one at a time. Woken all at once, they compete for the GIL, and every release of
        # it (SciPy's L-BFGS step releases it) hands it to another caller: on Sonar's mode
        # search that tripled the time. Which rows share a call does not depend on the
        # order the callers run in.
        ready = [k for k in self._asleep if k in self._results]
        for key in sorted(ready, key=repr)[: 1 if self.one_at_a_time else None]:
            self._wake[key].notify()

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
        if not self.one_at_a_time:
            self._wake_one()  # every sleeping caller

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
    """One caller's view of a :class:`BatchGate` (counts that caller's evaluations only)."""

    gate: BatchGate | None = None
    key: object = None

    def _evaluate(self, x: np.ndarray, gradient: bool) -> Evaluation:
        return self.gate.evaluate(self.key, x, gradient)


def run_gated(gate: BatchGate, work, n: int) -> list:
    """``work(i)`` for ``i = 0 … n-1``, each in a thread of its own whose model calls go
    through ``gate`` (keys ``0 … n-1``); a thread leaves the gate when its work ends.

    Returns each call's result, or the exception it raised, in order. Ctrl-C in the calling
    thread closes the gate, so every thread stops at its next model call, then re-raises.
    """
    results: list = [None] * n

    def run(i: int) -> None:
        try:
            results[i] = work(i)
        except BaseException as err:  # returned to the calling thread
            results[i] = err
        finally:
            gate.leave(i)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for th in threads:
        th.start()
    try:
        for th in threads:
            th.join()
    except BaseException:  # Ctrl-C: stop the callers at their next model call
        gate.close()
        for th in threads:
            th.join()
        raise
    return results
