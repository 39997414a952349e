"""Compiled PyTensor functions whose results do not depend on the compile cache.

PyTensor's Numba backend compiles with LLVM fast-math by default, and under fast-math a
kernel compiled in this process and its copy loaded from the on-disk cache can round
differently: the same seed then gave other bits with a cold and a warm cache. Every function
of the package is compiled here, with fast-math off (:func:`reproducible_compile`), also when
a worker process unpickles it (:class:`ReproducibleFunction`); :class:`LazyFunction` defers a
compilation until its first call.

PyTensor's configuration is process-wide, and PyTensor and PyMC change it for the duration of
some calls (``config.change_flags``): every compilation sets ``mode`` to the mode being
compiled and ``traceback__limit`` to 0; shape inference sets ``cxx=""``. Two threads doing
that at once restore each other's values in the wrong order and leave the process with
another mode for good; PyMC's initial-point function is compiled with ``FAST_COMPILE``, so
every later compilation of the process then ran on PyTensor's Python implementations.
:func:`pytensor_lock` (one re-entrant lock of the process) keeps the package's PyTensor
work to one thread at a time: compilations, and the set-up, mapping and unpickling steps
that build graphs or compile through PyMC.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading

__all__ = [
    "LazyFunction",
    "ReproducibleFunction",
    "compile_function",
    "default_mode_is_numba",
    "few_calls_compile_kwargs",
    "few_calls_mode",
    "pytensor_lock",
    "reproducible_compile",
    "with_pytensor_lock",
]


# PyTensor's flags are process-wide: two threads compiling at once (chains or models on a
# ThreadPoolExecutor or a threaded Dask worker) restore each other's flags out of order (see
# the module's docstring). Numba compiles under a lock of its own anyway, so holding one
# here costs little.
_PYTENSOR_LOCK = threading.RLock()


def _new_lock_in_child() -> None:
    # a process forked while another thread held the lock would inherit it held, by a
    # thread that does not exist there, and its first compilation would wait forever
    global _PYTENSOR_LOCK
    _PYTENSOR_LOCK = threading.RLock()


os.register_at_fork(after_in_child=_new_lock_in_child)


@contextlib.contextmanager
def pytensor_lock():
    """Hold the package's process-wide PyTensor lock (re-entrant) while inside.

    Everything of the package that builds graphs or compiles (and so changes PyTensor's
    process-wide flags for a while) runs inside it, so that samplers running in several
    threads (a ``ThreadPoolExecutor``, a Dask cluster with ``processes=False``) cannot leave
    the process with another compilation mode. Model evaluations run outside it.
    """
    lock = _PYTENSOR_LOCK
    with lock:
        yield


def with_pytensor_lock(fn):
    """Decorator: ``fn`` runs inside :func:`pytensor_lock`."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with pytensor_lock():
            return fn(*args, **kwargs)

    return wrapper


@contextlib.contextmanager
def _without_fast_math():
    import pytensor

    with pytensor_lock(), pytensor.config.change_flags(numba__fastmath=False):
        yield


def _rebuild_reproducible(constructor, args):
    with _without_fast_math():  # PyTensor compiles an unpickled function again
        return ReproducibleFunction(constructor(*args))


class ReproducibleFunction:
    """A compiled PyTensor function that is compiled again without Numba's fast-math when it
    is unpickled (in a worker process, say); attributes are those of the function."""

    __slots__ = ("_function",)

    def __init__(self, function):
        object.__setattr__(self, "_function", function)

    def __call__(self, *args, **kwargs):
        return self._function(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._function, name)

    def __setattr__(self, name, value):
        setattr(self._function, name, value)

    def __reduce__(self):
        # PyTensor's own reduction of the function, rebuilt inside the flag change. Its parts
        # go in the same pickle stream as everything else, so objects shared with the rest of
        # the pickled state (e.g. the random generators a prior sampler seeds) stay shared.
        import copyreg

        reduce = copyreg.dispatch_table.get(type(self._function))
        constructor, args = (reduce(self._function) if reduce else self._function.__reduce_ex__(4))[
            :2
        ]
        return _rebuild_reproducible, (constructor, args)


def reproducible_compile(inputs, outputs, **compile_kwargs):
    """PyMC's ``compile`` with Numba's fast-math off, so results do not depend on the cache.

    PyTensor's Numba backend compiles by default with LLVM fast-math flags (``reassoc``,
    ``arcp``, ``contract``, ``afn``, ``nsz``). Numba compiles every Op into its own library
    and links a copy of it into the function that calls it, where LLVM optimizes it again;
    under fast-math the two copies of a kernel can round differently (a reduction summed
    in another order, a division turned into a multiplication by the reciprocal). Which
    copy runs depends on whether the callee was compiled in this process or the whole
    function was loaded from PyTensor's on-disk Numba cache, so the same seed gave results
    differing in the last bits (and, after resampling, in the third digit of ``log Z``)
    between a cold and a warm cache. Without fast-math LLVM keeps IEEE semantics and every
    copy computes the same bits. Other backends are unaffected.

    Parameters
    ----------
    inputs, outputs : list of pytensor.Variable
    **compile_kwargs
        Passed to :func:`pymc.pytensorf.compile`.

    Returns
    -------
    ReproducibleFunction
        The compiled function; unpickling it compiles it again, also without fast-math.
    """
    from pymc.pytensorf import compile as pm_compile

    with _without_fast_math():
        return ReproducibleFunction(pm_compile(inputs, outputs, **compile_kwargs))


def compile_function(inputs, outputs, compile_kwargs):
    """:func:`reproducible_compile` with unused inputs allowed and inputs trusted (the
    package always passes float64 C-ordered arrays)."""
    kw = {"on_unused_input": "ignore", **compile_kwargs}
    fn = reproducible_compile(inputs, outputs, **kw)
    fn.trust_input = True
    return fn


def few_calls_mode():
    """The mode of functions a run calls a handful of times (:func:`few_calls_compile_kwargs`,
    the model's initial point): ``FAST_COMPILE``'s rewrites and Python implementations, on
    PyTensor's Python linker instead of its VM.

    The two run the same ``perform`` methods, so the values are the same bits; but the VM
    imports PyTensor's C loop (``pytensor.link.c.cvm``) even when it does not use it, and with
    an empty compile cache that import builds a C module: 0.55–0.9 s of a new user's first
    call, spent on nothing.
    """
    from pytensor.compile.mode import Mode, get_mode

    return Mode(linker="py", optimizer=get_mode("FAST_COMPILE").provided_optimizer)


def few_calls_compile_kwargs(compile_kwargs: dict) -> dict:
    """``compile_kwargs`` for a function called a handful of times a run (the prior sampler,
    the map to named variables): PyTensor's Python implementations
    (:func:`few_calls_mode`, no code generation) where the mode would be Numba's.

    With cold caches Numba's code generation costs seconds a function (4.7 s wall for a
    3-parameter regression's prior sampler on a loaded 2-core machine), while one call of
    such a function on the population costs milliseconds in NumPy. Nothing is compiled, so
    nothing can depend on a cache. A ``mode`` the caller gives (``backend=``,
    ``compile_kwargs={"mode": ...}``) is kept, as is any other backend (C, JAX).

    Parameters
    ----------
    compile_kwargs : dict
        Resolved compile options (:func:`~pymc_crais.samplers.engine.compile.resolve_compile_kwargs`).

    Returns
    -------
    dict
    """
    if compile_kwargs.get("mode") is not None or not default_mode_is_numba():
        return compile_kwargs
    return {**compile_kwargs, "mode": few_calls_mode()}


def default_mode_is_numba() -> bool:
    """Whether PyTensor's default mode (used when no ``mode`` is given) runs on Numba."""
    from pytensor.compile.mode import get_mode

    try:
        return type(get_mode(None).linker).__name__ == "NumbaLinker"
    except Exception:  # an unknown global mode: PyTensor will say so when compiling
        return False


class LazyFunction:
    """A compiled function built on its first call (then kept, and shared by every copy made
    after that call).

    With cold PyTensor/Numba caches Numba's code generation is nearly all of a model's
    compilation (tens of seconds a function on 2 cores). Gradient kernels never evaluate the
    log-density without its gradient, so that function is compiled only if something calls it
    (a gradient-free kernel after ``init="laplace"``, for instance). Its graph is the one an
    eager compilation would use, so the results do not depend on when it is compiled.
    Picklable (a worker process that needs it compiles it, from the on-disk cache if warm).
    """

    def __init__(self, inputs, outputs, compile_kwargs):
        self._spec = (inputs, outputs, compile_kwargs)
        self._fn = None

    @property
    def compiled(self) -> bool:
        """Whether the function has been compiled."""
        return self._fn is not None

    @property
    def function(self):
        """The compiled function (compiled now if it was not yet)."""
        if self._fn is None:
            self._fn = compile_function(*self._spec)
        return self._fn

    def __call__(self, *args):
        return self.function(*args)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.function, name)
