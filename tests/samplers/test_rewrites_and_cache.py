"""The log-density graph rewrites (exact, fewer transcendentals) and the compile cache."""

import gc
import re
import weakref

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy.special import expit

from pymc_crais.samplers.engine import compile as compile_mod
from pymc_crais.samplers.engine.compile import compile_model_density
from pymc_crais.samplers.engine.rewrites import (
    local_sigmoid_to_exp,
    local_softplus_to_log_exp,
    simplify_logp_graph,
    with_fast_softplus,
)
from pymc_crais.samplers.engine.staged import TwoStage


def _logistic_model(n=40, d=3, seed=0, logit=True):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (rng.uniform(size=n) < 0.5).astype(int)
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 2.0, shape=d)
        eta = pt.dot(X, beta)
        if logit:
            pm.Bernoulli("y", logit_p=eta, observed=y)
        else:
            pm.Bernoulli("y", p=pm.math.invlogit(eta), observed=y)
    return model, X, y


def _numpy_loglik(B, X, y):
    eta = B @ X.T
    return (y * eta - np.logaddexp(0.0, eta)).sum(axis=1), (y - expit(eta)) @ X


def _stage(fn, numpy_stage: bool):
    """One stage of a function compiled on NumPy then Numba (``staged.TwoStage``), or ``fn``
    (a graph with a node that loops in Python, e.g. PyMC's unsimplified softplus, is
    compiled on Numba alone)."""
    return fn.stage(numpy_stage) if isinstance(fn, TwoStage) else fn


def _n_softplus(graph) -> int:
    """Distinct softplus nodes (scalar ones inside fused loops included) in ``graph``."""
    text = pytensor.printing.debugprint(graph, file="str", print_type=False)
    return len(set(re.findall(r"Softplus \[id (\w+)\]", text)))


@pytest.mark.parametrize("logit", [True, False])
def test_simplified_density_is_exact_and_cheaper(logit):
    model, X, y = _logistic_model(logit=logit)
    new_density = compile_model_density(model)
    old_density = compile_model_density(model, simplify=False)
    assert new_density.numpy_cost is not None  # compiled on NumPy, then Numba (staged.py)
    rng = np.random.default_rng(1)
    # ordinary, large and huge linear predictors (softplus's branches), and a NaN particle
    B = np.concatenate(
        [rng.normal(size=(20, 3)), 15 * rng.normal(size=(5, 3)), [[300.0, -300.0, 1.0]]]
    )
    for numpy_stage in (True, False):
        new, old = new_density.on_stage(numpy_stage), old_density.on_stage(numpy_stage)
        a, b = new.evaluate(B, gradient=True), old.evaluate(B, gradient=True)
        ll, g = _numpy_loglik(B, X, y)
        np.testing.assert_allclose(a.delta, ll, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(a.grad_delta, g, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(a.delta, b.delta, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(a.log_q0, b.log_q0, rtol=0, atol=1e-12)
        nan = new.evaluate(np.array([[np.nan, 0.0, 0.0]]), gradient=True)
        assert nan.delta[0] == -np.inf or nan.log_q0[0] == -np.inf
        assert np.all(nan.grad_delta == 0.0)
        # PyMC's graph evaluates softplus on both branches; the rewritten one once, and that
        # one is compiled as maximum(x, 0) + log(1 + exp(-|x|)) (local_softplus_to_log_exp)
        old_fn, new_fn = (_stage(d._fn, numpy_stage) for d in (old_density, new_density))
        assert _n_softplus(old_fn.maker.fgraph) >= 2
        assert _n_softplus(new_fn.maker.fgraph) == 0
        text = pytensor.printing.debugprint(new_fn.maker.fgraph, file="str", print_type=False)
        assert (
            "log((i3 + exp((-abs(i1)))))" in text
            or "exp((-abs(" in text
            or ("Log1p" in text or "Log " in text)
            and "Exp" in text
            and "Abs" in text
        )


@pytest.mark.parametrize("mirrored", [False, True])
def test_switch_neg_softplus_rewrite(mirrored):
    x = pt.vector("x")
    c = pt.vector("c", dtype="bool")
    a, b = -pt.softplus(-x), -pt.softplus(x)
    out = pt.switch(c, b, a) if mirrored else pt.switch(c, a, b)
    (new,) = simplify_logp_graph([out])
    assert _n_softplus(out) == 2 and _n_softplus(new) == 1
    xv = np.array([-800.0, -40.0, -3.0, 0.0, 2.5, 40.0, 800.0])
    cv = np.array([True, False, True, False, True, False, True])
    f_new, f_old = pytensor.function([x, c], new), pytensor.function([x, c], out)
    np.testing.assert_allclose(f_new(xv, cv), f_old(xv, cv), rtol=1e-13, atol=1e-13)


def test_fast_softplus_matches_softplus_to_rounding():
    """maximum(x, 0) + log(1 + exp(-|x|)) against an exact softplus: absolute error below
    2.3e-16 plus half an ulp of the result, on every branch of PyTensor's softplus."""
    from pytensor.graph.rewriting.basic import in2out
    from pytensor.graph.rewriting.utils import rewrite_graph

    x = pt.vector("x")
    (fast,) = rewrite_graph([pt.softplus(x)], custom_rewrite=in2out(local_softplus_to_log_exp))
    assert _n_softplus(fast) == 0
    f = pytensor.function(
        [x],
        fast,
        mode=pytensor.compile.mode.get_mode("NUMBA").excluding("canonicalize", "stabilize"),
    )
    assert _n_softplus(f) == 0  # not turned back into softplus by the compilation
    rng = np.random.default_rng(0)
    xv = np.concatenate(
        [rng.normal(0, 3, 2000), rng.uniform(-800, 800, 2000), [-37.5, -37.0, 0.0, 18.0, 33.3]]
    )
    exact = np.logaddexp(0.0, xv)
    err = np.abs(f(xv) - exact)
    assert np.all(err <= 2.3e-16 + np.spacing(exact))
    # inf and NaN as softplus maps them
    special = f(np.array([np.inf, -np.inf, np.nan]))
    assert special[0] == np.inf and special[1] == 0.0 and np.isnan(special[2])
    # float32 graphs are left alone
    x32 = pt.vector("x32", dtype="float32")
    (same,) = rewrite_graph([pt.softplus(x32)], custom_rewrite=in2out(local_softplus_to_log_exp))
    assert _n_softplus(same) == 1


def _n_exp(graph) -> int:
    text = pytensor.printing.debugprint(graph, file="str", print_type=False)
    return len(set(re.findall(r"\bexp \[id (\w+)\]", text))) + len(
        set(re.findall(r"[Ss]igmoid \[id (\w+)\]", text))
    )


def test_fast_sigmoid_matches_expit_in_both_tails():
    from pytensor.graph.rewriting.basic import in2out
    from pytensor.graph.rewriting.utils import rewrite_graph

    x = pt.vector("x")
    (fast,) = rewrite_graph([pt.sigmoid(x)], custom_rewrite=in2out(local_sigmoid_to_exp))
    # in a compilation the rewrite runs after stabilization, which would undo it
    no_stabilize = pytensor.compile.mode.get_mode("NUMBA").excluding("canonicalize", "stabilize")
    f = pytensor.function([x], fast, mode=no_stabilize)
    assert "sigmoid" not in pytensor.printing.debugprint(f, file="str", print_type=False).lower()
    rng = np.random.default_rng(0)
    xv = np.concatenate([rng.normal(0, 3, 2000), rng.uniform(-700, 700, 2000), [0.0, -0.0, 1e-300]])
    np.testing.assert_allclose(f(xv), expit(xv), rtol=4e-16, atol=0)
    special = f(np.array([np.inf, -np.inf, np.nan, 800.0, -800.0]))
    assert special[0] == 1.0 and special[1] == 0.0 and np.isnan(special[2])
    assert special[3] == 1.0 and special[4] == 0.0
    x32 = pt.vector("x32", dtype="float32")
    (same,) = rewrite_graph([pt.sigmoid(x32)], custom_rewrite=in2out(local_sigmoid_to_exp))
    assert "sigmoid" in pytensor.printing.debugprint(same, file="str", print_type=False).lower()


def test_logistic_density_and_gradient_share_one_exponential():
    """Bernoulli-logit's log-density and its gradient: one exp an element, not two."""
    model, X, y = _logistic_model(n=30, d=2)
    dens = compile_model_density(model)
    assert _n_exp(_stage(dens._fn_grad, False).maker.fgraph) == 1  # Numba's fused loop
    B = np.random.default_rng(3).normal(size=(7, 2)) * 5
    _, g = _numpy_loglik(B, X, y)
    ev = dens.evaluate(B, gradient=True)
    np.testing.assert_allclose(ev.grad_delta, g, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("backend", ["numba", "c"])
def test_fast_softplus_mode_keeps_the_linker(backend):
    from pymc_crais.samplers.engine.compile import resolve_compile_kwargs

    ckw = resolve_compile_kwargs(backend, None)
    fast = with_fast_softplus(ckw)
    assert type(fast["mode"].linker) is type(pytensor.compile.mode.get_mode(ckw.get("mode")).linker)
    assert ckw.get("mode") is not fast["mode"]  # the caller's options are not changed
    x = pt.vector("x")
    f = pytensor.function([x], pt.softplus(x).sum(), mode=fast["mode"])
    assert _n_softplus(f) == 0
    xv = np.linspace(-50, 50, 101)
    np.testing.assert_allclose(f(xv), np.logaddexp(0.0, xv).sum(), rtol=1e-15)


def test_fast_softplus_only_where_it_is_summed():
    """A softplus whose relative error matters (its log, a scale) keeps PyTensor's form."""
    from pymc_crais.samplers.engine.compile import resolve_compile_kwargs

    mode = with_fast_softplus(resolve_compile_kwargs(None, None))["mode"]
    x, w = pt.vector("x"), pt.vector("w")
    xv = np.array([-50.0, -20.0, 0.5, 40.0])
    log_sp = pytensor.function([x], pt.log(pt.softplus(x)), mode=mode)
    assert _n_softplus(log_sp) == 1
    np.testing.assert_allclose(log_sp(xv), np.log(np.logaddexp(0.0, xv)), rtol=1e-14)
    scaled = pytensor.function([x, w], pt.softplus(x) * w, mode=mode)
    assert _n_softplus(scaled) == 1
    # sums, differences and constant multiples are rewritten
    summed = pytensor.function([x, w], (w - 2.0 * pt.softplus(x)).sum(), mode=mode)
    assert _n_softplus(summed) == 0
    np.testing.assert_allclose(
        summed(xv, xv), (xv - 2.0 * np.logaddexp(0.0, xv)).sum(), rtol=1e-15, atol=1e-15
    )


def test_other_graphs_pass_through_unchanged():
    x = pt.vector("x")
    out = pt.switch(x > 0, -pt.softplus(x), pt.log(x**2 + 1))
    (new,) = simplify_logp_graph([out])
    xv = np.linspace(-3, 3, 7)
    np.testing.assert_allclose(pytensor.function([x], new)(xv), pytensor.function([x], out)(xv))


def test_repeated_compilation_is_cached_per_model_and_options():
    model, _, _ = _logistic_model(seed=3)
    first = compile_model_density(model, gradient=False)
    second = compile_model_density(model, gradient=False)
    assert second._fn is first._fn
    assert second is not first and second.n_evals == 0  # evaluation counters are per density
    assert compile_model_density(model)._fn is not first._fn  # with gradients: another entry
    assert compile_model_density(model, gradient=False, simplify=False)._fn is not first._fn
    options = {"on_unused_input": "warn"}
    assert compile_model_density(model, gradient=False, compile_kwargs=options)._fn is not first._fn
    # a model changed after compiling gets new functions
    with model:
        pm.Normal("extra", 0.0, 1.0)
    changed = compile_model_density(model, gradient=False)
    assert changed._fn is not first._fn and changed.dim == first.dim + 1
    other, _, _ = _logistic_model(seed=3)  # an equal but distinct model is compiled anew
    assert compile_model_density(other, gradient=False)._fn is not first._fn
    # the cache holds its models weakly: a deleted model takes its compiled functions along
    # (checked on this model alone: other tests' dead models may be collected at the same time)
    assert other in compile_mod._COMPILED
    other_ref = weakref.ref(other)
    del other
    gc.collect()
    assert other_ref() is None
    assert model in compile_mod._COMPILED


def test_cached_function_reads_updated_data():
    rng = np.random.default_rng(4)
    with pm.Model() as model:
        obs = pm.Data("obs", rng.normal(size=10))
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Normal("y", mu, 1.0, observed=obs, shape=obs.shape)
    x = np.array([[0.3], [-1.0]])
    before = compile_model_density(model).evaluate(x).delta
    new_obs = rng.normal(size=7)
    with model:
        pm.set_data({"obs": new_obs})
    after = compile_model_density(model).evaluate(x).delta
    expected = [-0.5 * ((new_obs - m) ** 2).sum() - 3.5 * np.log(2 * np.pi) for m in x[:, 0]]
    np.testing.assert_allclose(after, expected, rtol=1e-10)
    assert not np.allclose(before, after)
