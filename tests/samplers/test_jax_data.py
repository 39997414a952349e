"""JAX: the model's data are inputs of the compiled functions, held once (jax_data.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

from pymc_crais.samplers.engine.jax_data import MIN_CONSTANT_BYTES, DataCompiler, data_sources


def test_data_sources_are_shared_variables_and_large_constants_only():
    small = pt.as_tensor_variable(np.arange(5.0))  # stays a constant (PyTensor folds it)
    large = pt.as_tensor_variable(np.ones(MIN_CONSTANT_BYTES // 8))
    with pm.Model():
        X = pm.Data("X", np.ones((3, 2)))  # a shared variable: any size
    b = pt.vector("b")
    out = (X @ b).sum() + small.sum() * large.sum() + pt.constant(2.0)
    found = data_sources([out])
    assert {id(v) for v in found} == {id(X), id(large)}


def test_other_backends_compile_exactly_as_before():
    from pymc_crais.samplers.engine.reproducible import LazyFunction, ReproducibleFunction

    b = pt.vector("b")
    big = pt.as_tensor_variable(np.ones(MIN_CONSTANT_BYTES // 8))
    compiler = DataCompiler({}, jax=False)
    fn = compiler.compile([b], [b.sum() * big.sum()])
    assert isinstance(fn, ReproducibleFunction)  # no data inputs added
    assert isinstance(compiler.compile([b], [b.sum()], lazy=True), LazyFunction)
    fgraph = fn.maker.fgraph
    assert len(fgraph.inputs) == 1


def _run_jax(code: str) -> None:
    """``code`` in a fresh interpreter (a JAX runtime in the test process would make later
    forking tests unsafe)."""
    pytest.importorskip("jax")
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


def test_jax_functions_take_the_data_as_inputs_and_hold_it_once():
    """Without the data as inputs PyTensor's JAX linker closes over a JAX copy of every
    constant (XLA embeds it in every executable: one per batch shape) and of every shared
    value (a dead copy per compiled function). Checked: no data-sized constant in the graph
    handed to JAX, no data-sized array in the jitted function's globals, pm.Data read in
    place on the CPU, and the same bits as the functions compiled without the change."""
    _run_jax(
        f"""
        import cloudpickle, numpy as np, pymc as pm, pytensor.tensor as pt
        from pytensor.graph.basic import Constant
        from pymc_crais.samplers.engine.compile import compile_model_density, resolve_compile_kwargs
        from pymc_crais.samplers.engine.jax_data import DataCompiler

        n = {MIN_CONSTANT_BYTES // 8 + 1000}  # y (a constant) is above the threshold
        rng = np.random.default_rng(0)
        X, Z = rng.standard_normal((n, 3)), rng.standard_normal((n, 2))
        y = (rng.random(n) < 0.5).astype(np.int64)
        with pm.Model() as model:
            Xd = pm.Data("X", X)
            b = pm.Normal("b", 0, 1, shape=3)
            c = pm.Normal("c", 0, 1, shape=2)
            pm.Bernoulli("y", logit_p=Xd @ b + pt.dot(Z, c), observed=y)  # Z: a constant
        ckw = resolve_compile_kwargs("jax", None)
        dens = compile_model_density(model, compile_kwargs=ckw)
        wrapped = dens._fn_grad
        fn = getattr(wrapped, "function", wrapped)._function
        consts = [v for v in fn.maker.fgraph.variables if isinstance(v, Constant)]
        assert max(np.asarray(v.data).size for v in consts) < n, "data left as a constant"
        assert len(fn.maker.fgraph.inputs) == 4  # particles, X, Z and y
        jitted = fn.vm.__defaults__[0]  # PyTensor's thunk(fgraph_jit=..., ...)
        python_fn = getattr(jitted, "__wrapped__", None)
        assert python_fn is not None, "PyTensor's JAX thunk changed: update this test"
        held = [k for k, v in python_fn.__globals__.items()
                if type(v).__name__ in ("ndarray", "ArrayImpl") and np.size(v) >= n]
        assert not held, held

        x = rng.standard_normal((5, 5)) * 0.3
        got = dens.evaluate(x, gradient=True)
        # pm.Data read in place (no copy) on the CPU
        shared = model["X"]
        device = wrapped.data.values([shared])[0]
        assert device.unsafe_buffer_pointer() == shared.get_value(borrow=True).ctypes.data

        # the same bits as the functions compiled with the data left where PyMC put it
        import pymc_crais.samplers.engine.compile as compile_mod
        import pymc_crais.samplers.engine.model_graph as graph_mod

        class Unlifted(DataCompiler):
            def __init__(self, compile_kwargs, jax):
                super().__init__(compile_kwargs, jax=False)

        graph_mod.DataCompiler = Unlifted
        compile_mod.clear_compile_cache()
        before = compile_mod.compile_model_density(model, compile_kwargs=ckw)
        graph_mod.DataCompiler = DataCompiler
        assert type(before._fn_grad).__name__ == "ReproducibleFunction"
        old = before.evaluate(x, gradient=True)
        for name in ("log_q0", "delta", "grad_log_q0", "grad_delta"):
            np.testing.assert_array_equal(getattr(got, name), getattr(old, name))
        numba = compile_model_density(model)  # and agree with another backend
        ref = numba.evaluate(x, gradient=True)
        np.testing.assert_allclose(got.delta, ref.delta, rtol=1e-10)
        np.testing.assert_allclose(got.grad_delta, ref.grad_delta, rtol=1e-8, atol=1e-10)

        # pm.set_data is seen (the value is looked up at every call)
        with model:
            pm.set_data({{"X": 2 * X}})
        moved, ref2 = dens.evaluate(x, gradient=True), numba.evaluate(x, gradient=True)
        np.testing.assert_allclose(moved.delta, ref2.delta, rtol=1e-10)
        assert not np.allclose(moved.delta, got.delta)

        # a pickled density (an executor's task) computes the same values
        clone = cloudpickle.loads(cloudpickle.dumps(dens))
        np.testing.assert_array_equal(clone.evaluate(x, gradient=True).delta, moved.delta)
        print("ok")
        """
    )
