"""The annealing loop (docs/algorithms.md, "Annealed importance sampling" and "Tempered
SMC") on synthetic targets with known log Z."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import norm

from pymc_crais.core.anneal import WeightsVanishedError, anneal
from pymc_crais.core.density import FunctionDensity
from pymc_crais.core.kernels import make_kernel
from pymc_crais.core.paths import make_path
from pymc_crais.core.schedules import make_fixed_schedule
from pymc_crais.core.weights import log_z_relative_variance, logsumexp

D = 4
LOGZ = 2.5
MU = np.array([0.5, -0.3, 0.8, 0.0])
SD = 0.6
N = 1000


def _log_q0(x):
    return -0.5 * np.sum(x * x, axis=1) - 0.5 * D * np.log(2 * np.pi)


def _grad_q0(x):
    return -x


def _make_density(mu=MU, sd=SD, log_z=LOGZ, cut=None):
    """``exp(log_z) · N(mu, sd² I)``, optionally set to zero (−inf) on ``x[:, 0] < cut``."""
    norm_const = D * (np.log(sd) + 0.5 * np.log(2 * np.pi))

    def log_t(x):
        v = log_z - 0.5 * np.sum(((x - mu) / sd) ** 2, axis=1) - norm_const
        if cut is not None:
            v = np.where(x[:, 0] < cut, -np.inf, v)
        return v

    def grad_t(x):
        return -(x - mu) / sd**2

    return FunctionDensity(D, _log_q0, log_t, _grad_q0, grad_t)


def _x0(seed, n=N):
    return np.random.default_rng(seed).standard_normal((n, D))


def _tol(res):
    return 4.0 * np.sqrt(res.log_z_variance) + 0.02


def _ais(seed, *, alpha=0.0, c=0.0, n_steps=100, kernel="hmc", density=None, n=N, **kw):
    density = _make_density() if density is None else density
    rng = np.random.default_rng(seed)
    return anneal(rng, density, _x0(seed + 1000, n), make_path(alpha, c),
                  make_fixed_schedule("linear", n_steps), make_kernel(kernel), **kw)


# --------------------------------------------------------------------------- accuracy


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ais_recovers_log_z(seed):
    res = _ais(seed)
    assert np.isfinite(res.log_z_variance) and res.log_z_variance > 0
    assert abs(res.log_marginal_likelihood - LOGZ) <= _tol(res), (res.log_marginal_likelihood,
                                                                   res.log_z_variance)
    # final particles are (weighted) draws from the target
    w = np.exp(res.log_weights - logsumexp(res.log_weights))
    mean = w @ res.state.x
    ess = 1.0 / np.sum(w**2)
    assert np.all(np.abs(mean - MU) < 5 * SD / np.sqrt(ess))


def test_ais_log_z_is_logmeanexp_of_weights():
    for seed in (3, 4):
        res = _ais(seed)
        lw = res.log_weights
        assert lw.shape == (N,)
        np.testing.assert_allclose(res.log_marginal_likelihood,
                                   logsumexp(lw) - np.log(N), rtol=0, atol=1e-9)
        assert res.log_z_variance == pytest.approx(log_z_relative_variance(lw), rel=1e-12)
        assert res.c == 0.0 and not res.hit_max_steps


def test_ais_stage_records_and_cost():
    res = _ais(5, n_steps=50)
    st = res.stages
    assert res.n_stages == 50
    np.testing.assert_array_equal(st["tau"], np.linspace(0, 1, 51)[1:])
    assert not st["resampled"].any()
    assert np.all((st["acceptance_rate"] > 0) & (st["acceptance_rate"] <= 1))
    assert np.all((st["ess"] >= 1) & (st["ess"] <= N + 1e-9))
    np.testing.assert_allclose(np.sum(st["log_z_increment"]), res.log_marginal_likelihood,
                               atol=1e-9)
    # initial evaluation + the leapfrog steps of each stage's transition (default HMC: from
    # the step size, 1 to 10), N particles each
    assert (res.n_logp_evals - N) % N == 0 and 50 * N <= res.n_logp_evals - N <= 500 * N
    fixed = _ais(5, n_steps=50, kernel=make_kernel("hmc", n_leapfrog=3))
    assert fixed.n_logp_evals == N + 50 * 3 * N
    res2 = _ais(5, n_steps=50, kernel="rwmh", n_mcmc_steps=2)
    assert res2.n_logp_evals == N + 50 * 2 * N


# a tighter, farther target on which the ESS does fall below N/2 along a linear schedule
MU_HARD = np.array([1.5, -1.0, 2.0, 0.5])
SD_HARD = 0.3


@pytest.mark.parametrize("resample", ["never", "ess", "always"])
@pytest.mark.parametrize("seed", [10, 11, 12])
def test_smc_recovers_log_z(resample, seed):
    res = _ais(seed, resample=resample, density=_make_density(mu=MU_HARD, sd=SD_HARD))
    assert abs(res.log_marginal_likelihood - LOGZ) <= _tol(res), res.log_marginal_likelihood
    rs = res.stages["resampled"]
    if resample == "always":
        assert rs[:-1].all() and not rs[-1]  # never at τ = 1
    elif resample == "ess":
        assert rs.any()
        np.testing.assert_array_equal(rs[:-1], res.stages["ess"][:-1] < 0.5 * N)
    else:
        assert not rs.any()
        np.testing.assert_allclose(res.log_marginal_likelihood,
                                   logsumexp(res.log_weights) - np.log(N), atol=1e-9)
    if rs.any():
        assert np.isfinite(res.log_z_variance) and res.log_z_variance > 0


def test_smc_ess_resamples_only_below_threshold():
    res = _ais(13, resample="ess", threshold=0.9, n_steps=30)
    st = res.stages
    assert st["resampled"].any()
    np.testing.assert_array_equal(st["resampled"][:-1], st["ess"][:-1] < 0.9 * N)
    assert abs(res.log_marginal_likelihood - LOGZ) <= _tol(res)


def test_idle_moves_in_stages_that_kept_their_weights():
    """``idle_mcmc_steps``: a stage τ < 1 that did not resample makes that many transitions,
    one that resampled (and the stage at τ = 1) decorrelates by the "auto" rule; log Z stays
    right, and without the option every stage follows the rule."""
    kw = dict(resample="ess", threshold=0.9, n_steps=30, n_mcmc_steps="auto",
              density=_make_density(mu=MU_HARD, sd=SD_HARD))
    res = _ais(14, idle_mcmc_steps=1, **kw)
    st = res.stages
    rs, steps = st["resampled"].astype(bool), st["mcmc_steps"]
    assert rs.any() and not rs[:-1].all()
    np.testing.assert_array_equal(steps[:-1][~rs[:-1]], 1)
    assert steps[rs].min() > 1  # copies are decorrelated
    assert abs(res.log_marginal_likelihood - LOGZ) <= _tol(res)
    full = _ais(14, **kw)
    assert full.stages["mcmc_steps"][:-1][~full.stages["resampled"][:-1].astype(bool)].max() > 1
    assert res.n_logp_evals < full.n_logp_evals


@pytest.mark.parametrize("alpha,c", [(0.5, 2.0), (1.0, 2.5), (-0.5, 3.0)])
def test_power_mean_path_recovers_log_z(alpha, c):
    res = _ais(20, alpha=alpha, c=c)
    assert res.c == c
    assert abs(res.log_marginal_likelihood - LOGZ) <= _tol(res), res.log_marginal_likelihood
    np.testing.assert_allclose(res.log_marginal_likelihood,
                               logsumexp(res.log_weights) - np.log(N) + c, atol=1e-9)


def test_scale_shift_c_cancels_on_geometric_path_rwmh():
    # geometric path: c shifts every increment by −Δτ·c and is added back; the Metropolis
    # ratios see it only through round-off, so same seed → same run up to round-off
    a = _ais(30, c=0.0, kernel="rwmh")
    b = _ais(30, c=5.0, kernel="rwmh")
    assert b.c == 5.0
    np.testing.assert_allclose(b.log_marginal_likelihood, a.log_marginal_likelihood,
                               rtol=0, atol=1e-11)
    np.testing.assert_allclose(b.log_weights, a.log_weights - 5.0, rtol=0, atol=1e-11)
    np.testing.assert_allclose(b.state.x, a.state.x, rtol=0, atol=1e-11)


def test_scale_shift_c_cancels_on_geometric_path_hmc():
    # with HMC the stage-to-stage step-size adaptation feeds the 1e-16 differences of the
    # acceptance rate back into the trajectories, where they grow to ~1e-6 over 100
    # stages (measured); log Ẑ still agrees to ~1e-9
    for seed in (30, 31):
        a = _ais(seed, c=0.0)
        b = _ais(seed, c=5.0)
        np.testing.assert_allclose(b.log_marginal_likelihood, a.log_marginal_likelihood,
                                   rtol=0, atol=1e-7)
        np.testing.assert_allclose(b.log_weights, a.log_weights - 5.0, rtol=0, atol=1e-5)
        np.testing.assert_allclose(b.state.x, a.state.x, rtol=0, atol=1e-4)
        np.testing.assert_allclose(b.stages["log_z_increment"],
                                   a.stages["log_z_increment"] - 0.05, rtol=0, atol=1e-7)


def test_bigger_scale_shift_on_geometric_path():
    # |c| of the order of a real log-likelihood: still only round-off
    a = _ais(31, c=0.0, n_steps=20, kernel="rwmh")
    b = _ais(31, c=-400.0, n_steps=20, kernel="rwmh")
    # round-off of τ(Δ − c) with |c| = 400: ~400·eps per stage
    np.testing.assert_allclose(b.log_marginal_likelihood, a.log_marginal_likelihood,
                               rtol=0, atol=1e-10)
    np.testing.assert_allclose(b.state.x, a.state.x, rtol=0, atol=1e-10)


# --------------------------------------------------------------------------- -inf targets


def test_minus_inf_region_gets_zero_weight():
    # truncation x0 < -2 removes 2.3% of q0 and 20% of the target's mass
    mu = np.array([-1.5, 0.3, 0.0, 0.2])
    dens = _make_density(mu=mu, cut=-2.0)
    x0 = _x0(77)
    dead = x0[:, 0] < -2.0
    assert 5 < dead.sum() < 100
    rng = np.random.default_rng(40)
    with warnings.catch_warnings(), np.errstate(divide="raise", invalid="raise", over="raise"):
        warnings.simplefilter("error")
        res = anneal(rng, dens, x0, make_path(0.0), make_fixed_schedule("linear", 100),
                     make_kernel("hmc"))
    lw = res.log_weights
    assert not np.any(np.isnan(lw))
    np.testing.assert_array_equal(np.isneginf(lw), dead)  # exactly the dead particles
    assert np.all(np.isfinite(lw[~dead]))
    # the live particles never left the support
    assert np.all(res.state.x[~dead, 0] >= -2.0)
    for k, v in res.stages.items():
        if k != "resampled":
            assert np.all(np.isfinite(v)), k
    true = LOGZ + norm.logsf(-2.0, loc=mu[0], scale=SD)
    assert abs(res.log_marginal_likelihood - true) <= _tol(res), (res.log_marginal_likelihood,
                                                                  true)
    np.testing.assert_allclose(res.log_marginal_likelihood, logsumexp(lw) - np.log(N),
                               atol=1e-9)


def test_minus_inf_region_with_resampling():
    mu = np.array([-1.5, 0.3, 0.0, 0.2])
    dens = _make_density(mu=mu, cut=-2.0)
    with warnings.catch_warnings(), np.errstate(divide="raise", invalid="raise", over="raise"):
        warnings.simplefilter("error")
        res = anneal(np.random.default_rng(41), dens, _x0(78), make_path(0.0),
                     make_fixed_schedule("linear", 100), make_kernel("rwmh"), resample="always",
                     n_mcmc_steps=2)
    assert np.all(np.isfinite(res.log_weights))  # resampled away
    assert np.all(res.state.x[:, 0] >= -2.0)
    true = LOGZ + norm.logsf(-2.0, loc=mu[0], scale=SD)
    assert abs(res.log_marginal_likelihood - true) <= _tol(res)


@pytest.mark.parametrize("kernel", ["hmc", "rwmh"])
def test_target_minus_inf_everywhere_raises(kernel):
    dens = FunctionDensity(D, _log_q0, lambda x: np.full(x.shape[0], -np.inf), _grad_q0,
                           lambda x: np.zeros_like(x))
    with pytest.raises(WeightsVanishedError) as err:
        anneal(np.random.default_rng(0), dens, _x0(0, 200), make_path(0.0),
               make_fixed_schedule("linear", 100), make_kernel(kernel))
    e = err.value
    assert isinstance(e, FloatingPointError)
    assert e.stage == 0 and e.tau_from == 0.0 and e.tau_to == 0.01
    msg = str(e)
    assert "stage 0" in msg and "0.01" in msg


def test_weights_vanish_at_tau_one_on_arithmetic_path():
    # α = 1: γ_τ = ((1−τ) q0 + τ·0) keeps mass until τ = 1, where every weight vanishes
    dens = FunctionDensity(D, _log_q0, lambda x: np.full(x.shape[0], np.nan), _grad_q0,
                           lambda x: np.zeros_like(x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(WeightsVanishedError) as err:
            anneal(np.random.default_rng(0), dens, _x0(0, 200), make_path(1.0),
                   make_fixed_schedule("linear", 10), make_kernel("hmc"))
    e = err.value
    assert e.stage == 9 and e.tau_from == pytest.approx(0.9) and e.tau_to == 1.0
    assert "stage 9" in str(e)


# --------------------------------------------------------------------------- max_steps


def test_max_steps_jumps_to_one_and_warns():
    with pytest.warns(RuntimeWarning, match="max_steps=10"):
        res = _ais(50, max_steps=10)
    assert res.hit_max_steps
    assert res.n_stages == 10
    np.testing.assert_allclose(res.stages["tau"][:-1], np.arange(1, 10) / 100, rtol=1e-15)
    assert res.stages["tau"][-1] == 1.0
    assert np.isfinite(res.log_marginal_likelihood)


def test_max_steps_equal_to_schedule_length_is_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = _ais(51, n_steps=20, max_steps=20)
    assert not res.hit_max_steps and res.n_stages == 20


def test_max_steps_one():
    with pytest.warns(RuntimeWarning, match="max_steps"):
        res = _ais(52, n_steps=5, max_steps=1)
    assert res.hit_max_steps and res.n_stages == 1
    assert res.stages["tau"].tolist() == [1.0]
    # one importance-sampling step from q0: still log Ẑ = logmeanexp(Δ)
    np.testing.assert_allclose(res.log_marginal_likelihood,
                               logsumexp(res.log_weights) - np.log(N), atol=1e-12)


# --------------------------------------------------------------------------- randomness


def _same(a, b):
    assert a.log_marginal_likelihood == b.log_marginal_likelihood
    assert a.log_z_variance == b.log_z_variance
    np.testing.assert_array_equal(a.log_weights, b.log_weights)
    np.testing.assert_array_equal(a.state.x, b.state.x)
    for k in a.stages:
        np.testing.assert_array_equal(a.stages[k], b.stages[k])


@pytest.mark.parametrize("resample", ["never", "ess"])
def test_same_seed_bitwise_identical(resample):
    a = _ais(60, n_steps=30, resample=resample)
    b = _ais(60, n_steps=30, resample=resample)
    _same(a, b)


def test_different_seed_differs():
    a = _ais(61, n_steps=30)
    b = anneal(np.random.default_rng(62), _make_density(), _x0(61 + 1000), make_path(0.0),
               make_fixed_schedule("linear", 30), make_kernel("hmc"))
    assert a.log_marginal_likelihood != b.log_marginal_likelihood
    assert not np.array_equal(a.state.x, b.state.x)


def test_global_numpy_random_state_untouched():
    np.random.seed(12345)
    before = np.random.get_state()
    _ais(63, n_steps=10, resample="always")
    _ais(64, n_steps=10, kernel="rwmh", resample="ess", resampler="multinomial")
    after = np.random.get_state()
    assert before[0] == after[0]
    np.testing.assert_array_equal(before[1], after[1])
    assert before[2:] == after[2:]


# --------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    "kw",
    [{"resample": "sometimes"}, {"threshold": 0.0}, {"threshold": 1.5}, {"n_mcmc_steps": -1},
     {"n_mcmc_steps": 1.5}, {"max_steps": 0}, {"resampler": "bogus"}],
)
def test_bad_arguments(kw):
    with pytest.raises(ValueError):
        _ais(0, n_steps=5, n=50, **kw)


def test_callback_called_each_stage():
    calls = []
    res = _ais(70, n_steps=8, n=100, callback=lambda *a: calls.append(a))
    assert [c[0] for c in calls] == list(range(8))
    np.testing.assert_allclose([c[1] for c in calls], res.stages["tau"])
    np.testing.assert_allclose([c[2] for c in calls], res.stages["ess"])


def test_inputs_not_mutated_and_tune_from_weights():
    x0 = _x0(1080)  # not the kernel's seed: x0 would equal the first momenta drawn
    copy = x0.copy()
    dens = _make_density()
    res = anneal(np.random.default_rng(80), dens, x0, make_path(0.0),
                 make_fixed_schedule("linear", 50), make_kernel("hmc"), tune_from_weights=True)
    np.testing.assert_array_equal(x0, copy)
    assert dens.n_evals == res.n_logp_evals
    assert abs(res.log_marginal_likelihood - LOGZ) <= _tol(res)


def test_params_by_tau_lookup_and_replay():
    """A run can replay another run's kernel parameters (looked up by τ) without tuning."""
    from pymc_crais.core.anneal import ParamsByTau

    lookup = ParamsByTau([0.1, 0.5, 1.0], ["a", "b", "c"])
    assert [lookup(t) for t in (0.05, 0.1, 0.3, 0.5, 0.99, 1.0)] == ["a", "a", "a", "b", "b", "c"]
    with pytest.raises(ValueError):
        ParamsByTau([0.5, 1.0], ["a"])

    d = 2
    dens = FunctionDensity(d, lambda x: -0.5 * (x**2).sum(1), lambda x: -0.5 * ((x - 1) ** 2).sum(1) / 0.25,
                           lambda x: -x, lambda x: -(x - 1) / 0.25)
    rng = np.random.default_rng(0)
    first = anneal(rng, dens, rng.standard_normal((300, d)), make_path(0.0), make_fixed_schedule("linear", 20), make_kernel("hmc"))
    assert len(first.kernel_params) == 20
    replay = ParamsByTau(first.stages["tau"], first.kernel_params)
    rng = np.random.default_rng(1)
    second = anneal(rng, dens, rng.standard_normal((300, d)), make_path(0.0), make_fixed_schedule("linear", 40),
                    make_kernel("hmc"), kernel_params=replay)
    taus = second.stages["tau"]
    for t, p in zip(taus, second.kernel_params):
        assert p is replay(t)  # exactly the replayed parameters, no tuning on its own particles


# ----------------------------------------------------------------------------- options objects
@pytest.mark.filterwarnings("ignore:max_steps=6")
def test_options_object_equals_flat_settings():
    from pymc_crais.core.anneal import AnnealOptions
    from pymc_crais.core.kernels.moves import Moves
    from pymc_crais.core.resampling import ResamplingPolicy

    def run(**kw):
        rng = np.random.default_rng(3)
        return anneal(rng, _make_density(), _x0(3, 300), make_path(0.0),
                      make_fixed_schedule("linear", 8), make_kernel("rwmh"), **kw)

    flat = run(n_mcmc_steps="auto", max_mcmc_steps=5, resample="ess", threshold=0.7,
               resampler="multinomial", max_steps=6)
    opts = AnnealOptions(Moves.auto(5), ResamplingPolicy("ess", 0.7, "multinomial"), max_stages=6)
    from pymc_crais.warnings import MaxStepsWarning

    with pytest.warns(MaxStepsWarning, match="max_steps=6"):  # a RuntimeWarning subclass
        obj = run(options=opts)
    _same(flat, obj)
    assert obj.hit_max_stages and obj.n_stages == 6
    _same(flat, run(n_mcmc_steps="auto", max_mcmc_steps=5, resample="ess", threshold=0.7,
                    resampler="multinomial", max_stages=6))


@pytest.mark.parametrize(
    ("kw", "err", "match"),
    [
        ({"max_steps": 5, "max_stages": 5}, TypeError, "max_stages or its old name max_steps"),
        ({"max_stages": 0}, ValueError, "positive integer"),
        ({"resampler": "nope"}, ValueError, "nope"),
        ({"options": "x", "resample": "ess"}, TypeError, "either options or keyword"),
    ],
)
def test_option_errors(kw, err, match):
    with pytest.raises(err, match=match):
        anneal(np.random.default_rng(0), _make_density(), _x0(0, 20), make_path(0.0),
               make_fixed_schedule("linear", 3), make_kernel("rwmh"), **kw)


def test_resampling_policy():
    from pymc_crais.core.resampling import ResamplingPolicy

    assert not ResamplingPolicy("never").wants(1.0, 100)
    assert ResamplingPolicy("always").wants(100.0, 100)
    ess = ResamplingPolicy("ess", 0.5)
    assert ess.wants(49.9, 100) and not ess.wants(50.0, 100)
    with pytest.raises(ValueError, match="resample='sometimes'"):
        ResamplingPolicy("sometimes")
    with pytest.raises(ValueError, match="threshold"):
        ResamplingPolicy("ess", 0.0)


def test_observers_see_each_stage_before_its_tau_is_chosen():
    """An observer is told the initial population, (stage, τ, state, log w) at the start of
    every stage and a report of what the stage did, and the run's bits do not depend on it."""
    from pymc_crais.core import FunctionDensity, anneal, make_kernel, make_path
    from pymc_crais.core.observers import LoopObserver
    from pymc_crais.core.schedules import linear_schedule, make_fixed_schedule

    dens = FunctionDensity(
        1, lambda x: -0.5 * x[:, 0] ** 2, lambda x: -0.5 * (x[:, 0] - 1.0) ** 2,
        lambda x: -x, lambda x: -(x - 1.0), lambda rng, n: rng.standard_normal((n, 1)),
    )  # fmt: skip

    class Seen(LoopObserver):
        def __init__(self):
            self.calls, self.reports, self.started = [], [], None

        def begin_run(self, state):
            self.started = state.n

        def begin_stage(self, stage, tau, state, log_weights):
            self.calls.append((stage, tau, state.n, float(np.sum(log_weights))))

        def end_stage(self, report):
            self.reports.append((report.index, report.tau, report.log_z_increment, report.moved.n_transitions))

    runs = []
    for observers in ((), (Seen(),)):
        rng = np.random.default_rng(3)
        res = anneal(rng, dens, rng.standard_normal((200, 1)), make_path(0.0),
                     make_fixed_schedule(linear_schedule(5)), make_kernel("rwmh"), observers=observers)  # fmt: skip
        runs.append((res, observers))
    (plain, _), (seen, (obs,)) = runs
    assert seen.log_marginal_likelihood == plain.log_marginal_likelihood
    assert [c[:3] for c in obs.calls] == [(k, pytest.approx(k / 5), 200) for k in range(5)]
    assert obs.calls[0][3] == 0.0  # AIS: the first stage starts from equal weights
    # and after each stage what it did: the records the run returns come from the same reports
    assert obs.started == 200 and [r[0] for r in obs.reports] == list(range(5))
    assert [r[1] for r in obs.reports] == list(seen.stages["tau"])
    assert [r[2] for r in obs.reports] == list(seen.stages["log_z_increment"])
    assert [r[3] for r in obs.reports] == list(seen.stages["mcmc_steps"])

    class OnlyBegin:  # not a LoopObserver: refused with the fix
        def begin_stage(self, stage, tau, state, log_weights):
            pass

    from pymc_crais.core.anneal import AnnealOptions

    with pytest.raises(TypeError, match="subclass pymc_crais.core.observers.LoopObserver"):
        AnnealOptions(observers=(OnlyBegin(),))
