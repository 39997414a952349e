"""The model density on NumPy first, then on Numba (``samplers/engine/staged.py``)."""

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

import pymc_crais as pmc
from pymc_crais.samplers.engine import staged
from pymc_crais.samplers.engine.compile import compile_model_density, initial_point_vector
from pymc_crais.samplers.engine.staged import TwoStage, python_loop_nodes


@pytest.fixture(scope="module")
def model():
    """Scalar, vector, log- and logodds-transformed variables, data and a potential (a
    simplex's transform has Python-looping nodes: no NumPy stage)."""
    y = np.array([0.3, -1.2, 2.2, 0.7, 1.1])
    with pm.Model(coords={"g": ["a", "b", "c"]}) as m:
        mu = pm.Normal("mu", 0.0, 2.0)
        sd = pm.HalfNormal("sd", 1.5)
        theta = pm.Normal("theta", mu, sd, dims="g")
        w = pm.Beta("w", 2.0, 2.0, dims="g")
        xd = pm.Data("xd", np.array([1.0, 2.0, 3.0]))
        pm.Normal("y", (theta * w * xd).sum() + mu, 1.0, observed=y)
        pm.Potential("pot", -0.5 * (mu - 0.5) ** 2)
    return m


def _points(m, dens, n=9, seed=0):
    x0 = initial_point_vector(m, dens.layout)
    return x0 + np.random.default_rng(seed).normal(size=(n, dens.dim))


def test_both_stages_compute_the_same_density_and_gradients(model):
    dens = compile_model_density(model)
    assert dens.numpy_cost is not None and isinstance(dens._fn_grad, TwoStage)
    assert not dens._fn_grad.then.compiled  # Numba's code is generated only when needed
    x = _points(model, dens)
    a = dens.on_stage(True).evaluate(x, gradient=True)
    b = dens.on_stage(False).evaluate(x, gradient=True)
    assert dens._fn_grad.then.compiled
    for u, v in zip(
        (a.log_q0, a.delta, a.grad_log_q0, a.grad_delta),
        (b.log_q0, b.delta, b.grad_log_q0, b.grad_delta),
        strict=True,
    ):
        np.testing.assert_allclose(u, v, rtol=1e-12, atol=1e-12)


def test_a_density_switches_after_its_budget_and_each_chain_counts_its_own(model, monkeypatch):
    monkeypatch.setattr(staged, "NUMPY_SECONDS", 1e-9)  # less than any call
    monkeypatch.setattr(staged, "SETUP_NUMPY_SECONDS", 2e-9)
    from pymc_crais.samplers.engine import compile as compile_mod

    compile_mod.clear_compile_cache()
    try:
        dens = compile_model_density(model)
        cost = dens.numpy_cost
        assert cost.budget == 1e-9 and cost.setup_budget == 2e-9
        assert cost.per_call > 0 and cost.per_row > 0
        assert cost.call(10) == cost.per_call + 10 * cost.per_row
        calls = []
        fn = dens._fn_grad
        first, then = fn.first, fn.then
        object.__setattr__(fn, "first", lambda x: calls.append("numpy") or first(x))
        object.__setattr__(fn, "then", lambda x: calls.append("numba") or then(x))
        x = _points(model, dens, n=3)
        early = dens.for_chain()  # a chain before the set-up spent its budget: NumPy first
        dens.evaluate(x, gradient=True)  # on NumPy: the budget is spent after it
        dens.evaluate(x, gradient=True)
        early.evaluate(x, gradient=True)
        early.evaluate(x, gradient=True)  # ... and its own budget is spent after one call
        late = dens.for_chain()  # the set-up went to Numba: so does a chain from now on
        late.evaluate(x, gradient=True)
        dens.evaluate(x, gradient=True)
        assert calls == ["numpy", "numba", "numpy", "numba", "numba", "numba"]
    finally:
        compile_mod.clear_compile_cache()


def test_a_run_long_by_construction_starts_its_chains_on_numba(model):
    """``spend_setup_budget`` (before an annealed start's pilot, or a second run): the set-up's
    budget counts as spent and the chains that follow have none, whatever was spent."""
    from pymc_crais.samplers.engine import compile as compile_mod

    compile_mod.clear_compile_cache()
    try:
        dens = compile_model_density(model)
        assert dens.for_chain()._numpy_budget == dens.numpy_cost.budget > 0
        dens.spend_setup_budget()
        assert dens.for_chain()._numpy_budget == 0.0
        assert dens._numpy_spent == dens.numpy_cost.setup_budget
        dens.spend_setup_budget()  # idempotent
        assert dens._numpy_spent == dens.numpy_cost.setup_budget
    finally:
        compile_mod.clear_compile_cache()


def test_switching_runs_give_the_same_bits_in_one_or_two_processes(model, monkeypatch):
    """Chains that switch mid-run: which rows ran on which backend depends on the seed only."""
    monkeypatch.setattr(staged, "NUMPY_SECONDS", 0.01)
    monkeypatch.setattr(staged, "SETUP_NUMPY_SECONDS", 0.01)
    from pymc_crais.samplers.engine import compile as compile_mod

    compile_mod.clear_compile_cache()
    try:
        kw = dict(model=model, draws=300, chains=2, random_seed=4, progressbar=False)
        runs = [pmc.sample_smc(cores=cores, **kw) for cores in (1, 2)]
        dens = compile_model_density(model)
        assert dens._fn_grad.then.compiled  # the chains did switch to Numba
    finally:
        compile_mod.clear_compile_cache()
    lml = [r["sample_stats"]["log_marginal_likelihood"].values for r in runs]
    assert lml[0].tobytes() == lml[1].tobytes()
    for name in runs[0]["posterior"].data_vars:
        a, b = (r["posterior"][name].values for r in runs)
        assert a.tobytes() == b.tobytes()


def test_a_mode_the_caller_chooses_has_no_numpy_stage(model):
    dens = compile_model_density(model, compile_kwargs={"mode": "NUMBA"})
    assert dens.numpy_cost is None and not isinstance(dens._fn_grad, TwoStage)
    assert dens.on_stage(True) is dens and dens.for_chain() is dens


def _numpy_graph(outputs, inputs):
    fn = pytensor.function(inputs, outputs, mode=staged.numpy_mode())
    return fn.maker.fgraph


def test_nodes_that_loop_in_python_are_found():
    x = pt.matrix("x")
    assert python_loop_nodes(_numpy_graph([pt.exp(x).sum(axis=1) * 2.0 + 1.0], [x])) == []
    # a scalar operation with no NumPy ufunc runs element by element in Python
    assert python_loop_nodes(_numpy_graph([pt.softplus(x)], [x])) == ["Elemwise{Softplus}"]
    # a Blockwise runs its core operation once per batch entry in a Python loop
    m = pt.tensor3("m")
    assert "Blockwise" in python_loop_nodes(_numpy_graph([pt.linalg.det(m)], [m]))


@pytest.mark.parametrize("where", ["compile", "first call"])
def test_a_numpy_stage_that_fails_leaves_numba_alone_not_a_per_particle_loop(
    model, monkeypatch, where
):
    """If PyTensor's Python linker cannot build or run the graph, the density is compiled on
    Numba alone (vectorized, as without stages), never the per-particle fallback."""
    import warnings

    from pymc_crais.samplers.engine import compile as compile_mod
    from pymc_crais.samplers.engine import model_graph

    real = model_graph.DataCompiler

    class Failing(real):
        def compile(self, inputs, outputs, lazy=False):
            numpy = isinstance(self.compile_kwargs.get("mode"), type(staged.numpy_mode()))
            numpy = (
                numpy and self.compile_kwargs["mode"].linker.__class__.__name__ == "PerformLinker"
            )
            if numpy and where == "compile":
                raise NotImplementedError("no Python implementation")
            fn = super().compile(inputs, outputs, lazy=lazy)
            if numpy and where == "first call":

                class Broken:  # builds, but a call fails (an Op without a Python perform)
                    maker = fn.maker

                    def __call__(self, *args):
                        raise NotImplementedError("no Python implementation")

                return Broken()
            return fn

    monkeypatch.setattr(model_graph, "DataCompiler", Failing)
    compile_mod.clear_compile_cache()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", compile_mod.PerParticleFallbackWarning)
            dens = compile_model_density(model)
        assert dens.vectorized and dens.numpy_cost is None
        assert not isinstance(dens._fn_grad, TwoStage)
        x = _points(model, dens, n=3)
        ref = compile_model_density(model, compile_kwargs={"mode": "NUMBA"})
        a, b = dens.evaluate(x, gradient=True), ref.evaluate(x, gradient=True)
        np.testing.assert_allclose(a.delta, b.delta, rtol=1e-12)
        np.testing.assert_allclose(a.grad_delta, b.grad_delta, rtol=1e-12, atol=1e-12)
    finally:
        compile_mod.clear_compile_cache()


def test_a_tempering_run_of_a_costly_model_is_long_ahead():
    """``long_run_ahead``: chains that will temper (the start's k̂ above 0.7, or the automatic
    prior start without one) on a model whose calls cost more than a chain's budget within
    LONG_RUN_CALLS go to Numba at once; a usable start, a start the caller chose, or a cheap
    model keeps the NumPy stage."""
    from pymc_crais.samplers.engine.staged import LONG_RUN_CALLS, NumpyCost, costly, long_run_ahead

    costly_ = NumpyCost(per_call=1e-3, per_row=1e-5, budget=1.0, setup_budget=1.5)  # 21 ms
    cheap = NumpyCost(per_call=1e-4, per_row=1e-7, budget=1.0, setup_budget=1.5)  # 0.3 ms
    assert LONG_RUN_CALLS * costly_.call(2000) > 1.0 > LONG_RUN_CALLS * cheap.call(2000)
    assert costly(costly_, 2000) and not costly(cheap, 2000) and not costly(None, 2000)
    assert not costly(costly_, 20)  # few particles: the calls are cheap
    laplace = {"init_choice": "laplace", "init_pareto_k": 6.5}
    assert long_run_ahead(costly_, 2000, laplace)
    assert not long_run_ahead(cheap, 2000, laplace)
    assert not long_run_ahead(costly_, 2000, {**laplace, "init_pareto_k": 0.3})
    wide = {"init_choice": "laplace_wide", "init_pareto_k": 6.5, "init_pareto_k_wide": 0.5}
    assert not long_run_ahead(costly_, 2000, wide)  # the chosen start's own k̂ counts
    assert long_run_ahead(costly_, 2000, {"init_choice": "prior", "init_pareto_k_prior": np.nan})
    assert long_run_ahead(costly_, 2000, {"init_choice": "prior", "init_pareto_k_prior": 2.0})
    assert not long_run_ahead(costly_, 2000, {"init_choice": "prior", "init_pareto_k_prior": 0.2})
    assert not long_run_ahead(costly_, 2000, {"init_choice": "modes", "init_pareto_k_modes": 0.5})
    assert not long_run_ahead(costly_, 2000, {})  # a start the caller gave: no k̂ measured
    assert not long_run_ahead(None, 2000, laplace)  # no NumPy stage at all


def test_spending_the_setup_budget_compiles_the_function_the_chains_use(model):
    from pymc_crais.samplers.engine import compile as compile_mod

    for gradient in (True, False):
        compile_mod.clear_compile_cache()
        try:
            dens = compile_model_density(model)
            assert not dens._fn_grad.then.compiled and not dens._fn.then.compiled
            dens.spend_setup_budget(gradient)
            assert dens._fn_grad.then.compiled is gradient
            assert dens._fn.then.compiled is not gradient
        finally:
            compile_mod.clear_compile_cache()


@pytest.mark.parametrize("long", [True, False])
def test_the_set_up_sends_the_chains_of_a_long_run_to_numba(model, monkeypatch, long):
    from pymc_crais.samplers.engine import pipeline
    from pymc_crais.samplers.engine.model_density import ModelDensity

    monkeypatch.setattr(pipeline, "long_run_ahead", lambda cost, draws, attrs: long)
    budgets, for_chain = [], ModelDensity.for_chain
    monkeypatch.setattr(
        ModelDensity,
        "for_chain",
        lambda self: budgets.append(for_chain(self)._numpy_budget) or for_chain(self),
    )
    pmc.sample_smc(model=model, draws=100, chains=2, cores=1, random_seed=1, progressbar=False,
                   conditional_start=False)  # its pilot would spend the budget  # fmt: skip
    assert len(budgets) >= 2
    assert all(b == 0.0 for b in budgets) if long else all(b > 0.0 for b in budgets)
