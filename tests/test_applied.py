"""The applied tier of the validation suite (pymc_crais.validation.applied_models): each
model's two reference computations agree, the stored references are what they recompute
to, and each model is the one its reference integrates."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_crais.validation import cases, get_case, load_references
from pymc_crais.validation.applied_models import (
    APPLIED_SPECS,
    GaussianSpec,
    model_integrand,
    reference,
)

APPLIED = [c.name for c in cases(tier="applied")]
GAUSSIAN = [n for n in APPLIED if isinstance(APPLIED_SPECS[n], GaussianSpec)]
_SLOW = pytest.mark.slow


def test_applied_registry():
    assert len(APPLIED) >= 9
    assert set(APPLIED) <= set(APPLIED_SPECS)
    assert not set(APPLIED) & {c.name for c in cases()}  # the core suite is unchanged
    assert max(get_case(n).d for n in APPLIED) >= 300


@pytest.mark.parametrize("name", APPLIED)
def test_applied_reference_stored_and_two_ways_agree(name):
    ref = load_references()[name]
    assert ref["agree"], ref
    w1, w2 = ref["way1"], ref["way2"]
    assert ref["difference"] == pytest.approx(w1["log_z"] - w2["log_z"], abs=1e-12)
    se = np.hypot(w1.get("mcse", 0.0), w2["mcse"])  # way 1 is a quadrature or an IS
    assert abs(ref["difference"]) < 4 * se + 1e-3
    assert w2["khat"] < 0.7
    inst = get_case(name).build()
    assert inst.log_z == ref["log_z"] and np.isfinite(inst.log_z)
    point = inst.model.initial_point()
    assert sum(np.size(v) for v in point.values()) == get_case(name).d


@pytest.mark.parametrize("name", GAUSSIAN)
def test_structured_and_dense_marginals_agree(name):
    """Way 1's structured marginal (Sherman-Morrison, Kalman, eigendecomposition) and way
    2's dense Cholesky marginal at random hyperparameters."""
    from threadpoolctl import threadpool_limits

    spec = APPLIED_SPECS[name]
    U = np.random.default_rng(1).normal(0.0, 0.7, size=(4, len(spec.hyper)))
    with threadpool_limits(limits=1):  # small factorizations: threads only contend
        np.testing.assert_allclose(spec.fast(U), spec.dense(U), rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "name",
    ["applied_bugs_normal",
     *(pytest.param(n, marks=_SLOW) for n in GAUSSIAN if n != "applied_bugs_normal")],
)  # fmt: skip
def test_model_is_the_integrand(name):
    """The PyMC model, its Gaussian coordinates integrated out exactly, equals the
    reference's integrand over the hyperparameters (so the reference is this model's)."""
    spec = APPLIED_SPECS[name]
    U = np.random.default_rng(2).normal(0.0, 0.3, size=(1, len(spec.hyper)))
    np.testing.assert_allclose(model_integrand(spec.model(), spec.hyper, U), spec.fast(U),
                               rtol=0, atol=1e-6)  # fmt: skip


@pytest.mark.parametrize(
    "name",
    ["applied_bugs_normal",
     *(pytest.param(n, marks=_SLOW) for n in APPLIED if n != "applied_bugs_normal")],
)  # fmt: skip
def test_reference_recomputes(name):
    """Recomputing both ways (same seed) gives the stored values."""
    ref, new = load_references()[name], reference(name, seed=0)
    assert new["way1"]["log_z"] == pytest.approx(ref["way1"]["log_z"], abs=1e-8)
    assert new["way2"]["log_z"] == pytest.approx(ref["way2"]["log_z"], abs=1e-8)
    assert new["agree"]


def test_sample_smc_defaults_right_on_bugs_normal_model():
    """Issue 30, item 3: a normal sample with BUGS' τ ~ Gamma(0.001, 0.001) (half its prior
    draws of τ are 0 in float64). With the defaults, the start is the Laplace fit (the mode
    search no longer counts the stalled runs from such draws as modes) and log Z is right
    (measured: −62.4299 ± 0.0052 against −62.4308)."""
    import warnings

    import pymc_crais as pmc
    from pymc_crais.warnings import UnreliableEvidenceWarning

    inst = get_case("applied_bugs_normal").build()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnreliableEvidenceWarning)
        idata = pmc.sample_smc(model=inst.model, random_seed=1, cores=1, progressbar=False)
    lz, se = pmc.log_marginal_likelihood(idata)
    assert idata["sample_stats"].attrs["init_n_modes"] == 1
    assert abs(lz - inst.log_z) < 3 * se + 0.01, (lz, se, inst.log_z)


def test_bugs_oneway_neck_mode_is_not_a_second_mode():
    """Issue 30, item 3: the centred one-way model with Gamma(0.001, 0.001) precisions has a
    second mode of its joint density, the funnel's neck (every group effect at the mean,
    τ_a ≈ 5000), whose Laplace mass is 12 nats below the mode holding the posterior and whose
    share the mixture start's pilot measures at 6e-5. At seed 16 the mode search finds both;
    the run starts at the main mode alone (before: a mixture start, right but flagged for
    modes and mixing, 7 s; now about 2 s, unflagged)."""
    import warnings

    import pymc_crais as pmc
    from pymc_crais.warnings import UnreliableEvidenceWarning

    inst = get_case("applied_bugs_oneway").build()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnreliableEvidenceWarning)
        idata = pmc.sample_smc(model=inst.model, random_seed=16, chains=4, cores=1,
                               progressbar=False)  # fmt: skip
    attrs = idata["sample_stats"].attrs
    assert attrs.get("init_n_modes_found") == 2, attrs.get("init_reason")  # both modes found
    assert attrs["init_n_modes"] == 1 and attrs["init_minor_modes"] == 1
    assert attrs["init_minor_modes_share"] < 0.01 and "negligible share" in attrs["init_reason"]
    lz, se = pmc.log_marginal_likelihood(idata)
    assert se <= 0.05
    assert abs(lz - inst.log_z) < 3 * se + 0.01, (lz, se, inst.log_z)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [17, 18])
def test_the_ar1_start_is_kept_with_one_copy_after_a_heavy_first_pilot(seed):
    """The AR(1)'s first pilot is heavy (k̂ 1.1–1.6). Seed 17: kept on the refit, with 2 copies
    its MCSE was 0.120 (flagged), one copy a θ draw gives ≤ 0.05. Seed 18: too few weighty
    draws to refit to, so the start was refused and annealing missed by −1.45 (flagged); the
    fit's proposal widened is the refit now."""
    import warnings

    import pymc_crais as pmc

    inst = get_case("applied_ar1").build()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pmc.sample_smc(model=inst.model, random_seed=seed, cores=1, chains=4,
                               progressbar=False)  # fmt: skip
    attrs = idata["sample_stats"].attrs
    assert attrs["init_choice"] == "conditional_laplace"
    assert attrs["init_conditional_pareto_k"] > 0.7 and attrs["init_conditional_copies"] == 1
    lz, se = pmc.log_marginal_likelihood(idata)
    assert se <= 0.05 and abs(lz - inst.log_z) < 3 * se, (lz, se, inst.log_z)
