"""The chain runner: seeds, BLAS limit, worker processes, failures and progress.

It runs a list of chain tasks with a function it is given (``run(task) -> ChainResult``),
in this process (``cores=1``) or in a process pool, with identical results either way. It
knows no sampler: each sampler module passes its own chain function.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import functools
import itertools
import multiprocessing
import numbers
import threading
import time
import traceback
from collections.abc import Callable

import numpy as np

from ...chain_result import ChainResult
from .heap import deferred_full_collections
from .progress import ChainProgress, worker_initializer
from .reproducible import pytensor_lock
from .term_checks import check_seed, explain_model_errors

__all__ = [
    "ChainFailedError",
    "chain_generators",
    "one_blas_thread",
    "run_chains",
    "single_threaded_blas",
    "terminate_workers",
]


class ChainFailedError(RuntimeError):
    """A chain raised; the message names the chain and carries the original traceback."""


def chain_generators(
    random_seed, chains: int
) -> tuple[list[np.random.Generator], np.random.Generator]:
    """One independent generator per chain, plus one for run-level work (pilot, tuning).

    Parameters
    ----------
    random_seed : None, int, sequence of int, numpy.random.SeedSequence or Generator
        A sequence must have one entry per chain (each seeds its chain).
    chains : int

    Returns
    -------
    (list of Generator, Generator)
    """
    check_seed(random_seed)
    if isinstance(random_seed, np.random.Generator):
        kids = random_seed.spawn(chains + 1)
        return kids[:chains], kids[chains]
    if random_seed is None or isinstance(random_seed, numbers.Integral | np.random.SeedSequence):
        root = (
            random_seed
            if isinstance(random_seed, np.random.SeedSequence)
            else np.random.SeedSequence(random_seed)
        )
        kids = [np.random.default_rng(s) for s in root.spawn(chains + 1)]
        return kids[:chains], kids[chains]
    try:
        seeds = [int(s) for s in random_seed]
    except (TypeError, ValueError):
        raise TypeError(
            f"random_seed must be None, an int, a sequence of ints (one per chain), a "
            f"SeedSequence or a Generator; got {random_seed!r}"
        ) from None
    if len(seeds) != chains:
        raise ValueError(
            f"random_seed has {len(seeds)} entries but chains={chains}; give one seed per "
            "chain or a single int"
        )
    return [np.random.default_rng(s) for s in seeds], np.random.default_rng([*seeds, 2**31])


_BLAS_LOCK = threading.Lock()
_BLAS_USERS = [0, None]  # how many callers are inside, and the limiter they share


_CONTROLLER: list = [None, -1]  # threadpoolctl's controller, and len(sys.modules) when made


def _blas_controller():
    """One ``ThreadpoolController`` per process, made again only after new imports (which
    may load another BLAS): making one scans the loaded libraries (up to a few ms), and the
    ``pm.sample_smc`` kernels enter :func:`one_blas_thread` at every stage."""
    import sys

    from threadpoolctl import ThreadpoolController

    if _CONTROLLER[0] is None or _CONTROLLER[1] != len(sys.modules):
        _CONTROLLER[0], _CONTROLLER[1] = ThreadpoolController(), len(sys.modules)
    return _CONTROLLER[0]


@contextlib.contextmanager
def one_blas_thread():
    """BLAS/OpenMP limited to one thread while any caller of this process is inside.

    The limit is process-wide, so nested or concurrent callers (samplers running in threads
    of an executor) share it: the first one in sets it and the last one out restores the
    original limits. (Separate ``threadpool_limits`` contexts in two threads would restore
    each other's limits while the other still runs.)
    """
    with _BLAS_LOCK:
        if _BLAS_USERS[0] == 0:
            _BLAS_USERS[1] = _blas_controller().limit(limits=1)
        _BLAS_USERS[0] += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _BLAS_USERS[0] -= 1
            if _BLAS_USERS[0] == 0:
                _BLAS_USERS[1].restore_original_limits()
                _BLAS_USERS[1] = None


def single_threaded_blas(fn):
    """Run a sampler with BLAS/OpenMP limited to one thread in this process, as in the
    worker processes. The batched calls are many small matrix products, for which extra
    BLAS threads only add synchronisation: on 2 cores a Sonar CR-AIS run took 4x longer
    with the default thread pool (benchmarks/reports/benchmarks.md). It also makes ``cores=1`` and
    ``cores=2`` run the same arithmetic. No full garbage collection runs inside the call
    (:func:`~pymc_crais.samplers.engine.heap.deferred_full_collections`)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with (
            one_blas_thread(),
            deferred_full_collections(),
            explain_model_errors(kwargs.get("model")),
        ):
            return fn(*args, **kwargs)

    return wrapper


# Chain tasks handed to forked workers by inheritance: registered before the pool forks,
# so a worker finds its (run, task) here with the compiled, already JIT-compiled model
# functions of the parent, instead of unpickling them and compiling them again (≈ 2 s per
# worker with the Numba linker).
_FORK_TASKS: dict[int, tuple] = {}
_FORK_KEYS = itertools.count()


def _run_in_worker(payload: bytes | int) -> ChainResult:
    """Worker entry: ``(run, task)`` either inherited from a forking parent (``payload``
    is its key in ``_FORK_TASKS``) or as cloudpickle bytes (spawn/forkserver; compiled
    graphs with ``OpFromGraph`` gradients do not pickle with the standard pickler)."""
    if isinstance(payload, int):
        run, task = _FORK_TASKS[payload]
    else:
        import cloudpickle

        with pytensor_lock():  # unpickling rebuilds graphs and compiles (threaded workers)
            run, task = cloudpickle.loads(payload)
    try:
        with one_blas_thread():
            return run(task)
    except BaseException as err:  # carry the worker's traceback to the caller as text
        raise ChainFailedError(
            f"chain {task.chain} failed with {type(err).__name__}: {err}\n"
            f"--- traceback in the worker process ---\n{traceback.format_exc()}"
        ) from None


def terminate_workers(executor: cf.ProcessPoolExecutor, timeout: float = 10.0) -> None:
    """Stop a process pool at once (a chain failed, or KeyboardInterrupt): cancel the chains
    not yet started, terminate every worker, and reap them so that none is left behind.

    Workers still alive ``timeout`` seconds after ``SIGTERM`` are killed.
    """
    procs = list((getattr(executor, "_processes", None) or {}).values())
    interrupted = None
    for _ in range(10):  # a second Ctrl-C meanwhile must not leave workers behind
        try:
            _terminate(executor, procs, timeout)
            break
        except KeyboardInterrupt as err:
            interrupted = err
    if interrupted is not None:
        raise interrupted


def _as_completed(futures, poll: float = 0.5):
    """``concurrent.futures.as_completed`` that wakes every ``poll`` seconds: the main
    thread then runs Python code, so a SIGINT that the kernel handed to another thread of
    this process still raises KeyboardInterrupt here at once instead of after the chains."""
    pending = set(futures)
    while pending:
        done, pending = cf.wait(pending, timeout=poll, return_when=cf.FIRST_COMPLETED)
        yield from done


def _terminate(executor: cf.ProcessPoolExecutor, procs: list, timeout: float) -> None:
    executor.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    deadline = time.monotonic() + timeout
    for proc in procs:
        proc.join(max(deadline - time.monotonic(), 0.0))
        if proc.is_alive():
            proc.kill()
            proc.join(1.0)
    # the pool's manager thread may be reaping the same processes: a join that lost that
    # race returns before the exit code is recorded, so wait until every one has it
    while any(p.exitcode is None for p in procs) and time.monotonic() < deadline + 2.0:
        time.sleep(0.01)


def _chain_done(progress: ChainProgress, result: ChainResult) -> None:
    progress.chain_done({"chain": result.chain, **result.as_dict()})


def run_chains(
    tasks: list,
    run: Callable[[object], ChainResult],
    cores: int,
    mp_ctx,
    progress: ChainProgress,
    *,
    executor: cf.Executor | None = None,
    batched: bool = False,
) -> list[ChainResult]:
    """Run ``run(task)`` for every task (each with a ``chain`` attribute), in this process
    when ``cores == 1``, else in a process pool; report to ``progress`` (entered here).

    With ``batched``, every chain runs in a thread of this process and their model calls
    are batched into one (:mod:`pymc_crais.samplers.engine.chain_batch`; for an accelerator). With
    an ``executor``, each chain is a task submitted to it as cloudpickle bytes (any
    :class:`concurrent.futures.Executor`, e.g. a Dask client's ``get_executor()``); the
    worker unpickles and, if needed, recompiles the model functions, and runs the same
    per-chain code with the same generator, so the results are the same bits as here.

    Parameters
    ----------
    tasks : list
        One task per chain; ``task.chain`` is the chain's index.
    run : callable
        ``run(task) -> ChainResult``; module-level, so that workers can find it.
    cores : int
        Worker processes (1: sequential in this process).
    mp_ctx : str, multiprocessing context or None
        Start method of the workers (``"fork"``: they inherit the tasks).
    progress : ChainProgress
    executor : concurrent.futures.Executor, optional
        Runs the chains instead of a process pool of ``cores`` workers (it is not shut
        down here). Stage-by-stage progress is not shown, only finished chains.
    batched : bool, default False
        All chains in this process, one batched model call for all (``cores`` unused).

    Returns
    -------
    list of ChainResult
        In the order of ``tasks``.

    Raises
    ------
    ChainFailedError
        When a chain raises (with several chains); every worker is stopped first.
    """
    with progress:
        if batched and len(tasks) > 1:
            return _run_batched(tasks, run, progress)
        if executor is not None:
            return _run_on_executor(tasks, run, executor, progress)
        if cores <= 1 or len(tasks) == 1:
            out = []
            for task in tasks:
                try:
                    out.append(run(task))
                except Exception as err:
                    if len(tasks) == 1:
                        raise
                    raise ChainFailedError(
                        f"chain {task.chain} failed: {type(err).__name__}: {err}"
                    ) from err
                _chain_done(progress, out[-1])
            return out
        import cloudpickle

        ctx = (
            multiprocessing.get_context(mp_ctx) if isinstance(mp_ctx, str | type(None)) else mp_ctx
        )
        results: dict[int, ChainResult] = {}
        executor = cf.ProcessPoolExecutor(
            max_workers=min(cores, len(tasks)),
            mp_context=ctx,
            initializer=worker_initializer,
            initargs=(progress.make_queue(ctx),),
        )
        forked = ctx.get_start_method() == "fork"
        if forked:  # a fork-context pool forks all its workers at the first submit
            keys = [next(_FORK_KEYS) for _ in tasks]
            _FORK_TASKS.update({k: (run, t) for k, t in zip(keys, tasks, strict=True)})
            payloads = keys
        else:
            payloads = [cloudpickle.dumps((run, t)) for t in tasks]
        try:
            futures = {
                executor.submit(_run_in_worker, payload): t.chain
                for payload, t in zip(payloads, tasks, strict=True)
            }
            for fut in _as_completed(futures):
                res = fut.result()
                results[res.chain] = res
                _chain_done(progress, res)
        except BaseException:  # a chain failed, or KeyboardInterrupt: no worker survives
            terminate_workers(executor)
            raise
        finally:
            if forked:
                for k in keys:
                    _FORK_TASKS.pop(k, None)
        executor.shutdown(wait=True)
        return [results[t.chain] for t in tasks]


def _run_batched(tasks: list, run, progress: ChainProgress) -> list[ChainResult]:
    from .chain_batch import run_chains_batched

    results, _ = run_chains_batched(tasks, run, lambda res: _chain_done(progress, res))
    for task, res in zip(tasks, results, strict=True):
        if isinstance(res, BaseException):
            if not isinstance(res, Exception):  # KeyboardInterrupt, SystemExit
                raise res
            raise ChainFailedError(
                f"chain {task.chain} failed: {type(res).__name__}: {res}"
            ) from res
    return results


def _run_on_executor(tasks: list, run, executor: cf.Executor, progress) -> list[ChainResult]:
    """Each chain as ``_run_in_worker(cloudpickle bytes)`` on a user's executor."""
    import cloudpickle

    futures = {executor.submit(_run_in_worker, cloudpickle.dumps((run, t))): t for t in tasks}
    results: dict[int, ChainResult] = {}
    try:
        for fut in cf.as_completed(futures):
            res = fut.result()
            results[res.chain] = res
            _chain_done(progress, res)
    except BaseException:
        for fut in futures:
            fut.cancel()
        raise
    return [results[t.chain] for t in tasks]
