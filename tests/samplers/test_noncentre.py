"""``reparameterize="noncentred"``: the graph rewrite, its prior draws, its output, its evidence."""

import numpy as np
import pymc as pm
import pytest
from scipy import stats

import pymc_crais as pmc
from pymc_crais.samplers.engine.compile import parameter_layout
from pymc_crais.samplers.engine.noncentre import check_reparameterize, noncentred_model
from pymc_crais.samplers.engine.prior import PriorSampler
from pymc_crais.validation.exact_models import hier_synthetic
from pymc_crais.validation.testing import assert_evidence


def _student_model():
    with pm.Model(coords={"g": range(3)}) as m:
        mu = pm.Normal("mu", 0.0, 2.0)
        s = pm.HalfNormal("s", 1.0)
        a = pm.StudentT("a", nu=4.0, mu=mu, sigma=s, dims="g")
        pm.Normal("fixed", 1.0, 2.0)  # constant location and scale: left alone
        pm.Normal("y", a, 1.0, observed=[0.5, -0.2, 1.1])
    return m


@pytest.mark.parametrize("build", ["normal", "student"])
def test_joint_density_is_the_centred_one_times_the_jacobian(build):
    """log p_nc(μ, s, z) = log p(μ, s, a = μ + s z) + Σ log s: the same distribution of the
    original variables, so the same evidence."""
    if build == "normal":
        model = hier_synthetic(True)[0]
        a, scale_name, loc_name = "theta", "tau", "mu"
    else:
        model = _student_model()
        a, scale_name, loc_name = "a", "s", "mu"
    nc, names = noncentred_model(model)
    assert names == [a]
    assert a in {d.name for d in nc.deterministics} and a + "_noncentred" in nc.named_vars
    if build == "student":
        assert "fixed" in {v.name for v in nc.free_RVs}
    rng = np.random.default_rng(3)
    lp_c, lp_nc = model.compile_logp(), nc.compile_logp()
    point = nc.initial_point()
    for _ in range(3):
        point = {k: v + rng.normal(size=np.shape(v)) for k, v in point.items()}
        log_s = point[scale_name + "_log__"]
        a_val = point[loc_name] + np.exp(log_s) * point[a + "_noncentred"]
        centred = {k: v for k, v in point.items() if k != a + "_noncentred"}
        centred[a] = a_val
        jac = np.size(a_val) * log_s
        np.testing.assert_allclose(lp_nc(point), lp_c(centred) + jac, rtol=1e-10)


def test_models_without_a_funnel_are_returned_as_they_are():
    with pm.Model() as m:
        pm.Normal("x", 0.0, 1.0, shape=2)
        pm.Normal("y", 0.0, 1.0, observed=[0.1])
    assert noncentred_model(m) == (m, [])


def test_option_is_checked():
    assert check_reparameterize(None) == "none"
    with pytest.raises(ValueError, match="reparameterize must be one of"):
        check_reparameterize("non-centered")


def test_prior_draws_are_standard_even_where_the_scale_overflows():
    """τ ~ Gamma(0.001, 0.001) is 0 in float64 for about half of its draws (σ = τ^-1/2 = ∞);
    the non-centred coordinate is drawn directly, N(0, 1) and finite."""
    with pm.Model() as m:
        tau = pm.Gamma("tau", 0.001, 0.001)
        mu = pm.Normal("mu", 0.0, tau=1e-6)
        a = pm.Normal("a", mu, tau=tau, shape=5)
        pm.Normal("y", a, 1.0, observed=np.zeros(5))
    nc, _ = noncentred_model(m)
    layout = parameter_layout(nc)
    x = PriorSampler(nc, layout).draw(np.random.default_rng(1), 4000)
    slot = next(s for s in layout.slots if s.name == "a_noncentred")
    z = x[:, slot.start : slot.stop].ravel()
    assert np.all(np.isfinite(x))
    assert stats.kstest(z, "norm").pvalue > 1e-3
    tslot = next(s for s in layout.slots if s.name == "tau_log__")
    assert np.mean(x[:, tslot.start] < np.log(np.finfo(float).tiny)) > 0.3  # it does underflow


def test_exact_evidence_and_output_with_the_original_variables():
    model, log_z, _, _ = hier_synthetic(True)
    idata = pmc.sample_smc(
        500, model=model, chains=2, cores=1, random_seed=4, progressbar=False,
        reparameterize="noncentred",
    )  # fmt: skip
    assert_evidence(idata, log_z, max_mcse=0.15)
    post = idata.posterior
    assert idata.sample_stats.attrs["noncentred"] == "theta"
    assert post["theta"].shape == post["theta_noncentred"].shape == (2, 500, 8)
    np.testing.assert_allclose(
        post["theta"], post["mu"] + post["tau"] * post["theta_noncentred"], rtol=1e-10
    )


def test_custom_initial_values_are_kept_and_name_clashes_refused():
    with pm.Model() as m:
        mu = pm.Normal("mu", 0.0, 1.0, initval=0.5)
        s = pm.HalfNormal("s", 1.0)
        pm.Normal("a", mu, s, shape=2)
        pm.Normal("y", 0.0, 1.0, observed=[0.1])
    nc, names = noncentred_model(m)
    assert names == ["a"]
    assert nc.initial_point()["mu"] == 0.5
    assert m.rvs_to_initial_values[m["mu"]] == 0.5  # the user's model is untouched
    with m:
        pm.Normal("a_noncentred", 0.0, 1.0)
    with pytest.raises(ValueError, match="already uses"):
        noncentred_model(m)


def test_refused_by_the_pm_sample_smc_kernels():
    model = hier_synthetic(True)[0]
    with pytest.raises(TypeError, match="reparameterize= changes"):
        pmc.BatchedSMC(model=model, reparameterize="noncentred")
