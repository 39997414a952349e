"""Batched prior draws for hierarchical shapes (samplers/engine/vectorize.py): no per-particle fallback,
and the draws have the prior's distribution *jointly*.

Each model below used to fall back to drawing the particles one at a time
(``PerParticleFallbackWarning``: PyTensor's ``vectorize_graph`` extends a random variable's
size by its first parameter's batch axes only). Each test standardizes the child by its
parents, particle by particle, and tests the result against its exact law with a one-sample
KS test: a batch axis broadcast against the wrong one, or a draw shared by the whole batch,
makes the p-value vanish. Fixed seeds; the threshold 1e-3 per test (Bonferroni-corrected over
the coordinates tested) is far below what correct draws give and far above what any of those
bugs gives (p < 1e-30 at these sizes).
"""

import warnings

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy import stats

from pymc_crais.samplers.engine.compile import PerParticleFallbackWarning, parameter_layout
from pymc_crais.samplers.engine.mapping import PosteriorMapper
from pymc_crais.samplers.engine.prior import PriorSampler

N = 3000
ALPHA = 1e-3


def _draw(model, seed=0, n=N):
    """Named prior draws, failing on any per-particle fallback."""
    layout = parameter_layout(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerParticleFallbackWarning)
        sampler = PriorSampler(model, layout)
        mapper = PosteriorMapper(model, layout)
    assert sampler.vectorized
    return mapper(sampler.draw(np.random.default_rng(seed), n))


def _assert_law(samples, dist, name):
    """Every column of ``samples`` (n, k) follows ``dist`` (KS, Bonferroni over columns)."""
    cols = np.asarray(samples).reshape(len(samples), -1)
    p = min(stats.kstest(cols[:, j], dist.cdf).pvalue for j in range(cols.shape[1]))
    assert p > ALPHA / cols.shape[1], f"{name}: KS p = {p:.2g}"


def test_vector_whose_scale_is_another_variable():
    """The Normal-Inverse-Gamma regression's prior (suite case nig_d6): b ~ N(0, g σ²)."""
    with pm.Model() as m:
        s2 = pm.InverseGamma("s2", 3.0, 2.0)
        pm.Normal("b", 0.0, 2.0 * pm.math.sqrt(s2), shape=3)
    d = _draw(m)
    _assert_law(d["s2"], stats.invgamma(3.0, scale=2.0), "s2")
    _assert_law(d["b"] / (2.0 * np.sqrt(d["s2"][:, None])), stats.norm(), "b / sd")


def test_matrix_with_deterministic_scale():
    with pm.Model() as m:
        log_sd = pm.Normal("log_sd", 0.0, 0.5)
        sd = pm.Deterministic("sd", pt.exp(log_sd))
        pm.Normal("b", 1.0, sd, shape=(2, 3))
    d = _draw(m)
    np.testing.assert_allclose(d["sd"], np.exp(d["log_sd"]))
    _assert_law((d["b"] - 1.0) / d["sd"][:, None, None], stats.norm(), "(b - 1) / sd")


def test_matrix_with_one_half_normal_scale_per_row():
    with pm.Model() as m:
        s = pm.HalfNormal("s", 1.0, shape=4)
        pm.Normal("b", 0.0, s[:, None], shape=(4, 3))
    d = _draw(m)
    _assert_law(d["s"], stats.halfnorm(), "s")
    _assert_law(d["b"] / d["s"][:, :, None], stats.norm(), "b / s")


def test_student_t_with_fixed_first_parameter_and_dims():
    with pm.Model(coords={"obs": ["a", "b"]}) as m:
        a = pm.Normal("a", 0.0, 1.0)
        tau = pm.HalfCauchy("tau", 1.0)
        pm.StudentT("t", nu=4.0, mu=a, sigma=tau, dims="obs")
    d = _draw(m)
    _assert_law(d["tau"], stats.halfcauchy(), "tau")
    _assert_law((d["t"] - d["a"][:, None]) / d["tau"][:, None], stats.t(4.0), "(t - a) / tau")


def test_zero_sum_normal_with_random_scale():
    with pm.Model() as m:
        s = pm.HalfNormal("s", 1.0)
        pm.ZeroSumNormal("z", sigma=s, shape=4)
    d = _draw(m)
    z = d["z"] / d["s"][:, None]
    np.testing.assert_allclose(z.sum(axis=1), 0.0, atol=1e-9)
    _assert_law(z, stats.norm(0.0, np.sqrt(1.0 - 1.0 / 4)), "z / s")


def test_random_walk_with_random_innovation_scale():
    """The walk's initial value depends on nothing random upstream: it must still be drawn
    once per particle, not once for the whole batch."""
    with pm.Model() as m:
        sig = pm.HalfNormal("sig", 1.0)
        pm.GaussianRandomWalk("w", sigma=sig, init_dist=pm.Normal.dist(0.0, 1.0), steps=4)
    d = _draw(m)
    _assert_law(d["w"][:, 0], stats.norm(), "w_0")
    _assert_law(np.diff(d["w"], axis=1) / d["sig"][:, None], stats.norm(), "increments / sig")


def test_lkj_cholesky_with_random_standard_deviations():
    with pm.Model() as m:
        rate = pm.Exponential("rate", 1.0)
        pm.LKJCholeskyCov(
            "chol", n=3, eta=2.0, sd_dist=pm.Exponential.dist(rate, shape=3), compute_corr=False
        )
    d = _draw(m)
    # the packed Cholesky factor's first entry is the first standard deviation, Exp(rate)
    _assert_law(d["chol"][:, 0] * d["rate"], stats.expon(), "sd_0 * rate")


def test_dirichlet_and_mvnormal_with_random_parameters():
    """Shapes that were already batched stay so (regression guard)."""
    with pm.Model() as m:
        # c away from 0: Dirichlet(c, c) draws with c ~ 0.02 round to p = 1 exactly, and the
        # KS statistic of such boundary values came out NaN in some test orders
        c = pm.Gamma("c", 10.0, 2.0)
        pm.Dirichlet("p", a=c * np.ones(2))
        mu = pm.Normal("mu", 0.0, 1.0, shape=3)
        pm.MvNormal("x", mu=mu, cov=np.eye(3))
    d = _draw(m)
    # p | c ~ Dirichlet(c, c): p_0 | c ~ Beta(c, c); test through the conditional CDF
    _assert_law(stats.beta(d["c"], d["c"]).cdf(d["p"][:, 0]), stats.uniform(), "F(p_0 | c)")
    _assert_law(d["x"] - d["mu"], stats.norm(), "x - mu")


def test_hierarchical_draws_are_reproducible():
    with pm.Model() as m:
        s2 = pm.InverseGamma("s2", 3.0, 2.0)
        pm.Normal("b", 0.0, pm.math.sqrt(s2), shape=3)
    layout = parameter_layout(m)
    sampler = PriorSampler(m, layout)
    a = sampler.draw(np.random.default_rng(5), 50)
    b = PriorSampler(m, layout).draw(np.random.default_rng(5), 50)
    c = sampler.draw(np.random.default_rng(6), 50)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    # every particle its own draw: no two rows equal
    assert len(np.unique(a, axis=0)) == 50


@pytest.mark.parametrize("case", ["nig_d6"])
def test_suite_normal_inverse_gamma_cases_do_not_fall_back(case):
    from pymc_crais.samplers.engine.compile import compile_model_density
    from pymc_crais.validation import get_case

    model = get_case(case).build_model()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerParticleFallbackWarning)
        assert compile_model_density(model).vectorized
        assert PriorSampler(model, parameter_layout(model)).vectorized


def _discrete_uniform_model(lower, upper):
    with pm.Model() as model:
        k = pm.DiscreteUniform("k", lower, upper)
        pm.Normal("y", k, 10.0, observed=[3.0, 4.0])
    return model


def test_discrete_uniform_draws_compile_natively_with_the_same_bits():
    """DiscreteUniform (PyMC draws it through scipy.stats.randint, which Numba runs in object
    mode, recompiled at every compilation, with a UserWarning) is drawn by ``integers``: no
    warning, every integer of [lower, upper] equally often, and the very bits of the
    original graph's draws (both end in ``Generator.integers``)."""
    import pytensor

    from pymc_crais.samplers.engine.prior import native_draws

    model = _discrete_uniform_model(-2.0, 7.0)  # float bounds, as in the coal switchpoint
    layout = parameter_layout(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Numba's object-mode UserWarning included
        sampler = PriorSampler(model, layout)
    assert sampler.vectorized
    x = sampler.draw(np.random.default_rng(0), 20_000)
    k = np.round(x[:, 0]).astype(int)
    values, counts = np.unique(k, return_counts=True)
    assert values.tolist() == list(range(-2, 8))
    assert stats.chisquare(counts).pvalue > ALPHA

    # the same bits as the graph before the rewrite, compiled without Numba
    rv = model.free_RVs[0]
    rewritten = native_draws([rv])[0]
    assert "integers" in str(rewritten.owner.op)
    rng = rv.owner.inputs[0]
    draws = {}
    for name, out in (("original", rv), ("native", rewritten)):
        fn = pytensor.function([], out, mode="FAST_COMPILE")
        (fn_rng,) = [v for v in fn.get_shared() if v is rng]
        draws[name] = []
        for seed in range(50):
            fn_rng.set_value(np.random.default_rng(seed), borrow=True)
            draws[name].append(int(fn()))
    assert draws["original"] == draws["native"]
    assert len(set(draws["native"])) > 5


def test_native_draws_leave_other_graphs_alone():
    from pymc_crais.samplers.engine.prior import native_draws

    with pm.Model() as model:
        pm.Normal("a")
        pm.Poisson("c", 3.0)
    outs = list(model.free_RVs)
    assert native_draws(outs) == outs


def test_symbolic_variables_pymc_cannot_rebuild_are_batched_from_their_inner_graph():
    """LogitNormal and the mixtures (zero-inflated, hurdle, NormalMixture) are symbolic random
    variables that PyMC cannot rebuild with a new size: they used to fall back to drawing one
    particle at a time. Their inner graphs are batched instead; each draw is checked against
    its exact law."""
    with pm.Model() as model:
        pm.LogitNormal("logit_normal", mu=[0.5, -1.0], sigma=1.3, shape=2)
        pm.ZeroInflatedPoisson("zip", psi=0.3, mu=2.0)
        pm.NormalMixture("mix", w=[0.3, 0.7], mu=[-2.0, 3.0], sigma=[1.0, 0.5])
        pm.Normal("y", 0.0, 10.0, observed=[1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # PyMC: no default transform for the mixture
        d = _draw(model)
    z = np.log(d["logit_normal"] / (1.0 - d["logit_normal"]))
    for j, mu in enumerate((0.5, -1.0)):
        assert stats.kstest((z[:, j] - mu) / 1.3, "norm").pvalue > ALPHA / 2

    k = np.round(d["zip"]).astype(int)
    pmf = 0.3 * stats.poisson(2.0).pmf(np.arange(8))
    pmf[0] += 0.7
    observed = np.bincount(np.minimum(k, 7), minlength=8)
    expected = np.append(pmf[:7], 1.0 - pmf[:7].sum()) * k.size
    assert stats.chisquare(observed, expected).pvalue > ALPHA

    def mixture_cdf(x):
        return 0.3 * stats.norm.cdf(x, -2.0, 1.0) + 0.7 * stats.norm.cdf(x, 3.0, 0.5)

    assert stats.kstest(d["mix"], mixture_cdf).pvalue > ALPHA


def _log_gamma_cdf(t, a, b):
    """P(log X <= t) for X ~ Gamma(a, rate b), without underflow: below b e^t = 1e-30 the
    series' first term x^a / Γ(a + 1) is exact to double precision."""
    from scipy import special

    lx = np.log(b) + t
    small = lx < np.log(1e-30)
    out = np.empty_like(t)
    out[small] = np.exp(a * lx[small] - special.gammaln(a + 1))
    out[~small] = special.gammainc(a, np.exp(lx[~small]))
    return out


def test_vague_gamma_and_inverse_gamma_are_drawn_in_log_space():
    """BUGS' Gamma(0.001, 0.001): half of the direct draws are 0 in float64 (log −inf). The
    draws of log X are finite, have log X's exact law (KS on the exact CDF, down to
    log X ≈ −3000), and the children are drawn given exp(log X); log q0 is finite wherever
    the precision is (the model's Gamma log-density in log space is exact)."""
    from pymc_crais.samplers.engine.compile import compile_model_density

    with pm.Model() as model:
        tau = pm.Gamma("tau", 0.001, 0.001)
        v = pm.InverseGamma("v", 0.01, 2.0)
        pm.Normal("a", 0.0, tau=tau, shape=2)
    layout = parameter_layout(model)
    x = PriorSampler(model, layout).draw(np.random.default_rng(3), N)
    u_tau, u_v, a = x[:, 0], x[:, 1], x[:, 2:]
    assert np.all(np.isfinite(u_tau)) and np.all(np.isfinite(u_v))
    assert np.mean(u_tau < -745) > 0.3  # the draws that used to underflow are there
    assert stats.kstest(_log_gamma_cdf(u_tau, 0.001, 0.001), "uniform").pvalue > ALPHA
    # log V = log 2 − log G, G ~ Gamma(0.01, 1): P(log V <= t) = 1 − P(log G < log 2 − t)
    cdf_v = 1.0 - _log_gamma_cdf(np.log(2.0) - u_v, 0.01, 1.0)
    assert stats.kstest(cdf_v, "uniform").pvalue > ALPHA
    ok = u_tau > -700  # the child's scale exp(-u/2) is finite: standardized, N(0, 1)
    assert stats.kstest((a[ok] * np.exp(0.5 * u_tau[ok, None])).ravel(), "norm").pvalue > ALPHA
    ev = compile_model_density(model, gradient=False).evaluate(x, gradient=False)
    assert np.all(np.isfinite(ev.log_q0[ok]))


def test_ordinary_gamma_priors_are_drawn_as_before():
    """A shape of 0.1 or more keeps the direct draw (the same bits as before)."""
    from pymc_crais.samplers.engine.prior import log_space_draw

    assert log_space_draw(pm.Gamma.dist(2.0, 1.0)) is None
    assert log_space_draw(pm.Gamma.dist(0.5, 1.0)) is None
    assert log_space_draw(pm.Gamma.dist(0.001, 0.001)) is not None
    assert log_space_draw(pm.Normal.dist()) is None


def test_a_scan_prior_draws_one_at_a_time_compiled_and_with_the_law():
    """``pm.AR``'s random graph is a Scan over an RNG, which cannot be vectorized: the
    particles are drawn one at a time (``PerParticleFallbackWarning``), by a compiled
    function (the default mode), not the Python linker (10 s for 2,000 draws of a
    120-state AR(1)), reproducibly from the seed and with the prior's law."""
    from pymc_crais.samplers.engine.reproducible import default_mode_is_numba

    with pm.Model() as m:
        rho = pm.Normal("rho", 0.0, 0.5)
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.AR("x", rho=rho, sigma=sigma, init_dist=pm.Normal.dist(0.0, 2.0), ar_order=1,
              steps=3)  # fmt: skip
    layout = parameter_layout(m)
    with pytest.warns(PerParticleFallbackWarning, match="one at a time"):
        sampler = PriorSampler(m, layout)
    assert not sampler.vectorized
    if default_mode_is_numba():
        assert type(sampler._fn.maker.linker).__name__ == "NumbaLinker"
    raw = sampler.draw(np.random.default_rng(3), N)
    np.testing.assert_array_equal(raw, sampler.draw(np.random.default_rng(3), N))
    d = PosteriorMapper(m, layout)(raw)
    _assert_law(d["rho"], stats.norm(0.0, 0.5), "rho")
    _assert_law(d["sigma"], stats.halfnorm(scale=1.0), "sigma")
    x = np.asarray(d["x"])
    _assert_law(x[:, 0], stats.norm(0.0, 2.0), "x0")
    innov = (x[:, 1:] - d["rho"][:, None] * x[:, :-1]) / d["sigma"][:, None]
    _assert_law(innov, stats.norm(), "innovations")
