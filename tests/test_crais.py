"""CR-AIS, adaptive AIS and initial distributions through the PyMC entry points."""

import inspect

import numpy as np
import pytest

import pymc_crais as pmc
from pymc_crais.core.schedules import interpolate_schedule
from pymc_crais.validation import testing as em

QUICK = dict(chains=4, cores=1, progressbar=False)


_check = em.assert_evidence


_ALPHAS = {
    -0.5: dict(delta=0.5, min_step=1e-3),  # α < 0: explicit δ and a stall guard
    0.0: {},
    0.5: {},
    1.0: {},
    2.0: {},
}
# The default suite runs each path kind once (α < 0, geometric α = 0, power mean α > 0, on
# an unbounded and a bounded parameter); the rest of the grid is slow.
_FAST_ALPHAS = {("normal_mean", -0.5), ("normal_mean", 0.0), ("beta_binomial", 1.0)}


@pytest.mark.parametrize(
    "builder,alpha,extra",
    [
        pytest.param(
            b, a, x, id=f"{b.__name__}-{a}",
            marks=() if (b.__name__, a) in _FAST_ALPHAS else pytest.mark.slow,
        )
        for b in (em.normal_mean, em.beta_binomial)
        for a, x in _ALPHAS.items()
    ],
)
def test_crais_exact_evidence_over_alpha(builder, alpha, extra):
    case = builder()
    # n_steps given: the path's own annealing is under test, not the choice of its length
    idata = pmc.sample_crais(
        draws=1000, alpha=alpha, n_steps=100, random_seed=11, model=case.model, **QUICK, **extra
    )
    _check(idata, case.log_z, 0.06)
    attrs = idata.sample_stats.attrs
    assert attrs["method"] == "crais" and attrs["alpha"] == alpha
    assert attrs["n_logp_evals_tune"] > 0 and int(idata.sample_stats.n_stages[0]) == 100


def test_crais_linear_regression_and_mixture():
    for case, max_mcse in ((em.linear_regression(), 0.15), (em.gaussian_mixture_potential(), 0.06)):
        idata = pmc.sample_crais(draws=1000, random_seed=5, model=case.model, **QUICK)
        _check(idata, case.log_z, max_mcse)


def test_auto_delta_targets_tuning_length():
    case = em.linear_regression()
    for target in (24, 96):
        res = pmc.sample_crais(
            draws=300, n_tune_steps=target, n_steps=50, random_seed=2, model=case.model,
            return_inferencedata=False, **{**QUICK, "chains": 1},
        )
        assert target / 2 <= res.attrs["n_tune_steps"] <= 2 * target


def test_narrow_target_gets_longer_tuned_schedule():
    """From the prior (init="auto" would start near each posterior and erase the gap)."""
    wide = em.normal_mean(n=5, sigma=2.0)
    narrow = em.normal_mean(n=200, sigma=0.5)
    lengths = []
    for case in (wide, narrow):
        res = pmc.sample_crais(
            draws=200, delta=20.0, n_steps=None, random_seed=3, model=case.model, init="prior",
            return_inferencedata=False, **{**QUICK, "chains": 1},
        )
        lengths.append(res.attrs["n_tune_steps"])
    assert lengths[1] > 2 * lengths[0]


def test_final_run_is_fresh_and_uses_the_interpolated_schedule():
    case = em.normal_mean()
    idata = pmc.sample_crais(draws=500, n_steps=77, random_seed=4, model=case.model, **QUICK)
    st = idata.sample_stats
    tuned = np.concatenate([[0.0], st["tune_tau"].values])
    expected = interpolate_schedule(tuned, 77)
    for chain in range(4):
        np.testing.assert_array_equal(st["tau"].values[chain], expected[1:])
    # the reported estimates come from fresh particles, not the tuning particles
    lml = st["log_marginal_likelihood"].values
    assert st.attrs["tune_log_marginal_likelihood"] not in set(lml)
    assert len(set(lml)) == 4
    assert st.attrs["n_steps"] == 77 and st.attrs["interpolated"] == 1
    # the final run replays the tuning run's kernels (their n_leapfrog included): the same
    # cost in every chain, 1 to 10 leapfrog steps per stage
    evals = st["n_logp_evals"].values
    assert (evals == evals[0]).all() and 500 * (1 + 77) <= evals[0] <= 500 * (1 + 77 * 10)


def test_schedule_can_be_reused_from_a_result():
    case = em.normal_mean()
    first = pmc.sample_crais(draws=300, n_steps=40, random_seed=6, model=case.model, **QUICK)
    again = pmc.sample_ais(draws=300, schedule=first, random_seed=7, model=case.model, **QUICK)
    np.testing.assert_array_equal(pmc.schedule_from_result(again), pmc.schedule_from_result(first))
    _check(again, case.log_z, 0.1)
    assert "n_logp_evals_tune" not in again.sample_stats.attrs


def test_sample_ais_constant_rate_delegates():
    case = em.normal_mean()
    idata = pmc.sample_ais(draws=300, schedule="constant_rate", n_steps=60, random_seed=8, model=case.model, **QUICK)
    assert idata.sample_stats.attrs["method"] == "crais"
    assert int(idata.sample_stats.n_stages[0]) == 60


def test_sample_ais_constant_rate_with_ais_defaults_is_sample_crais():
    """Arguments left at sample_ais's defaults (n_steps=200, max_steps, max/min_step) take
    sample_crais's: the same call, the same bits."""
    case = em.normal_mean()
    kw = dict(draws=200, random_seed=8, model=case.model, return_inferencedata=False,
              **{**QUICK, "chains": 2})
    via_ais = pmc.sample_ais(schedule="constant_rate", **kw)
    direct = pmc.sample_crais(**kw)
    assert via_ais.attrs["n_steps_mode"] == direct.attrs["n_steps_mode"] == "auto"
    assert [c["log_marginal_likelihood"] for c in via_ais.chain_stats] == [
        c["log_marginal_likelihood"] for c in direct.chain_stats
    ]


@pytest.mark.parametrize("rule", ["ess", "cess"])
def test_adaptive_ais(rule):
    case = em.normal_mean()
    idata = pmc.sample_ais(draws=1000, schedule=rule, rho=0.97, random_seed=9, model=case.model, init="prior", **QUICK)
    st = idata.sample_stats
    assert st.attrs["schedule"] == rule and st.attrs["rho"] == 0.97
    assert (st["n_stages"].values > 5).all()
    _check(idata, case.log_z, 0.06)
    if rule == "ess":  # each step keeps ESS(W·incr) = ρ ESS(W) until the final jump to 1
        ess = st["ess"].values[0, : int(st["n_stages"].values[0]) - 1]
        ratios = ess[1:] / ess[:-1]
        np.testing.assert_allclose(ratios, 0.97, atol=1e-4)


def test_laplace_initial_distribution():
    case = em.linear_regression()
    idata = pmc.sample_crais(draws=1000, init="laplace", random_seed=10, model=case.model, **QUICK)
    _check(idata, case.log_z, 0.02)
    attrs = idata.sample_stats.attrs
    assert attrs["init"] == "laplace" and attrs["laplace_converged"] == 1
    # the Laplace approximation of log Z is exact for a Gaussian posterior
    assert abs(attrs["laplace_log_evidence"] - case.log_z) < 1e-4


def test_user_gaussian_initial_distribution_exact_posterior():
    """q0 = the exact posterior (a Gaussian here): every weight equals Z, zero variance."""
    case = em.linear_regression()
    rng = np.random.default_rng(1)
    X = case.model["X"].get_value()
    y = case.model.rvs_to_values[case.model["y"]].data
    prec = X.T @ X / 0.5**2 + np.eye(5)
    cov = np.linalg.inv(prec)
    mean = cov @ X.T @ y / 0.5**2
    idata = pmc.sample_ais(
        draws=200, n_steps=5, init={"mean": mean, "cov": cov}, random_seed=rng, model=case.model, **QUICK
    )
    value, mcse = pmc.log_marginal_likelihood(idata)
    assert abs(value - case.log_z) < 1e-6 and mcse < 1e-6


def test_student_t_initial_distribution():
    case = em.normal_mean()
    q0 = pmc.StudentTInitial(np.array([0.5]), np.array([[1.0]]), df=3.0)
    idata = pmc.sample_ais(draws=1000, n_steps=30, init=q0, random_seed=12, model=case.model, **QUICK)
    _check(idata, case.log_z, 0.05)
    assert idata.sample_stats.attrs["init"] == "student_t"


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        (dict(delta=0.0), ValueError, "delta"),
        (dict(delta=-1.0), ValueError, "delta"),
        (dict(delta="big"), ValueError, "delta"),
        (dict(min_step=0.3, max_step=0.2), ValueError, "min_step"),
        (dict(max_steps=0), ValueError, "max_steps"),
        (dict(alpha=np.nan), ValueError, "alpha"),
        (dict(variance="robust"), ValueError, "variance"),
        (dict(n_steps=0), ValueError, "n_steps"),
        (dict(init="vi"), ValueError, "init"),
        (dict(init={"mean": [0.0, 1.0], "cov": np.eye(2)}), ValueError, "dimension"),
        (dict(init="laplace", init_kwargs={"family": "cauchy"}), ValueError, "family"),
        (dict(scale_shift="auto", alpha=1.0), ValueError, "scale_shift"),
        (dict(final_mcmc_steps=0), ValueError, "final_mcmc_steps"),
    ],
)
def test_crais_bad_arguments(kwargs, exc, match):
    case = em.normal_mean()
    with pytest.raises(exc, match=match):
        pmc.sample_crais(draws=50, model=case.model, **QUICK, **kwargs)


@pytest.mark.parametrize("rho", [0.0, 1.0, 1.5])
def test_adaptive_rho_out_of_range(rho):
    with pytest.raises(ValueError, match="rho"):
        pmc.sample_ais(draws=50, schedule="cess", rho=rho, model=em.normal_mean().model, **QUICK)


def test_max_steps_hit_warns_and_records():
    case = em.normal_mean()
    with pytest.warns(RuntimeWarning, match="max_steps=3"):
        idata = pmc.sample_ais(draws=100, schedule="cess", rho=0.999, max_steps=3, random_seed=0, model=case.model, **{**QUICK, "chains": 1})
    assert bool(idata.sample_stats["hit_max_steps"].values[0])
    assert idata.sample_stats["tau"].values[0, -1] == 1.0


def test_discrete_model_refuses_laplace():
    import pymc as pm

    with pm.Model() as model:
        pm.Poisson("k", 3.0)
        pm.Normal("y", 0.0, 1.0, observed=[0.0])
    with pytest.raises(ValueError, match="init='prior'"):
        pmc.sample_ais(draws=50, kernel="rwmh", init="laplace", model=model, **QUICK)


def test_auto_delta_uses_kl_of_prior_to_posterior():
    """α = 0: the rule lowers KL(γ_τ‖π) by δ per step, so auto-δ = KL(q0‖π) / n_tune_steps."""
    case = em.normal_mean()
    res = pmc.sample_crais(
        draws=1000, n_tune_steps=40, n_steps=40, random_seed=13, model=case.model, init="prior",
        return_inferencedata=False, **{**QUICK, "chains": 1},
    )
    y = case.model.rvs_to_values[case.model["y"]].data
    prec = y.size / 1.0 + 1 / 2.0**2
    m, v = (y.sum() / 1.0) / prec, 1 / prec
    kl_exact = 0.5 * (4.0 / v + m**2 / v - 1.0 + np.log(v / 4.0))  # KL(N(0,4) ‖ N(m,v))
    kl_used = res.attrs["delta"] * 40 if res.attrs["n_tune_attempts"] == 1 else np.nan
    assert abs(kl_used / kl_exact - 1) < 0.15, (kl_used, kl_exact)


def test_final_run_replays_tuning_kernels_by_default():
    case = em.normal_mean()
    on = pmc.sample_crais(draws=300, n_steps=30, random_seed=14, model=case.model, return_inferencedata=False, **{**QUICK, "chains": 1})
    off = pmc.sample_crais(draws=300, n_steps=30, random_seed=14, model=case.model, replay_kernel=False, return_inferencedata=False, **{**QUICK, "chains": 1})
    assert on.attrs["replay_kernel"] and not off.attrs["replay_kernel"]
    # same tuning run, same final particles at the start: only the kernels differ
    assert on.attrs["tune_log_marginal_likelihood"] == off.attrs["tune_log_marginal_likelihood"]
    assert on.chain_stats[0]["log_marginal_likelihood"] != off.chain_stats[0]["log_marginal_likelihood"]


def test_power_mean_tuning_sees_a_narrow_posterior():
    """α = ½ with a posterior much narrower than the prior (issue 15): the rule's statistics
    come from the pilot's pooled stages, so the tuning run follows the rule rather than
    hitting the 1/8 cap at every step (8 steps, as it did from its own particles)."""
    case = em.normal_mean(n=200, sigma=0.5)
    res = pmc.sample_crais(
        draws=200, alpha=0.5, n_tune_steps=40, n_steps=50, random_seed=3, model=case.model,
        return_inferencedata=False, **{**QUICK, "chains": 1},
    )
    assert res.attrs["rate_statistics"] == "pilot_reference"
    steps = np.diff(np.concatenate([[0.0], res.extra_vars["tune_tau"][1]]))
    assert 20 <= res.attrs["n_tune_steps"] <= 80 and not res.attrs["tune_hit_max_steps"]
    assert np.mean(steps >= 0.125 * (1 - 1e-9)) < 0.5


@pytest.mark.parametrize(
    "acceptance,n,expected",
    [
        ([0.9, 0.7, 0.6], 1, 1),  # accepts over half: unchanged
        ([0.5, 0.5], 2, 2),
        ([0.6, 0.3, 0.1], 1, 2),  # mean 1/3: ceil(0.5 / 0.333) = 2
        ([0.2, 0.2, np.nan], 1, 3),  # NaN stages ignored
        ([0.01, 0.0], 1, 4),  # capped at 4x
        ([0.0, 0.0], 2, 8),
        ([], 3, 3),
    ],
)
def test_final_transitions_rule(acceptance, n, expected):
    from pymc_crais.samplers.engine.crais_plan import final_transitions

    assert final_transitions(acceptance, n) == expected


def test_final_mcmc_steps_recorded_and_used_on_a_discrete_model():
    """The final run makes final_mcmc_steps transitions per level (recorded) and stays exact;
    IMH accepts over half of its proposals on this model, so "auto" keeps one."""
    case = em.poisson_normal()
    kw = dict(draws=300, n_steps=40, random_seed=21, model=case.model, **QUICK)
    auto = pmc.sample_crais(return_inferencedata=False, **kw)
    assert auto.attrs["final_mcmc_steps"] == 1
    three = pmc.sample_crais(final_mcmc_steps=3, **kw)
    assert three["sample_stats"].attrs["final_mcmc_steps"] == 3
    steps = np.asarray(three["sample_stats"]["mcmc_steps"].values)[:, 1:]
    assert np.all(steps == 3), steps
    _check(three, case.log_z, 0.2)


def test_capped_auto_tuning_falls_back_to_a_linear_schedule():
    """A constant-rate tuning run (``delta="auto"``) still at its cap after the rescaling has
    no usable schedule (on ``hier_noncentered`` it crawled below τ = 1e-5 for 199 steps and
    the final run was 0.4–0.8 nat off); the final run then anneals on ``sample_ais``'s
    linear schedule with its own kernel tuning, and says so."""
    from pymc_crais.warnings import MaxStepsWarning

    case = em.normal_mean()
    with pytest.warns(MaxStepsWarning, match="linear schedule of 40 steps") as rec:
        idata = pmc.sample_crais(draws=500, n_steps=40, max_steps=2, random_seed=3, model=case.model, **QUICK)
    # the warning points at the user's call, not into the package
    assert {w.filename for w in rec if w.category is MaxStepsWarning} == {__file__}
    a = idata.sample_stats.attrs
    assert a["schedule"] == "linear" and "cap of 2 steps" in a["schedule_fallback"]
    assert not a["interpolated"]  # the tuned schedule was not used, so not interpolated
    # through sample_ais(schedule="constant_rate") too (one frame deeper)
    with pytest.warns(MaxStepsWarning, match="linear schedule of 40 steps") as rec:
        pmc.sample_ais(schedule="constant_rate", draws=200, n_steps=40, max_steps=2, random_seed=3,
                       model=case.model, **QUICK)  # fmt: skip
    assert {w.filename for w in rec if w.category is MaxStepsWarning} == {__file__}
    assert not a["replay_kernel"] and idata.sample_stats["tune_tau"].size == 2
    np.testing.assert_allclose(idata.sample_stats["tau"].values[0], np.linspace(0.0, 1.0, 41)[1:])
    _check(idata, case.log_z, max_mcse=0.05)
    # an uncapped tuning run keeps its schedule, and the attribute says nothing
    ok = pmc.sample_crais(draws=200, n_steps=20, random_seed=3, model=case.model, **QUICK)
    assert ok.sample_stats.attrs["schedule"] == "constant_rate"
    assert ok.sample_stats.attrs["schedule_fallback"] == ""


def test_auto_length_one_step_when_the_start_meets_the_target():
    """n_steps="auto": a Laplace start whose weights already meet target_mcse is the final
    run (importance sampling, one step), with no pilot and no tuning run."""
    case = em.linear_regression()
    idata = pmc.sample_crais(random_seed=1, model=case.model, **QUICK)
    a = idata.sample_stats.attrs
    assert a["schedule"] == "one_step" and a["n_steps"] == 1 and a["n_logp_evals_tune"] == 0
    assert int(idata.sample_stats.n_stages[0]) == 1 and a["start_pareto_k"] <= 0.5
    log_z, mcse = pmc.log_marginal_likelihood(idata)
    assert a["predicted_mcse"] <= a["target_mcse"] == 0.02
    assert mcse <= 1.5 * a["predicted_mcse"]
    _check(idata, case.log_z, 0.02)
    # as many particles as sample_smc's default: there its one stage is this run (issue 31)
    smc_draws = inspect.signature(pmc.sample_smc).parameters["draws"].default
    assert idata.posterior.sizes["draw"] == smc_draws == 2000
    # and SMC's moves at τ = 1: independence proposals (all after the weights)
    assert a["kernel"] == "hmc_final_imh" and "one step" in a["kernel_reason"]


@pytest.mark.slow
def test_auto_length_one_step_is_sample_smc_one_stage():
    """With both samplers' defaults and one seed, a start that meets the target gives
    CR-AIS's one-step run and SMC's one stage: the same importance sampling, so the same
    log Z and MCSE to rounding (the runs differ only in the moves at τ = 1, after log Z)."""
    case = em.linear_regression()
    crais = pmc.sample_crais(random_seed=3, model=case.model, **QUICK)
    smc = pmc.sample_smc(random_seed=3, model=case.model, **QUICK)
    assert crais.sample_stats.attrs["schedule"] == "one_step"
    # sample_smc's chains' own estimate (its reported one also pools its refit check's)
    smc_chains = pmc.log_marginal_likelihood(smc, return_details=True)[2]
    np.testing.assert_allclose(
        pmc.log_marginal_likelihood(crais),
        (smc_chains["log_z_chains_pooled"], smc_chains["mcse_chains_pooled"]),
        rtol=1e-9,
    )


def test_auto_length_from_the_tuning_run():
    """A target the start misses: the tuning run's relative variance and the start's are
    interpolated, and the fewest steps predicted to meet the target are run; the achieved
    error is near the prediction."""
    case = em.normal_mean()
    idata = pmc.sample_crais(draws=1000, random_seed=1, model=case.model, target_mcse=0.004, **QUICK)
    a = idata.sample_stats.attrs
    assert a["schedule"] == "constant_rate" and 1 < a["n_steps"] < 200
    assert np.isfinite(a["tune_relative_variance"]) and a["predicted_mcse"] <= 0.004
    log_z, mcse = pmc.log_marginal_likelihood(idata)
    assert 0.5 * a["predicted_mcse"] <= mcse <= 2 * a["predicted_mcse"]
    _check(idata, case.log_z, 0.01)
    # an unreachable target runs the longest schedule and says so
    idata = pmc.sample_crais(random_seed=1, model=case.model, target_mcse=1e-4, **QUICK)
    a = idata.sample_stats.attrs
    assert a["n_steps"] == 200 and "out of reach" in a["length_reason"]


def test_auto_length_stops_retrying_the_tuning_run_when_settled():
    """n_steps="auto": once the target is out of reach at 200 steps even with the error
    falling as 1/K beyond a tuning attempt's length, no shorter retry can change the
    choice, and none is made (here 2 attempts, against 4 on the previous code)."""
    case = em.normal_mean()
    kw = dict(draws=500, random_seed=1, model=case.model, init="prior", n_tune_steps=4)
    idata = pmc.sample_crais(target_mcse=0.01, **kw, **{**QUICK, "chains": 2})
    a = idata.sample_stats.attrs
    assert a["n_tune_attempts"] == 2 and a["n_tune_steps"] > 8
    assert a["n_steps"] == 200 and "out of reach" in a["length_reason"]
    _check(idata, case.log_z, max_mcse=0.05)


def test_auto_length_rejects_a_bad_target():
    case = em.normal_mean()
    for bad in (0, -1.0, "auto", float("nan")):
        with pytest.raises(ValueError, match="target_mcse"):
            pmc.sample_crais(model=case.model, target_mcse=bad, **QUICK)
