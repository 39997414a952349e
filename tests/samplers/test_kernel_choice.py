"""kernel="auto": HMC on continuous models, a gradient-free kernel on discrete ones, recorded."""

import numpy as np
import pymc as pm
import pytest

import pymc_crais as pmc
from pymc_crais.samplers.engine.compile import parameter_layout
from pymc_crais.samplers.engine.kernel_choice import (
    CONTINUOUS_DEFAULT,
    DISCRETE_DEFAULT,
    DISCRETE_DEFAULT_PER_LEVEL,
    FINAL_STAGE_DEFAULT,
    one_step_kernel,
    resolve_kernel,
)


@pytest.fixture(scope="module")
def continuous_layout():
    with pm.Model() as m:
        pm.Normal("x", 0.0, 1.0, shape=2)
    return parameter_layout(m)


@pytest.fixture(scope="module")
def discrete_layout():
    with pm.Model() as m:
        pm.Poisson("k", 3.0)
        pm.Normal("x", 0.0, 1.0)
    return parameter_layout(m)


def test_auto_is_hmc_on_continuous_models(continuous_layout):
    for per_level in (False, True):
        name, attrs = resolve_kernel("auto", None, continuous_layout, per_level)
        assert name == CONTINUOUS_DEFAULT == "hmc"
        assert attrs["kernel_requested"] == "auto"
        assert "continuous" in attrs["kernel_reason"]


def test_auto_is_gradient_free_on_discrete_models(discrete_layout):
    name, attrs = resolve_kernel("auto", None, discrete_layout)
    assert name == DISCRETE_DEFAULT == "imh"
    assert "['k']" in attrs["kernel_reason"]
    name, attrs = resolve_kernel("AUTO", None, discrete_layout, per_level=True)
    assert name == DISCRETE_DEFAULT_PER_LEVEL == "rwmh"
    assert "per level" in attrs["kernel_reason"]


def test_named_kernels_pass_through(discrete_layout):
    assert resolve_kernel("rwmh", {"target_accept": 0.3}, discrete_layout) == ("rwmh", {})
    assert resolve_kernel("hmc", None, discrete_layout) == ("hmc", {})


def test_auto_with_options_of_another_kernel_names_the_choice(discrete_layout):
    with pytest.raises(TypeError, match="kernel='auto' chose 'imh'.*kernel_kwargs"):
        resolve_kernel("auto", {"n_leapfrog": 5}, discrete_layout)
    # options of the chosen kernel are fine
    assert resolve_kernel("auto", {"scale": 1.5}, discrete_layout)[0] == "imh"


def test_explicit_hmc_on_a_discrete_model_is_still_refused():
    with pm.Model() as m:
        pm.Poisson("k", 3.0)
        pm.Normal("y", 0.0, 1.0, observed=[0.5])
    with pytest.raises(ValueError, match="kernel='hmc' needs gradients.*discrete"):
        pmc.sample_smc(model=m, draws=50, chains=1, kernel="hmc", progressbar=False)


def test_default_smc_on_the_switchpoint_model_is_right_and_records_the_kernel():
    """pmc.sample_smc() with no options on the suite's discrete switchpoint model (exact log Z by
    summing over the switchpoint) runs, says which kernel it chose, and lands within 4 MCSE."""
    from pymc_crais.validation import get_case

    case = get_case("coal_switchpoint").build()
    idata = pmc.sample_smc(
        model=case.model, draws=400, chains=2, cores=1, random_seed=3, progressbar=False
    )
    attrs = idata["sample_stats"].attrs
    assert attrs["kernel"] == "imh"
    assert attrs["kernel_requested"] == "auto"
    assert "switchpoint" in attrs["kernel_reason"]
    log_z, mcse = pmc.log_marginal_likelihood(idata)
    assert np.isfinite(mcse) and 0 < mcse < 0.5
    assert abs(log_z - case.log_z) < 4 * mcse, (log_z, case.log_z, mcse)
    years = idata["posterior"]["switchpoint"].values
    assert years.dtype.kind == "i" and 1880 <= np.median(years) <= 1895


@pytest.mark.parametrize(
    "kernel, kwargs, resamples, expected",
    [
        ("hmc", None, True, "hmc"),  # the user named the kernel
        ("auto", {"n_leapfrog": 3}, True, "hmc"),  # options written for HMC: HMC
        ("auto", None, False, "hmc"),  # AIS, CR-AIS, RTS: no resampling
    ],
)
def test_the_kernel_stays_unless_auto_smc(continuous_layout, kernel, kwargs, resamples, expected):
    name, _ = resolve_kernel(kernel, kwargs, continuous_layout, resamples=resamples)
    assert name == expected


def test_auto_smc_moves_with_independence_proposals_at_the_target(continuous_layout):
    kernel, attrs = resolve_kernel("auto", None, continuous_layout, resamples=True)
    assert kernel == FINAL_STAGE_DEFAULT == "hmc_final_imh"
    assert attrs["kernel_requested"] == "auto" and "while they are accepted" in attrs["kernel_reason"]


def test_one_step_runs_take_the_final_stage_kernel_only_where_auto_chose_hmc(
    continuous_layout, discrete_layout
):
    """CR-AIS's one-step run (all moves after the weights) takes SMC's last-stage kernel,
    but only in place of an automatic HMC without options."""
    name, attrs = resolve_kernel("auto", None, continuous_layout)
    assert one_step_kernel(name, None, attrs)[0] == FINAL_STAGE_DEFAULT
    assert "one step" in one_step_kernel(name, None, attrs)[1]["kernel_reason"]
    assert one_step_kernel("hmc", None, {}) is None  # the user named HMC
    name, attrs = resolve_kernel("auto", {"n_leapfrog": 3}, continuous_layout)
    assert one_step_kernel(name, {"n_leapfrog": 3}, attrs) is None  # options for HMC
    name, attrs = resolve_kernel("auto", None, discrete_layout)
    assert one_step_kernel(name, None, attrs) is None  # IMH on a discrete model stays


def test_discrete_models_keep_their_kernel_in_smc(discrete_layout):
    assert resolve_kernel("auto", None, discrete_layout, resamples=True)[0] == DISCRETE_DEFAULT


def test_default_smc_on_a_centred_funnel_moves_with_hmc():
    """pmc.sample_smc() with no options on a centred hierarchical model (no interior mode:
    the automatic start leaves the Laplace fit, and sample_smc takes the conditional-Laplace
    start) moves with 'hmc_final_imh' like on every continuous model; sample_ais() with no
    options keeps HMC from the prior."""
    from pymc_crais.validation import get_case

    model = get_case("eight_schools_centered").build_model()
    kw = dict(model=model, draws=200, chains=1, cores=1, random_seed=2, progressbar=False)
    smc = pmc.sample_smc(**kw)["sample_stats"].attrs
    assert smc["kernel"] == "hmc_final_imh" and smc["init_choice"] == "conditional_laplace"
    assert smc["init_first_choice"] == "prior" and smc["laplace_n_nonconcave"] > 0
    ais = pmc.sample_ais(**kw)["sample_stats"].attrs
    assert ais["kernel"] == "hmc"


def test_default_smc_moves_the_target_with_independence_proposals_and_keeps_hmcs_log_z():
    """pmc.sample_smc() with no options on a continuous model: 'hmc_final_imh'. Its log Z is
    HMC's to the bit (the last stage's moves come after it), it spends fewer evaluations,
    and its draws match the exact Gaussian posterior (mean within 0.15 posterior sd: about
    5 standard errors at an effective sample size of 1000 of the 8000 draws; sd within 10 %)."""
    rng = np.random.default_rng(5)
    y = rng.normal([0.7, -1.2], 1.0, size=(20, 2))
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0, shape=2)
        pm.Normal("y", mu, 1.0, observed=y)
    kw = dict(model=model, chains=4, cores=1, random_seed=3, progressbar=False)
    default, hmc = pmc.sample_smc(**kw), pmc.sample_smc(kernel="hmc", **kw)
    attrs = default["sample_stats"].attrs
    assert attrs["kernel"] == "hmc_final_imh" and attrs["kernel_requested"] == "auto"
    # the chains' own estimate (before pooling with the refit check, whose importance draws
    # are fitted to the final draws, which the final moves change)
    chains = [pmc.log_marginal_likelihood(r, return_details=True)[2] for r in (default, hmc)]
    assert [(d["log_z_chains_pooled"], d["mcse_chains_pooled"]) for d in chains[:1]] == [
        (d["log_z_chains_pooled"], d["mcse_chains_pooled"]) for d in chains[1:]
    ]
    evals = [int(np.asarray(r["sample_stats"]["n_logp_evals"]).sum()) for r in (default, hmc)]
    assert evals[0] < evals[1], evals
    draws = np.asarray(default["posterior"]["mu"]).reshape(-1, 2)
    post_sd = np.sqrt(1.0 / 21.0)
    post_mean = y.sum(axis=0) / 21.0
    np.testing.assert_array_less(np.abs(draws.mean(axis=0) - post_mean), 0.15 * post_sd)
    np.testing.assert_array_less(np.abs(draws.std(axis=0) / post_sd - 1.0), 0.1)
