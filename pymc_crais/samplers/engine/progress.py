"""Progress display of the chains: a live rich table in a terminal or notebook, and one
line per finished chain otherwise (CI logs, files, pipes).

The annealing loop reports each stage through ``stage_callback(chain)``. In the sampling
process the callback feeds the display directly; in worker processes it puts
``(chain, stage, tau, ess, acceptance_rate)`` on a queue that a thread of the parent drains.
Updates are throttled (at most ~10 per second per chain, plus the last stage), so the
display costs nothing measurable on the hot path.

Chains are numbered from 0 everywhere (the live display, the log lines, the error messages),
as the ``chain`` coordinate of the ArviZ result.
"""

from __future__ import annotations

import sys
import threading
import time

import numpy as np

__all__ = ["ChainProgress", "counted", "stage_callback"]

_MIN_INTERVAL = 0.1
_sink = None  # callable(chain, stage, tau, ess, acc) of this process, or None


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``"1 stage"``, ``"2 stages"``: ``n`` and the noun in the number it takes.

    Parameters
    ----------
    n : int
    noun : str
        The singular.
    plural : str, optional
        Default ``noun + "s"``.
    """
    return f"{n:,d} {noun if n == 1 else (plural or noun + 's')}"


def _set_sink(sink) -> None:
    global _sink
    _sink = sink


def _queue_sink(queue):
    def put(*update):
        try:
            queue.put_nowait(update)
        except Exception:  # a full or closed queue must never break a chain
            pass

    return put


def worker_initializer(queue) -> None:
    """Pool initializer: route this worker's stage reports into ``queue``."""
    _set_sink(None if queue is None else _queue_sink(queue))


def stage_callback(chain: int):
    """The ``callback`` for :func:`pymc_crais.core.anneal.anneal` of chain ``chain``
    (``None`` when no display listens, so the loop skips the call entirely)."""
    sink = _sink
    if sink is None:
        return None
    last = [0.0]

    def report(stage, tau, ess, acceptance_rate):
        now = time.monotonic()
        if tau >= 1.0 or now - last[0] >= _MIN_INTERVAL:
            last[0] = now
            sink(chain, int(stage), float(tau), float(ess), float(acceptance_rate))

    return report


def _interactive(stream) -> bool:
    try:
        from IPython import get_ipython

        if get_ipython() is not None and type(get_ipython()).__name__ == "ZMQInteractiveShell":
            return True
    except ImportError:
        pass
    return bool(getattr(stream, "isatty", lambda: False)())


class ChainProgress:
    """Context manager showing the progress of ``n_chains`` chains.

    Parameters
    ----------
    enabled : bool
        ``False`` prints nothing at all.
    n_chains : int
    label : str
        What is running (e.g. ``"CR-AIS"``, ``"CR-AIS tuning"``).
    interactive : bool, optional
        Force the live display on or off (default: on for a terminal or a notebook).
    stream : file, default sys.stderr
    final_line : bool, default True
        Without the live display, print one line per finished chain (``False``: nothing;
        used for the CR-AIS tuning run, which is not a chain of the result).
    """

    def __init__(
        self,
        enabled: bool,
        n_chains: int,
        label: str = "",
        interactive: bool | None = None,
        stream=None,
        final_line: bool = True,
    ):
        self.enabled = bool(enabled)
        self.final_line = bool(final_line)
        self.n_chains = int(n_chains)
        self.label = label
        self.stream = sys.stderr if stream is None else stream
        self.live = self.enabled and (_interactive(self.stream) if interactive is None else bool(interactive))
        self.queue = None
        self._t0 = time.perf_counter()
        self._state = {c: (0, 0.0, float("nan"), float("nan")) for c in range(self.n_chains)}
        self._done: dict[int, str] = {}
        self._lock = threading.Lock()
        self._progress = None
        self._tasks = {}
        self._thread = None
        self._stop = threading.Event()

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self):
        self._t0 = time.perf_counter()
        if self.live:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(bar_width=24),
                TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(),
                console=Console(file=self.stream),
                transient=False,
                refresh_per_second=8,
            )
            self._progress.start()
            for c in range(self.n_chains):
                name = self.label if not self.final_line else f"{self.label} chain {c}".strip()
                self._tasks[c] = self._progress.add_task(name, total=1.0, info="starting")
            _set_sink(self.update)
        return self

    def __exit__(self, *exc):
        _set_sink(None)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        self._drain()
        if self._progress is not None:
            self._progress.stop()
        return False

    def make_queue(self, ctx):
        """A queue for worker processes (``None`` when nothing is displayed live), drained
        by a daemon thread of this process."""
        if not self.live:
            return None
        self.queue = ctx.Queue()
        self._thread = threading.Thread(target=self._drain_loop, daemon=True)
        self._thread.start()
        return self.queue

    def _drain_loop(self):
        while not self._stop.is_set():
            self._drain(timeout=0.1)

    def _drain(self, timeout: float = 0.0):
        if self.queue is None:
            return
        import queue as _q

        while True:
            try:
                update = self.queue.get(timeout=timeout) if timeout else self.queue.get_nowait()
            except (_q.Empty, OSError, ValueError, EOFError):
                return
            self.update(*update)
            timeout = 0.0

    # ------------------------------------------------------------------ updates
    def update(self, chain, stage, tau, ess, acceptance_rate):
        """Record a stage report of ``chain``."""
        with self._lock:
            self._state[chain] = (stage, tau, ess, acceptance_rate)
            if self._progress is not None and chain in self._tasks and chain not in self._done:
                self._progress.update(
                    self._tasks[chain],
                    completed=min(max(tau, 0.0), 1.0),
                    info=f"stage {stage:>4}  τ={tau:.2e}  ESS={ess:,.0f}  acc={acceptance_rate:.2f}",
                )

    def chain_done(self, res: dict) -> None:
        """A chain finished: final line (live: completes its bar)."""
        if not self.enabled:
            return
        chain = int(res["chain"])
        n_stages = int(res["tau"].size) if "tau" in res else 0
        acc = res.get("acceptance_rate")
        acc = np.asarray(acc if acc is not None else [], dtype=np.float64)
        acc_mean = float(np.nanmean(acc)) if np.isfinite(acc).any() else float("nan")
        text = (
            f"{counted(n_stages, 'stage')}, log Z = {res['log_marginal_likelihood']:.4f}, "
            f"acc {acc_mean:.2f}, {int(res['n_logp_evals']):,} logp evals, "
            f"{time.perf_counter() - self._t0:.1f} s"
        )
        with self._lock:
            self._done[chain] = text
            n_done = len(self._done)
            if self._progress is not None:
                self._progress.update(
                    self._tasks[chain],
                    completed=1.0,
                    info=f"log Z={res['log_marginal_likelihood']:.3f}  "
                    f"{counted(n_stages, 'stage')}  acc={acc_mean:.2f}",
                )
                return
        if not self.final_line:
            return
        label = f"{self.label} " if self.label else ""
        print(f"pymc_crais: {label}chain {chain} done ({n_done} of {self.n_chains}): {text}",
              file=self.stream, flush=True)
