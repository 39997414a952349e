"""Vectorized prior draws (unconstrained space) and the map back to named variables."""

import numpy as np
import pymc as pm
import pytest
from scipy import stats

from pymc_crais.samplers.engine.compile import parameter_layout
from pymc_crais.samplers.engine.mapping import PosteriorMapper
from pymc_crais.samplers.engine.prior import PriorSampler


@pytest.fixture(scope="module")
def model():
    with pm.Model() as m:
        mu = pm.Normal("mu", 2.0, 3.0)
        sd = pm.HalfNormal("sd", 1.0)
        pm.Normal("theta", mu, sd, shape=2)
        pm.Beta("p", 2.0, 3.0)
        pm.Dirichlet("w", np.array([1.0, 2.0, 3.0]))
        pm.Deterministic("mu_sq", mu**2)
        pm.Normal("y", mu, 1.0, observed=[1.0])
    return m


def _se(sd, n):
    return sd / np.sqrt(n)


def test_prior_draws_have_prior_moments(model, rng):
    layout = parameter_layout(model)
    sampler = PriorSampler(model, layout)
    assert sampler.vectorized
    n = 40_000
    x = sampler.draw(rng, n)
    assert x.shape == (n, layout.dim)
    named = PosteriorMapper(model, layout)(x)
    # mu ~ N(2, 3)
    assert abs(named["mu"].mean() - 2.0) < 5 * _se(3.0, n)
    assert abs(named["mu"].std() - 3.0) < 5 * 3.0 * np.sqrt(0.5 / n) * 1.5
    # sd ~ HalfNormal(1): E = sqrt(2/pi)
    assert abs(named["sd"].mean() - np.sqrt(2 / np.pi)) < 5 * _se(np.sqrt(1 - 2 / np.pi), n)
    # theta | mu, sd ~ N(mu, sd): Var = 9 + E[sd^2] = 10 (checks the dependence is batched)
    assert abs(named["theta"].var(axis=0) - 10.0).max() < 5 * 10.0 * np.sqrt(2 / n) * 1.5
    # p ~ Beta(2, 3) through the logit transform
    assert abs(named["p"].mean() - 0.4) < 5 * _se(stats.beta(2, 3).std(), n)
    # w ~ Dirichlet(1, 2, 3) through the simplex transform
    np.testing.assert_allclose(named["w"].sum(axis=1), 1.0, atol=1e-12)
    assert np.abs(named["w"].mean(axis=0) - np.array([1, 2, 3]) / 6).max() < 5 * _se(0.2, n)
    # deterministics are computed from the same particles
    np.testing.assert_allclose(named["mu_sq"], named["mu"] ** 2)
    # different particles are different draws: correlation of mu with itself shifted ~ 0
    assert abs(np.corrcoef(named["mu"][1:], named["mu"][:-1])[0, 1]) < 5 / np.sqrt(n)


def test_prior_draws_reproducible(model):
    sampler = PriorSampler(model, parameter_layout(model))
    a = sampler.draw(np.random.default_rng(7), 50)
    b = sampler.draw(np.random.default_rng(7), 50)
    c = sampler.draw(np.random.default_rng(8), 50)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_discrete_draws_are_jittered_and_mapped_back(rng):
    with pm.Model() as m:
        pm.Poisson("k", 4.0)
        pm.Normal("y", 0.0, 1.0, observed=[0.0])
    layout = parameter_layout(m)
    x = PriorSampler(m, layout).draw(rng, 20_000)
    frac = x[:, 0] - np.round(x[:, 0])
    assert frac.min() >= -0.5 and frac.max() <= 0.5 and frac.std() > 0.25  # U(-1/2, 1/2)
    k = PosteriorMapper(m, layout)(x)["k"]
    assert k.dtype.kind == "i"
    assert abs(k.mean() - 4.0) < 5 * _se(2.0, k.size)


def test_prior_sampler_and_mapper_generate_no_code_under_the_default_mode(model):
    """Called a few times a run, they run on PyTensor's Python implementations where the
    mode would be Numba (no code generation on a cold cache); a mode the caller gives stays."""
    from pytensor.compile.mode import get_mode

    from pymc_crais.samplers.engine.reproducible import few_calls_compile_kwargs

    if type(get_mode(None).linker).__name__ != "NumbaLinker":
        pytest.skip("PyTensor's default mode is not Numba's here")
    layout = parameter_layout(model)
    assert type(few_calls_compile_kwargs({})["mode"].linker).__name__ == "PerformLinker"
    assert few_calls_compile_kwargs({"mode": "NUMBA"}) == {"mode": "NUMBA"}
    for fn in (PriorSampler(model, layout)._fn, PosteriorMapper(model, layout)._fn):
        # the Python linker, not the VM: the VM imports PyTensor's C loop, which an empty
        # cache builds (0.55-0.9 s) though it is never used
        assert type(fn.maker.linker).__name__ == "PerformLinker"


def test_initial_point_is_pymcs_without_the_c_loop():
    """The model's initial point is PyMC's (same values, transformed names, initial values
    set by the user), computed on the Python linker: a cold first call never builds PyTensor's
    C loop module for it."""
    import pymc as pm
    from pytensor.link.basic import PerformLinker

    from pymc_crais.samplers.engine.compile import _initial_point
    from pymc_crais.samplers.engine.reproducible import few_calls_mode

    with pm.Model() as m:
        pm.Normal("a", 1.5, 2.0, shape=3)
        pm.HalfNormal("s", 2.0, initval=0.7)
        pm.Beta("p", 2.0, 3.0)
        pm.Dirichlet("w", np.ones(4))
    ours, pymcs = _initial_point(m), m.initial_point()
    assert list(ours) == list(pymcs)
    for name, value in pymcs.items():
        np.testing.assert_array_equal(ours[name], value)
    assert isinstance(few_calls_mode().linker, PerformLinker)
