"""The shared sampler machinery: options, chain results, tuning, warning classes."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

from pymc_crais.chain_result import STAGE_KEYS, ChainResult, per_chain_arrays
from pymc_crais.core.density import FunctionDensity
from pymc_crais.core.kernels import make_kernel
from pymc_crais.core.paths import make_path
from pymc_crais.results import build_datatree
from pymc_crais.samplers.engine.options import RunOptions, check_int, check_rate
from pymc_crais.samplers.engine.tuning import (
    RateProbe,
    constant_rate_run,
    pilot_run,
    rate_for_steps,
)
from pymc_crais.warnings import MaxStepsWarning, RTSInitialLoopWarning

# a 2-d Gaussian target N(m, s²I) times exp(LOG_Z), annealed from q0 = N(0, I)
D, LOG_Z, M, S = 2, 1.5, np.array([2.0, -1.0]), 0.3


def _density():
    def log_q0(x):
        return -0.5 * np.sum(x * x, axis=1) - 0.5 * D * np.log(2 * np.pi)

    def log_target(x):
        z = (x - M) / S
        return LOG_Z - 0.5 * np.sum(z * z, axis=1) - D * np.log(S) - 0.5 * D * np.log(2 * np.pi)

    return FunctionDensity(
        D,
        log_q0,
        log_target,
        lambda x: -x,
        lambda x: -(x - M) / S**2,
        lambda rng, n: rng.standard_normal((n, D)),
    )


# ----------------------------------------------------------------------------- options
@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), True, "fast", None])
def test_check_rate_rejects_what_is_not_a_positive_number(bad):
    with pytest.raises(ValueError, match="delta must be a positive number or 'auto'"):
        check_rate(bad)


def test_check_rate_and_check_int_accept_and_convert():
    assert check_rate("auto") == "auto"
    assert check_rate(np.float32(0.5)) == 0.5 and isinstance(check_rate(2), float)
    assert check_int(np.int64(3), "n", 1, "fix") == 3
    with pytest.raises(ValueError, match=r"n must be an integer >= 1, got 0; use n=1"):
        check_int(0, "n", 1, "use n=1")
    with pytest.raises(ValueError, match="n must be an integer"):
        check_int(True, "n", 0, "fix")


def test_run_options_from_a_samplers_settings():
    @dataclasses.dataclass(frozen=True)
    class Settings:
        draws: int = 10
        kernel: str = "rwmh"
        schedule: str = "linear"
        n_mcmc_steps: int = 2

    opts = RunOptions.from_settings(Settings(), init="laplace")
    assert (opts.draws, opts.kernel, opts.n_mcmc_steps, opts.init) == (10, "rwmh", 2, "laplace")
    assert opts.chains is None  # only the settings' fields that RunOptions has are read
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.draws = 5


# ----------------------------------------------------------------------------- chain results
def _chain(i, n_stages=3, **kw):
    stages = {k: np.arange(n_stages, dtype=float) for k in STAGE_KEYS}
    stages["resampled"] = np.zeros(n_stages, dtype=bool)
    return ChainResult(
        chain=i,
        x=np.zeros((4, 1)),
        log_marginal_likelihood=-1.0 - i,
        log_z_variance=0.01,
        n_logp_evals=100,
        log_weights=np.zeros(4),
        hit_max_steps=False,
        stages=stages,
        **kw,
    )


def test_chain_result_is_frozen_and_complete():
    with pytest.raises(ValueError, match="lacks"):
        ChainResult(0, np.zeros((1, 1)), 0.0, 0.0, 1, np.zeros(1), False, {"tau": np.ones(1)})
    c = _chain(0, stats={"n_eves": 4})
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.log_marginal_likelihood = 0.0
    d = c.as_dict()
    assert d["n_eves"] == 4 and d["log_z_variance"] == 0.01 and "x" not in d and "chain" not in d
    assert c.n_stages == 3


def test_build_datatree_turns_stats_and_arrays_into_variables():
    chains = [
        _chain(
            i,
            n_stages=2 + i,
            stats={"n_eves": 4 - i, "converged": bool(i)},
            arrays={"levels": (("level",), np.arange(3.0) + i)},
        )
        for i in range(2)
    ]
    assert per_chain_arrays(chains)["levels"][0] == ("chain", "level")
    tree = build_datatree(
        posterior={"mu": np.zeros((2, 4))},
        chains=chains,
        attrs={"method": "test"},
        extra_vars={"tune_tau": (("tune_stage",), np.linspace(0.5, 1, 2))},
    )
    st = tree["sample_stats"]
    assert st["n_eves"].dims == ("chain",) and st["n_eves"].dtype == np.int64
    assert st["converged"].dtype == bool and st["converged"].values.tolist() == [False, True]
    assert st["levels"].dims == ("chain", "level") and st["levels"].values[1, 0] == 1.0
    assert st["tau"].shape == (2, 3) and np.isnan(st["tau"].values[0, 2])
    assert st["n_stages"].values.tolist() == [2, 3] and st["tune_tau"].dims == ("tune_stage",)


# ----------------------------------------------------------------------------- tuning
def test_rate_for_steps():
    assert rate_for_steps(10.0, 20) == 0.5
    assert rate_for_steps(0.0, 5) == 1e-12
    assert rate_for_steps(float("nan"), 5) == 1.0


def test_rate_probe_measures_the_kl_from_the_pilot():
    """For the geometric path the length is ``KL(q0 ‖ π) = log Z − E_q0[Δ]``: here exact."""
    dens = _density()
    rng = np.random.default_rng(0)
    probe = RateProbe(0.0)
    res = pilot_run(rng, dens, rng.standard_normal((2000, D)), make_kernel("hmc"), probe=probe)
    # E_q0[Δ] = E_q0[log π̃ − log q0] in closed form for these Gaussians
    mean_delta = LOG_Z - D * np.log(S) - 0.5 * (D + np.sum(M * M)) / S**2 + 0.5 * D
    kl = LOG_Z - mean_delta
    total = probe.total_rate(res.log_marginal_likelihood, 0.0)
    assert abs(total - kl) < 0.05 * kl, (total, kl)
    assert abs(res.log_marginal_likelihood - LOG_Z) < 0.2


def _tuning(delta, **kw):
    dens = _density()
    rng = np.random.default_rng(1)
    return constant_rate_run(
        rng,
        dens,
        dens.sample_q0,
        lambda: make_kernel("hmc"),
        make_path(0.0),
        delta,
        draws=200,
        **kw,
    )


def test_constant_rate_run_rescales_delta_towards_the_target_length():
    tuning = _tuning(0.05, max_steps=4 * 20, n_target=20)  # a rate 40 times too small
    m = tuning.result.n_stages
    assert tuning.n_attempts > 1 and tuning.delta > 0.5
    assert 10 <= m <= 40 and not tuning.result.hit_max_steps
    assert (
        tuning.schedule[0] == 0.0 and tuning.schedule[-1] == 1.0 and tuning.schedule.size == m + 1
    )
    assert tuning.n_logp_evals > 200 * m


def test_constant_rate_run_stops_when_enough():
    asked = []

    def enough(res):
        asked.append(res.n_stages)
        return True

    # a rate too small: the first attempt (about 50 steps) is off its window of 5–20 steps
    # and is retried (twice, here) unless enough accepts it
    assert _tuning(0.8, max_steps=80, n_target=10).n_attempts > 1
    tuning = _tuning(0.8, max_steps=80, n_target=10, enough=enough)
    assert tuning.n_attempts == 1 and tuning.delta == 0.8
    assert asked == [tuning.result.n_stages]
    assert tuning.result.n_stages > 20 and not tuning.result.hit_max_steps
    # never asked about a capped attempt, nor about one on its window
    asked.clear()
    tuning = _tuning(0.05, max_steps=30, n_target=20, enough=lambda r: asked.append(r) or False)
    assert asked == [] and tuning.n_attempts > 1
    # the first attempt was capped (δ × 4 after it), the last one was not
    assert tuning.delta >= 0.05 * 4 and not tuning.result.hit_max_steps


def test_max_steps_warning_is_a_class_and_retries_are_silent():
    with pytest.warns(MaxStepsWarning, match="max_steps=3"):
        _tuning(1e-4, max_steps=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MaxStepsWarning)
        _tuning(1e-4, max_steps=3, warn_at_cap=False)
    assert issubclass(MaxStepsWarning, RuntimeWarning)
    assert issubclass(RTSInitialLoopWarning, RuntimeWarning)


def test_smc_settings_defaults_by_schedule_and_checks():
    from pymc_crais.core.kernels.moves import MAX_CORRELATION
    from pymc_crais.samplers.engine.smc_settings import WASTE_FREE_LENGTH, SMCSettings

    ess = SMCSettings.from_kwargs({})
    assert (ess.resample, ess.resample_threshold, ess.waste_free) == ("always", 0.5, 0)
    assert ess.max_correlation == MAX_CORRELATION and not ess.constant_rate
    cr = SMCSettings.from_kwargs({"schedule": "constant_rate", "waste_free": True})
    assert (cr.resample, cr.resample_threshold, cr.waste_free) == ("ess", 0.9, WASTE_FREE_LENGTH)
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['bogus'\]"):
        SMCSettings.from_kwargs({"bogus": 1})
    with pytest.raises(TypeError, match="target_mcse applies to the adaptive schedules"):
        SMCSettings.from_kwargs({"target_mcse": 0.01, "schedule": "linear"})
    assert SMCSettings.from_kwargs({"target_mcse": 0.01}).target_mcse == 0.01  # the ESS rule
    for bad, match in (({"resample": "never"}, "resample must be"), ({"resample_threshold": 0}, "resample_threshold"),
                       ({"waste_free": 1}, "waste_free"), ({"max_steps": 0}, "max_steps")):  # fmt: skip
        with pytest.raises(ValueError, match=match):
            SMCSettings.from_kwargs(bad)


def test_schedule_argument_parsed_in_one_place():
    """schedule= (and ladder=) is read by parse_schedule only: names in any case, arrays,
    Schedule objects; unknown names and misplaced kwargs name the argument."""
    from pymc_crais.core.schedules.adaptive import ESSSchedule
    from pymc_crais.samplers.engine.schedule_option import (
        AIS_SCHEDULES,
        LADDERS,
        SMC_SCHEDULES,
        parse_schedule,
    )
    from pymc_crais.samplers.engine.smc_settings import SMCSettings

    arg = parse_schedule("Linear")
    assert (arg.kind, arg.name) == ("fixed", "linear")
    assert arg.build(10).n_steps == 10 and arg.ladder(5)[0].size == 5
    ess = parse_schedule("ESS", SMC_SCHEDULES).build(None, None, 0.5)
    assert isinstance(ess, ESSSchedule) and ess.rho == 0.5
    # sample_smc's settings hold the parsed argument ("ESS" once got ρ = 0.9, not threshold)
    assert SMCSettings.from_kwargs({"schedule": "ESS"}).schedule.adaptive
    assert parse_schedule(ess).build(3) is ess
    taus = parse_schedule([0.0, 0.5, 1.0])
    assert taus.kind == "array" and taus.build(None).n_steps == 2
    assert parse_schedule("constant_rate", LADDERS, "ladder").ladder(8) == (None, "constant_rate")
    assert parse_schedule("thermodynamic", AIS_SCHEDULES).kind == "thermodynamic"
    with pytest.raises(ValueError, match="schedule='thermodynamic' is unknown"):
        parse_schedule("thermodynamic", SMC_SCHEDULES)
    with pytest.raises(ValueError, match="ladder='bogus' is unknown"):
        parse_schedule("bogus", LADDERS, "ladder")
    with pytest.raises(ValueError, match="not understood"):
        parse_schedule(3.0)
    with pytest.raises(TypeError, match="schedule_kwargs only apply"):
        parse_schedule("ess").build(None, {"scale": 2.0})
    with pytest.raises(TypeError, match="ladder_kwargs only apply"):
        parse_schedule([0.0, 1.0], LADDERS, "ladder").ladder(4, {"scale": 2.0})
