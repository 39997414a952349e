"""JAX: the observed data as inputs of the compiled function, held once as device arrays.

PyTensor's JAX linker turns a graph into a Python function that ``jax.jit`` compiles once per
input shape, and it hands the data to XLA in two costly ways (measured on a logistic
regression with 10⁶ rows and d = 20, ``benchmarks/bench_jax_data.py``, benchmarks/reports/benchmarks.md):

* a **constant** of the graph (PyMC makes ``observed=`` NumPy arrays constants, and a design
  matrix passed as a NumPy array is one) is closed over, and XLA compiles it into every
  executable: with a NumPy design matrix the process held 843 MiB more after compiling, and
  17 MiB more for every batch shape;
* a **shared variable** (``pm.Data``) is an input, but the linker also converts its value at
  compile time into a JAX array that the function never reads (a dead copy for every compiled
  function), and every call converts the NumPy value again (a copy a call): 193 MiB more
  after compiling, a peak 425 MiB higher.

:class:`DataCompiler` compiles the package's model functions so that neither happens with JAX:
every tensor shared variable and every constant of at least :data:`MIN_CONSTANT_BYTES` becomes
an explicit input of the compiled function, and :class:`DeviceData` passes one device array
per data variable, made once (on a CPU, an array aligned to 64 bytes is read in place, without
a copy). A shared variable's value is looked up at every call, so ``pm.set_data`` is seen.
Small constants stay constants (PyTensor folds them), so the compiled arithmetic is the same
as before. With other backends :class:`DataCompiler` compiles exactly as
:func:`~pymc_crais.samplers.engine.reproducible.compile_function` does.
"""

from __future__ import annotations

import threading

import numpy as np

from .reproducible import LazyFunction, compile_function

__all__ = ["MIN_CONSTANT_BYTES", "DataBoundFunction", "DataCompiler", "DeviceData", "data_sources"]

MIN_CONSTANT_BYTES = 2**16
"""Constants of at least this many bytes (8,192 float64 values) become inputs with JAX.
Smaller ones (scalars, a few coordinates) stay constants, whose values PyTensor's rewrites
use; their copies in each executable are negligible."""

_ALIGNMENT = 64  # what XLA's CPU client needs to use a host buffer in place


def data_sources(outputs, min_bytes: int = MIN_CONSTANT_BYTES) -> list:
    """The tensor shared variables and large constants ``outputs`` depend on, in graph order.

    Parameters
    ----------
    outputs : list of pytensor.Variable
    min_bytes : int
        Constants smaller than this stay constants.
    """
    from pytensor.graph.traversal import graph_inputs
    from pytensor.tensor.sharedvar import TensorSharedVariable
    from pytensor.tensor.variable import TensorConstant

    found = []
    for var in graph_inputs(outputs):
        if isinstance(var, TensorSharedVariable) or (
            isinstance(var, TensorConstant) and np.asarray(var.data).nbytes >= min_bytes
        ):
            found.append(var)
    return found


def _aligned_copy(value: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``value`` whose buffer starts on a 64-byte boundary."""
    buf = np.empty(value.nbytes + _ALIGNMENT, dtype=np.uint8)
    start = (-buf.ctypes.data) % _ALIGNMENT
    out = buf[start : start + value.nbytes].view(value.dtype).reshape(value.shape)
    out[...] = value
    return out


def _is_aligned(value: np.ndarray) -> bool:
    return value.flags.c_contiguous and value.ctypes.data % _ALIGNMENT == 0


class DeviceData:
    """One JAX array per data variable, made on first use and kept (shared by the functions
    of one model); a shared variable whose value was replaced is converted again.

    On a CPU device a 64-byte aligned NumPy value is read in place (``jax.dlpack``: no copy);
    a ``pm.Data`` value that is not aligned is replaced once by an aligned copy of itself
    (same values), so that the process holds the data once. On an accelerator the value is
    copied to the device once.
    """

    def __init__(self):
        self._cache: dict = {}  # id(variable) -> (variable, NumPy value, device array)
        self._lock = threading.Lock()

    def values(self, sources: list) -> list:
        """The device arrays of ``sources`` (variables), in order."""
        with self._lock:
            return [self._value(var) for var in sources]

    def _value(self, var):
        shared = hasattr(var, "get_value")
        value = var.get_value(borrow=True) if shared else var.data
        hit = self._cache.get(id(var))
        if hit is not None and hit[1] is value:
            return hit[2]
        device = self._to_device(var, value, shared)
        self._cache[id(var)] = (var, var.get_value(borrow=True) if shared else value, device)
        return device

    @staticmethod
    def _to_device(var, value, shared: bool):
        import jax

        value = np.asarray(value)
        if jax.devices()[0].platform != "cpu" or value.ndim == 0:
            return jax.device_put(value)
        if not _is_aligned(value) and shared and value.nbytes >= MIN_CONSTANT_BYTES:
            var.set_value(_aligned_copy(value), borrow=True)  # the same values, aligned
            value = np.asarray(var.get_value(borrow=True))
        if _is_aligned(value) and value.dtype.kind in "biuf":
            return jax.dlpack.from_dlpack(value)  # read in place, no copy
        return jax.device_put(value)

    def __getstate__(self):  # device arrays stay in their process
        return {}

    def __setstate__(self, state):
        self.__init__()


class DataBoundFunction:
    """``fn(*args)`` of a function compiled with the data as trailing inputs: calls it with
    the data's device arrays appended. Picklable (the device arrays are made again)."""

    def __init__(self, function, sources: list, data: DeviceData):
        self.function, self.sources, self.data = function, list(sources), data

    @property
    def compiled(self) -> bool:
        """Whether the underlying function has been compiled (see ``LazyFunction``)."""
        return getattr(self.function, "compiled", True)

    def __call__(self, *args):
        return self.function(*args, *self.data.values(self.sources))


class DataCompiler:
    """Compiles a model's functions; with JAX, their data as inputs (see the module).

    Parameters
    ----------
    compile_kwargs : dict
        As for :func:`~pymc_crais.samplers.engine.reproducible.compile_function`.
    jax : bool
        The functions run on PyTensor's JAX linker.
    """

    def __init__(self, compile_kwargs: dict, jax: bool):
        self.compile_kwargs, self.jax = compile_kwargs, jax
        self.data = DeviceData()
        self._placeholders: dict = {}  # id(source) -> (source, placeholder input)

    def compile(self, inputs: list, outputs: list, lazy: bool = False):
        """The compiled function of ``inputs`` to ``outputs`` (``lazy``: on its first call)."""
        build = LazyFunction if lazy else compile_function
        if not self.jax:
            return build(inputs, outputs, self.compile_kwargs)
        from pytensor.graph.replace import graph_replace

        sources = data_sources(outputs)
        if not sources:
            return build(inputs, outputs, self.compile_kwargs)
        for var in sources:
            if id(var) not in self._placeholders:
                self._placeholders[id(var)] = (var, var.type(name=f"{var.name or 'data'}_input"))
        held = [self._placeholders[id(var)][1] for var in sources]
        lifted = graph_replace(list(outputs), dict(zip(sources, held, strict=True)), strict=False)
        return DataBoundFunction(
            build([*inputs, *held], lifted, self.compile_kwargs), sources, self.data
        )
