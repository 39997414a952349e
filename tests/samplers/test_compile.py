"""The batched model density equals PyMC's own per-point log-densities and gradients."""

import warnings

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

from pymc_crais.samplers.engine import compile as compile_mod
from pymc_crais.samplers.engine import gradients as gradients_mod
from pymc_crais.samplers.engine import model_graph as graph_mod
from pymc_crais.samplers.engine.compile import (
    PerParticleFallbackWarning,
    compile_model_density,
    parameter_layout,
)
from pymc_crais.samplers.engine.prior import PriorSampler
from pymc_crais.samplers.engine.reproducible import LazyFunction


@pytest.fixture(scope="module")
def mixed_model():
    """Scalar, vector, bounded (log), simplex (stick-breaking) and dependent variables."""
    y = np.array([0.3, -1.2, 2.2, 0.7, 1.1])
    with pm.Model(coords={"g": ["a", "b", "c"]}) as model:
        mu = pm.Normal("mu", 0.0, 2.0)
        sd = pm.HalfNormal("sd", 1.5)
        theta = pm.Normal("theta", mu, sd, dims="g")
        w = pm.Dirichlet("w", np.ones(3))
        xd = pm.Data("xd", np.array([1.0, 2.0, 3.0]))
        pm.Deterministic("lin", (theta * w * xd).sum())
        pm.Normal("y", (theta * w).sum() + mu, 1.0, observed=y)
        pm.Potential("pot", -0.5 * (mu - 0.5) ** 2)
    return model


REF_MODE = "FAST_COMPILE"


def _reference(model, x, layout):
    """Per-point varlogp / datalogp and gradients via PyMC's own compiled functions.

    Compiled with :data:`REF_MODE` (NumPy per Op, no code generation): the reference is not
    under test, and Numba would spend most of this file's cold-cache time compiling it.
    """
    value_vars = model.value_vars
    f_lp = model.compile_fn(model.varlogp, inputs=value_vars, point_fn=False, on_unused_input="ignore", mode=REF_MODE)
    f_ll = model.compile_fn(model.datalogp, inputs=value_vars, point_fn=False, on_unused_input="ignore", mode=REF_MODE)
    g_lp = model.compile_fn(pt.grad(model.varlogp, value_vars, disconnected_inputs="ignore"), inputs=value_vars, point_fn=False, on_unused_input="ignore", mode=REF_MODE)
    g_ll = model.compile_fn(pt.grad(model.datalogp, value_vars, disconnected_inputs="ignore"), inputs=value_vars, point_fn=False, on_unused_input="ignore", mode=REF_MODE)
    outs = {"lp": [], "ll": [], "glp": [], "gll": []}
    for row in x:
        args = [row[s.start : s.stop].reshape(s.shape) for s in layout.slots]
        outs["lp"].append(f_lp(*args))
        outs["ll"].append(f_ll(*args))
        outs["glp"].append(np.concatenate([np.ravel(g) for g in g_lp(*args)]))
        outs["gll"].append(np.concatenate([np.ravel(g) for g in g_ll(*args)]))
    return {k: np.array(v) for k, v in outs.items()}


def test_layout_follows_value_vars(mixed_model):
    layout = parameter_layout(mixed_model)
    assert [s.name for s in layout.slots] == [v.name for v in mixed_model.value_vars]
    assert [s.size for s in layout.slots] == [1, 1, 3, 2]
    assert layout.dim == 7 and not layout.has_discrete


def test_batched_matches_pymc_pointwise(mixed_model, rng):
    layout = parameter_layout(mixed_model)
    dens = compile_model_density(mixed_model)
    assert dens.vectorized
    x = PriorSampler(mixed_model, layout).draw(rng, 16)
    ev = dens.evaluate(x, gradient=True)
    ref = _reference(mixed_model, x, layout)
    np.testing.assert_allclose(ev.log_q0, ref["lp"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ev.delta, ref["ll"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ev.grad_log_q0, ref["glp"], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(ev.grad_delta, ref["gll"], rtol=1e-8, atol=1e-10)
    assert dens.n_evals == 16


def test_gradient_matches_finite_differences(mixed_model, rng):
    dens = compile_model_density(mixed_model)
    x = PriorSampler(mixed_model, parameter_layout(mixed_model)).draw(rng, 4)
    ev = dens.evaluate(x, gradient=True)
    eps = 1e-6
    for j in range(x.shape[1]):
        e = np.zeros(x.shape[1])
        e[j] = eps
        up, dn = dens.evaluate(x + e), dens.evaluate(x - e)
        np.testing.assert_allclose(ev.grad_log_q0[:, j], (up.log_q0 - dn.log_q0) / (2 * eps), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ev.grad_delta[:, j], (up.delta - dn.delta) / (2 * eps), rtol=1e-5, atol=1e-6)


def test_fallback_loop_warns_and_agrees(mixed_model, rng, monkeypatch, request):
    x = PriorSampler(mixed_model, parameter_layout(mixed_model)).draw(rng, 5)
    batched = compile_model_density(mixed_model).evaluate(x, gradient=True)

    def broken(*args, **kwargs):
        raise NotImplementedError("no vectorization for this op")

    monkeypatch.setattr(graph_mod, "vectorize_graph", broken)
    compile_mod.clear_compile_cache()  # the batched functions of this model are cached
    request.addfinalizer(compile_mod.clear_compile_cache)  # and so is the fallback
    # the loop's functions in NumPy per Op (the mode is honoured like any compile_kwargs):
    # the loop is under test, not Numba's code for a second copy of the model
    with pytest.warns(PerParticleFallbackWarning, match="per-particle loop"):
        dens = compile_model_density(mixed_model, compile_kwargs={"mode": REF_MODE})
    assert not dens.vectorized
    looped = dens.evaluate(x, gradient=True)
    for a, b in zip(
        (batched.log_q0, batched.delta, batched.grad_log_q0, batched.grad_delta),
        (looped.log_q0, looped.delta, looped.grad_log_q0, looped.grad_delta),
    ):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_compile_kwargs_are_honoured(mixed_model, rng):
    x = PriorSampler(mixed_model, parameter_layout(mixed_model)).draw(rng, 3)
    # with the gradient: the function the default density compiles anyway (values-only would
    # be one more cold compilation for nothing)
    ref = compile_model_density(mixed_model).evaluate(x, gradient=True)
    dens = compile_model_density(mixed_model, compile_kwargs={"mode": "FAST_COMPILE"})
    assert dens._fn_grad.maker.mode.optimizer.__class__.__name__ != "" and dens.vectorized
    assert dens._fn_grad.maker.linker.__class__.__name__ != (
        compile_model_density(mixed_model)._fn_grad.maker.linker.__class__.__name__
    )
    np.testing.assert_allclose(dens.evaluate(x, gradient=True).delta, ref.delta, rtol=1e-10)


def test_discrete_inputs_are_rounded(rng):
    with pm.Model() as model:
        k = pm.Poisson("k", 3.0)
        pm.Normal("y", k, 1.0, observed=[2.5, 3.5])
    dens = compile_model_density(model, gradient=False)
    assert parameter_layout(model).discrete_names == ["k"]
    x = np.array([[2.8], [3.2], [3.0]])
    ev = dens.evaluate(x)
    assert ev.log_q0[0] == ev.log_q0[1] == ev.log_q0[2]
    np.testing.assert_allclose(ev.log_q0[0], pm.logp(pm.Poisson.dist(3.0), 3).eval())


def test_non_finite_log_density_is_minus_inf():
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0)
        pm.Potential("cut", pt.switch(x > 0, 0.0, -np.inf))
    dens = compile_model_density(model)
    ev = dens.evaluate(np.array([[-1.0], [1.0], [np.nan]]), gradient=True)
    assert ev.delta[0] == -np.inf and np.isfinite(ev.delta[1]) and ev.delta[2] == -np.inf
    assert np.all(np.isfinite(ev.grad_delta))


@pytest.mark.parametrize("check_bounds", [True, False])
def test_parameter_check_fails_only_its_own_particle(check_bounds):
    """One particle whose scale underflows to 0 (log σ = −800) fails the parameter check
    σ > 0 of its own rows only; batched, PyTensor's check reduced over all particles and
    gave the whole call ``-inf``. With ``check_bounds=False`` PyMC removes the check."""
    y = np.array([0.4, -0.3])
    with pm.Model(check_bounds=check_bounds) as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        sd = pm.HalfNormal("sd", 2.0)
        theta = pm.Normal("theta", mu, sd, shape=2)
        pm.Normal("y", theta, 1.0, observed=y)
    dens = compile_model_density(model)
    good = np.array([[0.1, 0.2, 0.3, -0.4], [-0.5, -1.0, 0.2, 0.1]])
    x = np.vstack([good[:1], [[0.0, -800.0, 0.0, 0.0]], good[1:]])
    alone = dens.evaluate(good, gradient=True)
    for gradient in (False, True):
        ev = dens.evaluate(x, gradient=gradient)
        np.testing.assert_array_equal(ev.log_q0[[0, 2]], alone.log_q0)
        np.testing.assert_array_equal(ev.delta[[0, 2]], alone.delta)
        if gradient:
            np.testing.assert_array_equal(ev.grad_log_q0[[0, 2]], alone.grad_log_q0)
    ref = _reference(model, good, dens.layout)
    np.testing.assert_allclose(alone.log_q0, ref["lp"], rtol=1e-12)
    if check_bounds:
        assert ev.log_q0[1] == -np.inf and ev.delta[1] == -np.inf


def test_hmc_keeps_moving_in_a_funnel_where_particles_reach_invalid_scales():
    """End to end: AIS with HMC on the suite's centred funnel. Divergent trajectories in the
    neck take some particles' scale to 0; with the check batched over all particles every
    such transition rejected every move (16 of 49 stages at acceptance exactly 0, the rest
    at 0.99 with the step size collapsed). Per particle, no stage stops and the step size
    adaptation keeps acceptance near its target."""
    import pymc_crais as pmc
    from pymc_crais.validation import get_case

    model = get_case("hier_centered").build_model()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = pmc.sample_ais(model=model, draws=200, chains=1, cores=1, random_seed=3,
                             n_steps=50, progressbar=False, return_inferencedata=False)  # fmt: skip
    acc = np.asarray(res.chain_stats[0]["acceptance_rate"])[1:]
    assert np.all(acc > 0.2), acc
    assert 0.5 < np.median(acc) < 0.9, acc


def test_model_without_free_variables_is_refused():
    with pm.Model() as model:
        pm.Normal("y", 0.0, 1.0, observed=[0.1])
    with pytest.raises(ValueError, match="no free random variables"):
        compile_model_density(model)


def test_density_is_picklable(mixed_model, rng):
    import cloudpickle

    dens = compile_model_density(mixed_model)
    x = PriorSampler(mixed_model, parameter_layout(mixed_model)).draw(rng, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clone = cloudpickle.loads(cloudpickle.dumps(dens))
    np.testing.assert_array_equal(clone.evaluate(x, True).grad_delta, dens.evaluate(x, True).grad_delta)


def test_values_only_function_is_compiled_when_first_needed(mixed_model, rng, request):
    """With a gradient function, the values-only function (unused by gradient kernels) is
    compiled on its first call, and gives the bits an eager compilation gives."""
    compile_mod.clear_compile_cache()  # earlier tests may have used the values already
    request.addfinalizer(compile_mod.clear_compile_cache)
    x = PriorSampler(mixed_model, parameter_layout(mixed_model)).draw(rng, 5)
    dens = compile_model_density(mixed_model, gradient=True)
    assert isinstance(dens._fn, LazyFunction) and not dens._fn.compiled
    dens.evaluate(x, gradient=True)
    assert not dens._fn.compiled
    lazy = dens.evaluate(x, gradient=False)
    assert dens._fn.compiled
    eager = compile_model_density(mixed_model, gradient=False).evaluate(x, gradient=False)
    assert lazy.log_q0.tobytes() == eager.log_q0.tobytes()
    assert lazy.delta.tobytes() == eager.delta.tobytes()


def test_pickled_prior_sampler_draws_the_same_bits(mixed_model):
    """Unpickling recompiles the functions (without fast-math); the random generators the
    sampler seeds must still be the compiled function's own."""
    import cloudpickle

    sampler = PriorSampler(mixed_model, parameter_layout(mixed_model))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clone = cloudpickle.loads(cloudpickle.dumps(sampler))
    a = sampler.draw(np.random.default_rng(3), 4)
    b = clone.draw(np.random.default_rng(3), 4)
    assert a.tobytes() == b.tobytes()


def test_batched_gradients_join_column_blocks_same_values(mixed_model):
    """The gradient is joined from the blocks ``xb[:, a:b]`` (no IncSubtensor to generate
    code for) with the values of ``pt.grad(cost, xb)``; a graph that reads ``xb`` otherwise
    falls back to ``pt.grad``."""
    import pytensor
    from pytensor.graph.replace import vectorize_graph
    from pytensor.graph.traversal import ancestors
    from pytensor.tensor.subtensor import IncSubtensor

    from pymc_crais.samplers.engine.rewrites import simplify_logp_graph

    layout = parameter_layout(mixed_model)
    (lp, ll), theta = compile_mod.joined_scalar_graph(
        mixed_model, [mixed_model.varlogp, mixed_model.datalogp], layout
    )
    xb = pt.matrix("xb", dtype="float64")
    blp, bll = simplify_logp_graph(vectorize_graph([lp, ll], replace={theta: xb}))  # as compiled
    joined = gradients_mod.batched_gradients([blp.sum(), bll.sum()], xb, layout.dim)
    plain = [pt.grad(c.sum(), xb) for c in (blp, bll)]
    def n_inc(outs):
        return sum(v.owner is not None and isinstance(v.owner.op, IncSubtensor)
                   for v in ancestors(outs))  # fmt: skip

    assert gradients_mod.column_blocks([blp.sum(), bll.sum()], xb, layout.dim) is not None
    assert n_inc(joined) < n_inc(plain)  # the model's own (stick-breaking) ones remain
    f = pytensor.function([xb], joined + plain, mode="FAST_COMPILE")
    x = PriorSampler(mixed_model, layout).draw(np.random.default_rng(3), 7)
    g_lp, g_ll, p_lp, p_ll = f(x)
    assert g_lp.shape == (7, layout.dim)
    np.testing.assert_array_equal(g_lp, p_lp)
    np.testing.assert_array_equal(g_ll, p_ll)
    direct = (xb**2).sum() + blp.sum()  # reads xb outside its column blocks
    assert gradients_mod.column_blocks([direct], xb, layout.dim) is None
    (g,) = gradients_mod.batched_gradients([direct], xb, layout.dim)
    np.testing.assert_array_equal(
        pytensor.function([xb], g, mode="FAST_COMPILE")(x),
        pytensor.function([xb], pt.grad(direct, xb), mode="FAST_COMPILE")(x),
    )
