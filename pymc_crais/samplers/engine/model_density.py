"""The batched density of a PyMC model (:class:`ModelDensity`), built by
:func:`~pymc_crais.samplers.engine.compile.compile_model_density`."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from ...core.density import BatchedDensity, Evaluation
from .memory import call_in_blocks
from .staged import NumpyCost, TwoStage

__all__ = ["ModelDensity"]


@dataclass
class ModelDensity(BatchedDensity):
    """Batched ``(log q0, Δ)`` of a PyMC model with the prior as ``q0``.

    ``log q0`` is the model's ``varlogp`` (prior with Jacobians) and ``Δ`` its
    ``datalogp``. Built by :func:`compile_model_density`; picklable, so it can be sent
    to worker processes.

    Attributes
    ----------
    vectorized : bool
        ``False`` when the per-particle fallback loop is in use.
    block_rows : int or None
        Particles per call (``None``: the whole population in one call); set from the
        ``memory_budget`` by :func:`pymc_crais.samplers.engine.memory.block_rows`.
    pad_rows : bool
        Pad every call to a power of two of particles (JAX on an accelerator, where each
        new shape is compiled: :func:`pymc_crais.samplers.engine.memory.call_in_blocks`).
    numpy_cost : NumpyCost or None
        With functions compiled on NumPy and Numba (:mod:`~pymc_crais.samplers.engine.staged`):
        the estimated NumPy time of a call, and how much of it is spent before the calls go
        to Numba.
    block_functions : dict
        Functions of groups of points that share the coordinates outside a block, returning
        the values and the gradients in the block alone, keyed by the block's coordinates
        (:mod:`~pymc_crais.samplers.engine.block_gradient`), used by :meth:`evaluate_grouped`;
        a block without one takes the whole gradient of every point.
    """

    layout: object = None  # the ParameterLayout
    vectorized: bool = True
    _fn: object = field(default=None, repr=False)
    _fn_grad: object = field(default=None, repr=False)
    _grad_error: str | None = field(default=None, repr=False)
    block_rows: int | None = None
    pad_rows: bool = False
    numpy_cost: NumpyCost | None = None
    _numpy_spent: float = field(default=0.0, repr=False)
    _numpy_budget: float | None = field(default=None, repr=False)  # None: the set-up's
    block_functions: dict = field(default_factory=dict, repr=False)

    def for_chain(self) -> ModelDensity:
        """A copy for one chain: the same compiled functions, its own count of
        NumPy time towards :attr:`numpy_cost`'s budget (so a chain's bits do not depend on what
        ran before it in the process).

        The chain's budget is :attr:`NumpyCost.budget`, unless the set-up has spent its own
        (:attr:`NumpyCost.setup_budget`): the run has then shown itself long enough that
        Numba's function is worth its compilation, and the chain starts on it
        (:meth:`spend_setup_budget`)."""
        if self.numpy_cost is None:
            return self
        own = self.numpy_cost.setup_budget if self._numpy_budget is None else self._numpy_budget
        budget = 0.0 if self._numpy_spent >= own else self.numpy_cost.budget
        chain = copy.copy(self)
        chain._numpy_spent, chain._numpy_budget = 0.0, budget
        return chain

    def spend_setup_budget(self, gradient: bool = True) -> None:
        """Count the set-up's NumPy budget as spent, so that the chains that follow start on
        Numba (:meth:`for_chain`): before a run known to be long (an annealed start's pilot, a
        second run after a whole one, chains that will temper on a costly model:
        :func:`~pymc_crais.samplers.engine.staged.long_run_ahead`). Deterministic: it depends
        on the calls made, never on a clock or a cache.

        Parameters
        ----------
        gradient : bool, default True
            Whether the chains evaluate the gradient (a gradient kernel): that function's
            Numba stage, or else the values-only one's, is compiled now, so that worker
            processes forked after this inherit it instead of each loading it (a second or
            more a process from a warm cache; with spawn they compile it again).
        """
        if self.numpy_cost is None:
            return
        self._numpy_spent = max(self._numpy_spent, self.numpy_cost.setup_budget)
        fn = self._fn_grad if gradient and self._fn_grad is not None else self._fn
        if isinstance(fn, TwoStage):
            _ = fn.stage(False).function

    def on_stage(self, numpy: bool) -> ModelDensity:
        """A copy whose calls all go to one stage of a two-stage density: NumPy's
        (``numpy=True``) or Numba's (for tests and comparisons; ``self`` if there are no
        stages)."""
        if self.numpy_cost is None:
            return self
        copied = copy.copy(self)
        copied._numpy_spent = -np.inf if numpy else np.inf
        return copied

    def _stage(self, fn: TwoStage, rows: int):
        """The stage of ``fn`` for a call on ``rows`` particles (counted towards the budget)."""
        budget = self._numpy_budget
        fn = fn.stage(
            self._numpy_spent < (self.numpy_cost.setup_budget if budget is None else budget)
        )
        self._numpy_spent += self.numpy_cost.call(rows)
        return fn

    def _call(self, fn, x):
        if isinstance(fn, TwoStage):
            fn = self._stage(fn, x.shape[0])
        if self.vectorized:
            return call_in_blocks(fn, x, self.block_rows, pad=self.pad_rows)
        outs = [fn(row) for row in x]  # per-particle fallback (warned at compile time)
        return [np.stack([o[i] for o in outs]) for i in range(len(outs[0]))]

    def _evaluate(self, x: np.ndarray, gradient: bool) -> Evaluation:
        if not gradient:
            lp, ll = self._call(self._fn, x)
            return Evaluation(np.asarray(lp), np.asarray(ll))
        if self._fn_grad is None:
            raise ValueError(
                f"the model's log-density has no gradient ({self._grad_error}); use a "
                "gradient-free kernel such as kernel='rwmh'"
            )
        lp, ll, glp, gll = self._call(self._fn_grad, x)
        return Evaluation(np.asarray(lp), np.asarray(ll), np.asarray(glp), np.asarray(gll))

    def _evaluate_grouped(self, points: np.ndarray, block: np.ndarray) -> Evaluation:
        fn = self.block_functions.get(tuple(block.tolist()))
        if fn is None:
            return super()._evaluate_grouped(points, block)
        shared = np.setdiff1d(np.arange(self.dim), block)
        hyper = np.ascontiguousarray(points[:, 0, shared])
        latent = np.ascontiguousarray(points[:, :, block])
        if isinstance(fn, TwoStage):
            fn = self._stage(fn, points.shape[0] * points.shape[1])
        lp, ll, glp, gll = (np.asarray(a) for a in fn(hyper, latent))
        rows = points.shape[0] * points.shape[1]
        return Evaluation(lp.reshape(rows), ll.reshape(rows), glp.reshape(rows, block.size),
                          gll.reshape(rows, block.size))  # fmt: skip

    @property
    def has_gradient(self) -> bool:
        """Whether a gradient function was compiled."""
        return self._fn_grad is not None

    @property
    def value_function_compiled(self) -> bool:
        """Whether evaluating without the gradient needs no further compilation (the
        values-only function is compiled on its first use when a gradient function
        exists). A few values can then come cheaper from the gradient function."""
        return getattr(self._fn, "compiled", True)
