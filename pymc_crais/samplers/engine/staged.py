"""The model density on NumPy first, on Numba once a chain has evaluated enough of it.

With cold caches Numba's code generation is nearly all of a small model's first call (7.5 s
of a 10 s call for a 3-parameter regression, ``benchmarks/reports/first-call.md``), and a
new model graph is a cold compilation for every user, whatever their machine has cached.
PyTensor's Python implementations of the same rewritten graph compile in a fraction of a
second; each node runs one vectorized NumPy operation on the whole population, which costs
little more than Numba's fused loop on such models, but a fixed ~20–50 µs a node and call.

So, where PyTensor's default mode is Numba's and the caller chose no mode, the batched
density is compiled twice over one graph: :data:`NUMPY_MODE` now, Numba lazily
(:class:`TwoStage`). A :class:`~pymc_crais.samplers.engine.compile.ModelDensity` evaluates
with the first until the estimated NumPy time of its calls (:class:`NumpyCost`) reaches
:data:`NUMPY_SECONDS` (:data:`SETUP_NUMPY_SECONDS` before the chains), then with the second.
The count is per density object and a chain starts its own
(:meth:`~pymc_crais.samplers.engine.compile.ModelDensity.for_chain`), so which rows run on
which backend depends on the seed only: the same bits whatever ``cores`` is and whatever any
cache holds. Short runs (one importance-sampling step from a good start: what the defaults
do on most regressions) never generate Numba code; long ones spend at most about
:data:`NUMPY_SECONDS` on NumPy before the Numba function takes over. The estimate is a fixed
function of the graph and the calls, never a clock, so it cannot change the bits.

A run known to be long before its chains start pays Numba's compilation in any case, so its
chains start on Numba (the parent compiles it first, so that workers forked after it inherit
it): where the set-up spent its own budget, and, on a model whose calls are :func:`costly`,
where an annealed start's pilot runs, a second run follows a whole one, or the chains will
temper (:func:`long_run_ahead`). ``applied_hier60_centred`` (seed 6, 4 chains, 2 cores) went
from 11.9 to 7.7 s with a warm cache and from 20.9 to 16.6 s with a cold one; cheap models
(``eight_schools_centered``, 3 s) keep their NumPy stage, where sending them to Numba cost
13 s more with a cold cache (``benchmarks/long_run_numba.py``, ``long_run_numba-s8.txt``).

Graphs with a node whose Python implementation loops in Python (over the particles:
``Blockwise``, ``Scan``, ``OpFromGraph``; or over the elements: an ``Elemwise`` whose scalar
operation has no NumPy ufunc) are compiled on Numba at once (:func:`python_loop_nodes`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...tail_stats import KHAT_THRESHOLD
from .reproducible import default_mode_is_numba

__all__ = [
    "ELEMENT_SECONDS",
    "LONG_RUN_CALLS",
    "NODE_SECONDS",
    "NUMPY_MODE_NAME",
    "NUMPY_SECONDS",
    "PILOT_CALLS",
    "SETUP_NUMPY_SECONDS",
    "START_KHAT",
    "START_KHAT_ATTRS",
    "NumpyCost",
    "StagedCompiler",
    "TwoStage",
    "costly",
    "long_run_ahead",
    "numpy_first_kwargs",
    "numpy_mode",
    "python_loop_nodes",
    "row_cost",
]

NUMPY_MODE_NAME = "pymc_crais_numpy"
"""The name of :func:`numpy_mode`: PyTensor's ``fast_run`` rewrites without elemwise fusion,
run on the Python linker (each node a NumPy call)."""

NUMPY_SECONDS = 1.0
"""The estimated NumPy time (:class:`NumpyCost`) a chain spends before its density switches to
Numba: a rent-or-buy bound. A run that would finish within it never pays Numba's code
generation (seconds with a cold cache, a few tenths of a second to load a cached function);
a longer one pays at most this much more than a Numba-only run. ``0`` turns the NumPy stage
off."""

SETUP_NUMPY_SECONDS = 1.5
"""The same bound for the run's set-up, before the chains (the Laplace fit, the mode search's
32 short L-BFGS runs, the pilots): hundreds of calls on one or a few particles, where NumPy's
cost a node and call dominates (0.7 s of them for a 3-parameter, 100-row regression)."""

NODE_SECONDS = 10e-6
"""Estimated NumPy cost of one node in one call, whatever the number of particles (PyTensor's
Python linker: 8–12 µs a node measured on one-particle calls of the suite's graphs)."""

ELEMENT_SECONDS = 2e-9
"""Estimated NumPy cost of one particle and one unit of :func:`row_cost` (0.8–3 ns measured
on the validation suite's loop-free graphs and a 3-parameter regression, 2,000 particles)."""


LONG_RUN_CALLS = 100
"""Population calls a chain makes at the least when it tempers (a start whose weights are
not usable at once): two stages of a few HMC transitions of about ten leapfrog steps each.
Where that many calls cost more on NumPy than a chain's budget (:func:`costly`), a run known
to be long starts its chains on Numba."""

PILOT_CALLS = 400
"""Population calls a chain of an SMC run from the prior makes at the least (an annealed
start's pilot, which is kept only after 8 stages): the pilots measured made 550-1,050 calls
a chain (``hier_centered``, ``applied_hier60_centred``)."""

START_KHAT = KHAT_THRESHOLD
"""A start whose importance weights have a larger Pareto k̂ makes the chains temper (the
bound beyond which importance sampling is unreliable)."""

START_KHAT_ATTRS = {
    "laplace": "init_pareto_k",
    "laplace_wide": "init_pareto_k_wide",
    "prior": "init_pareto_k_prior",
}
"""The run attribute that holds each automatic start's k̂ (the mode-mixture start is kept
only below :data:`START_KHAT`)."""


def costly(cost: NumpyCost | None, draws: int, calls: int | None = None) -> bool:
    """Whether ``calls`` calls on ``draws`` particles cost more on NumPy than a chain's
    budget (``False`` without a NumPy stage).

    Parameters
    ----------
    cost : NumpyCost or None
        The density's estimate (:attr:`ModelDensity.numpy_cost`).
    draws : int
        Particles a call evaluates.
    calls : int, optional
        The calls a chain makes at the least (default :data:`LONG_RUN_CALLS`).

    Returns
    -------
    bool
    """
    calls = LONG_RUN_CALLS if calls is None else calls
    return cost is not None and calls * cost.call(draws) > cost.budget


def long_run_ahead(cost: NumpyCost | None, draws: int, attrs: dict) -> bool:
    """Whether a run's chains, from the start its set-up chose, will temper on a model whose
    NumPy calls are :func:`costly`: Numba's compilation is then paid by the run in any case,
    and a NumPy stage per chain would only add to it. A function of the graph and the
    set-up's results, never of a clock or a cache.

    Parameters
    ----------
    cost : NumpyCost or None
        The density's estimate.
    draws : int
        Particles per chain.
    attrs : dict
        The set-up's attributes: ``init_choice`` and the start's k̂
        (:data:`START_KHAT_ATTRS`). The chains temper when that k̂ is above
        :data:`START_KHAT`, or when ``init="auto"`` fell back to the prior without measuring
        one (no Laplace fit: a funnel, a boundary); a start the caller chose, whose k̂ is not
        measured, is not assumed to temper.

    Returns
    -------
    bool
    """
    choice = attrs.get("init_choice")
    khat = float(attrs.get(START_KHAT_ATTRS.get(choice, ""), float("nan")))
    tempers = khat > START_KHAT or (choice == "prior" and math.isnan(khat))
    return tempers and costly(cost, draws)


def numpy_mode():
    """PyTensor's ``fast_run`` rewrites (stabilizations included) without elemwise fusion, on
    the Python linker: a fused ``Composite`` would run element by element in Python."""
    from pytensor.compile.mode import Mode

    return Mode(linker="py", optimizer="fast_run").excluding("fusion")


def numpy_first_kwargs(compile_kwargs: dict) -> dict | None:
    """``compile_kwargs`` for the NumPy stage, or None where there is to be no NumPy stage:
    the caller chose a mode (``backend=``, ``compile_kwargs={"mode": ...}``), PyTensor's
    default mode is not Numba's, or :data:`NUMPY_SECONDS` is 0."""
    if compile_kwargs.get("mode") is not None or NUMPY_SECONDS <= 0 or not default_mode_is_numba():
        return None
    return {**compile_kwargs, "mode": numpy_mode()}


def python_loop_nodes(fgraph) -> list[str]:
    """Names of the Ops of ``fgraph`` whose Python implementation loops in Python (over the
    batch, or element by element); empty when every node is one NumPy call."""
    from pytensor.tensor.elemwise import Elemwise

    found = set()
    for node in fgraph.apply_nodes:
        op = node.op
        if isinstance(op, _python_looping_types()):
            found.add(type(op).__name__)
        elif isinstance(op, Elemwise) and not _elemwise_is_ufunc(op, node):
            found.add(f"Elemwise{{{type(op.scalar_op).__name__}}}")
    return sorted(found)


def _python_looping_types() -> tuple:
    # Blockwise loops over the batch; Scan over its steps; an OpFromGraph runs an inner
    # function (compiled with C thunks) per call
    from pytensor.compile.builders import OpFromGraph
    from pytensor.scan.op import Scan
    from pytensor.tensor.blockwise import Blockwise

    return (Blockwise, OpFromGraph, Scan)


def _elemwise_is_ufunc(op, node) -> bool:
    # mirrors Elemwise.prepare_node's choice for the "py" implementation: variadic Add/Mul
    # fold a NumPy ufunc and Cast uses astype; otherwise a NumPy function must exist for the
    # scalar operation with this many inputs, or it runs np.frompyfunc (Python per element)
    from pytensor.scalar.basic import Add, Cast, Composite, Mul

    scalar = op.scalar_op
    if isinstance(scalar, Composite):
        return False
    if isinstance(scalar, Add | Mul | Cast):
        return True
    spec = getattr(op, "nfunc_spec", None) or getattr(scalar, "nfunc_spec", None)
    return bool(spec) and spec[1] == len(node.inputs)


def row_cost(fgraph) -> int:
    """Units a particle's evaluation costs on NumPy (:data:`ELEMENT_SECONDS` each): the
    elements each node's outputs hold per particle (static shapes after the batch axis; an
    unknown length counts 1), or the elements of the graph's data (constants and shared
    variables, whose shapes a ``pm.Data`` leaves unknown) if there are more."""
    import numpy as np
    from pytensor.compile.sharedvalue import SharedVariable
    from pytensor.graph.basic import Constant

    outputs = 0
    for node in fgraph.apply_nodes:
        for out in node.outputs:
            shape = getattr(out.type, "shape", None)
            if shape is not None:
                outputs += int(np.prod([1 if n is None else n for n in shape[1:]]))
    data = 0
    for var in fgraph.variables:
        if isinstance(var, Constant):
            data += int(np.size(var.data))
        elif isinstance(var, SharedVariable):
            value = var.get_value(borrow=True)
            data += int(np.size(value)) if isinstance(value, np.ndarray) else 0
    return max(outputs, data)


@dataclass(frozen=True)
class NumpyCost:
    """The estimated NumPy time of a model's calls, and the budget a chain spends on them.

    Attributes
    ----------
    per_call : float
        Seconds a call costs whatever its size (:data:`NODE_SECONDS` × nodes).
    per_row : float
        Seconds each particle adds (:data:`ELEMENT_SECONDS` × :func:`row_cost`).
    budget : float
        :data:`NUMPY_SECONDS` when the cost was estimated (a chain's budget).
    setup_budget : float
        :data:`SETUP_NUMPY_SECONDS` then (the budget of the density before the chains).
    """

    per_call: float
    per_row: float
    budget: float
    setup_budget: float

    @classmethod
    def of(cls, fgraph) -> NumpyCost:
        """The estimate for the compiled graph ``fgraph``."""
        return cls(
            NODE_SECONDS * len(fgraph.apply_nodes),
            ELEMENT_SECONDS * row_cost(fgraph),
            NUMPY_SECONDS,
            SETUP_NUMPY_SECONDS,
        )

    def call(self, rows: int) -> float:
        """Estimated seconds of one call on ``rows`` particles."""
        return self.per_call + rows * self.per_row


@dataclass(frozen=True)
class TwoStage:
    """One graph compiled twice: ``first`` on NumPy (:func:`numpy_mode`), ``then`` on Numba
    (a :class:`~pymc_crais.samplers.engine.reproducible.LazyFunction`, compiled when a
    density first switches to it). The density picks the stage; attributes not defined here
    (``maker``, ``compiled``, ...) are the first stage's."""

    first: object
    then: object

    def stage(self, numpy: bool):
        """The function of the NumPy stage (``numpy``) or of the Numba stage."""
        return self.first if numpy else self.then

    def __getattr__(self, name):
        if name.startswith("__") or name in ("first", "then"):
            raise AttributeError(name)  # (unpickling looks names up before they are set)
        return getattr(self.first, name)


class StagedCompiler:
    """Compiles on Numba, or on NumPy then Numba (:class:`TwoStage`): the first
    function compiled eagerly decides for the model (no NumPy stage if its graph has a node
    that loops in Python, :func:`python_loop_nodes`, or if the Python linker fails on it)."""

    def __init__(self, compiler, numpy_compiler):
        self.compiler, self.numpy_compiler = compiler, numpy_compiler
        self.cost: NumpyCost | None = None

    def compile(self, inputs, outputs, lazy=False):
        if not self.numpy_compiler:
            return self.compiler.compile(inputs, outputs, lazy=lazy)
        try:
            first = self.numpy_compiler.compile(inputs, outputs, lazy=lazy)
        except Exception:  # the Python linker cannot build it: Numba alone, as without stages
            self.numpy_compiler, self.cost = None, None
            return self.compiler.compile(inputs, outputs, lazy=lazy)
        if self.cost is None:  # the deciding (eager) function
            if python_loop_nodes(first.maker.fgraph):
                self.numpy_compiler = None
                return self.compiler.compile(inputs, outputs, lazy=lazy)
            self.cost = NumpyCost.of(first.maker.fgraph)
        return TwoStage(first, self.compiler.compile(inputs, outputs, lazy=True))
