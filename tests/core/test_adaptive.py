"""Adaptive schedules: ESS, CESS and constant-rate (CR-AIS) rules hit their targets."""

import numpy as np
import pytest

from pymc_crais.core import FunctionDensity, ParticleState, anneal, make_kernel, make_path
from pymc_crais.core.schedules import interpolate_schedule, linear_schedule
from pymc_crais.core.schedules.adaptive import CESSSchedule, ConstantRateSchedule, ESSSchedule
from pymc_crais.core.weights import ess_from_log_weights, logsumexp


def _asymmetric_state(rng, n=2000):
    """A skewed log-likelihood (Gumbel-like) so that the rules are not trivially symmetric."""
    delta = -np.exp(rng.normal(3.0, 1.0, size=n))
    x = rng.normal(size=(n, 1))
    return ParticleState(x, np.zeros(n), delta)


@pytest.mark.parametrize("rho", [0.3, 0.5, 0.9])
@pytest.mark.parametrize("uneven", [False, True])
def test_ess_rule_hits_target(rng, rho, uneven):
    state = _asymmetric_state(rng)
    log_w = rng.normal(0, 1.0, state.n) if uneven else np.zeros(state.n)
    path = make_path(0.0)
    for tau in (0.0, 0.3):
        t_new = ESSSchedule(rho).next_tau(0, tau, state, log_w, path)
        assert tau < t_new < 1.0
        incr = path.log_increment(tau, t_new, state.delta)
        ratio = ess_from_log_weights(log_w + incr) / ess_from_log_weights(log_w)
        assert abs(ratio - rho) < 1e-6


@pytest.mark.parametrize("rho", [0.3, 0.6, 0.95])
@pytest.mark.parametrize("alpha,c", [(0.0, 0.0), (0.5, -20.0)])
def test_cess_rule_hits_target(rng, rho, alpha, c):
    state = _asymmetric_state(rng)
    log_w = rng.normal(0, 1.0, state.n)
    path = make_path(alpha, c=c)
    t_new = CESSSchedule(rho).next_tau(0, 0.1, state, log_w, path)
    incr = path.log_increment(0.1, t_new, state.delta)
    wn = np.exp(log_w - logsumexp(log_w))
    i = np.exp(incr)
    cess = (wn @ i) ** 2 / (wn @ i**2)
    if alpha == 0.0:
        assert t_new < 1.0
    if t_new < 1.0:
        assert abs(cess - rho) < 1e-6
    else:  # the whole remaining path keeps CESS above the target: jump to the end
        assert cess >= rho


def test_rules_respect_max_step_and_reach_one(rng):
    state = ParticleState(rng.normal(size=(100, 1)), np.zeros(100), np.full(100, -1e-6))
    path = make_path(0.0)
    assert ESSSchedule(0.5, max_step=0.1).next_tau(0, 0.2, state, np.zeros(100), path) == pytest.approx(0.3)
    assert ESSSchedule(0.5).next_tau(0, 0.95, state, np.zeros(100), path) == 1.0
    assert CESSSchedule(0.5, max_step=0.25).next_tau(0, 0.0, state, np.zeros(100), path) == 0.25


def test_tiny_first_steps_are_resolved(rng):
    """A log-likelihood varying by ~1e6 nats needs Δτ ~ 1e-6; relative precision is kept."""
    state = ParticleState(rng.normal(size=(500, 1)), np.zeros(500), -1e6 * rng.random(500))
    path = make_path(0.0)
    t = ESSSchedule(0.5).next_tau(0, 0.0, state, np.zeros(500), path)
    assert 1e-9 < t < 1e-4
    ratio = ess_from_log_weights(path.log_increment(0.0, t, state.delta)) / 500
    assert abs(ratio - 0.5) < 1e-6


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(rho=0.0), "rho"),
        (dict(rho=1.0), "rho"),
        (dict(rho=0.5, min_step=0.3, max_step=0.2), "min_step"),
        (dict(rho=0.5, max_step=0.0), "max_step"),
    ],
)
def test_bisection_schedule_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ESSSchedule(**kwargs)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(delta=0.0), "delta"),
        (dict(delta=-1.0), "delta"),
        (dict(delta=np.inf), "delta"),
        (dict(delta=1.0, variance="robust"), "variance"),
        (dict(delta=1.0, min_step=0.5, max_step=0.1), "min_step"),
    ],
)
def test_constant_rate_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ConstantRateSchedule(**kwargs)


def _gaussian_problem(d=3, s=0.2, mu=1.0):
    """q0 = N(0, I), π = N(mu·1, s² I) normalized (log Z = 0)."""
    m = np.full(d, mu)

    def lq(x):
        return -0.5 * (x**2).sum(1) - 0.5 * d * np.log(2 * np.pi)

    def lt(x):
        return -0.5 * (((x - m) / s) ** 2).sum(1) - 0.5 * d * np.log(2 * np.pi * s * s)

    dens = FunctionDensity(d, lq, lt, lambda x: -x, lambda x: -(x - m) / s**2)
    return dens, m, s


def _kl_geometric_gaussian(tau, d, m, s):
    """KL(γ_τ ‖ π) in closed form: γ_τ ∝ q0^{1−τ} π^τ is N(m_τ, v_τ I)."""
    prec = (1 - tau) + tau / s**2
    v = 1.0 / prec
    mean = (tau * m / s**2) * v
    return 0.5 * np.sum(v / s**2 + (m - mean) ** 2 / s**2 - 1.0 + np.log(s**2 / v))


@pytest.mark.slow
def test_constant_rate_gives_constant_kl_decrease():
    """Appendix C check: on the geometric path each CR step lowers KL(γ_τ‖π) by ≈ δ.

    Slow (4000 particles, over 50 steps, so that each step's drop is measured to 0.35 δ); the
    default suite checks the rule's calibration end to end in
    ``tests/test_crais.py::test_auto_delta_uses_kl_of_prior_to_posterior`` (δ · steps equals
    KL(q0‖π) within 15 %)."""
    d = 3
    dens, m, s = _gaussian_problem(d)
    delta = 0.05
    sched = ConstantRateSchedule(delta, max_step=1.0)
    rng = np.random.default_rng(3)
    res = anneal(rng, dens, rng.standard_normal((4000, d)), make_path(0.0), sched, make_kernel("hmc"), n_mcmc_steps=2)
    taus = np.concatenate([[0.0], res.stages["tau"]])
    kl = np.array([_kl_geometric_gaussian(t, d, m, s) for t in taus])
    drops = -np.diff(kl)
    # The rule is first order in the step of log β; judge the steps where that step is small
    # and the remaining divergence exceeds 2δ (the final steps only have < δ left to lose).
    dlogb = -np.diff(np.log1p(-np.minimum(taus, 1 - 1e-16)))
    body = (dlogb < 0.2) & (kl[:-1] > 2 * delta)
    assert body.sum() > 50
    ratio = drops[body] / delta
    assert np.all(np.abs(ratio - 1) < 0.35), ratio
    assert abs(np.mean(ratio) - 1) < 0.05
    assert abs(res.log_marginal_likelihood) < 4 * np.sqrt(res.log_z_variance) + 0.02


def test_narrow_target_gets_longer_schedule():
    def run(s):
        dens, _, _ = _gaussian_problem(2, s=s)
        rng = np.random.default_rng(1)
        return anneal(rng, dens, rng.standard_normal((1000, 2)), make_path(0.0), ConstantRateSchedule(0.5), make_kernel("hmc"))

    # s = 0.2 takes about 100 steps against 17 (s = 0.05 took about 1600, 95 % of the time)
    wide, narrow = run(0.5), run(0.2)
    assert narrow.n_stages > 1.5 * wide.n_stages


@pytest.mark.parametrize("alpha", [-0.5, 0.5, 1.0, 2.0])
def test_constant_rate_power_mean_estimates(alpha):
    """For α < 0 on a target narrower than q0 the rule asks for τ to grow by ~2 % per step
    from ~1e-50 (u^α explodes in q0's tails): min_step is the guard against that stall."""
    dens, _, _ = _gaussian_problem(2, s=0.3)
    min_step = 1e-3 if alpha < 0 else 0.0
    vals = []
    for seed in range(3):
        rng = np.random.default_rng(seed)
        sched = ConstantRateSchedule(0.05, min_step=min_step)
        res = anneal(rng, dens, rng.standard_normal((1000, 2)), make_path(alpha, c=0.3), sched, make_kernel("hmc"), max_steps=3000)
        assert not res.hit_max_steps
        vals.append((res.log_marginal_likelihood, np.sqrt(res.log_z_variance), res.n_stages))
    for v, se, n_stages in vals:
        assert 3 <= n_stages < 3000
        assert abs(v) < 4 * se + 0.05, vals


def test_constant_rate_hits_max_steps_with_warning():
    dens, _, _ = _gaussian_problem(2, s=0.3)
    rng = np.random.default_rng(0)
    with pytest.warns(RuntimeWarning, match="max_steps=50"):
        res = anneal(rng, dens, rng.standard_normal((500, 2)), make_path(-0.5, c=0.3), ConstantRateSchedule(0.05), make_kernel("rwmh"), max_steps=50)
    assert res.hit_max_steps and res.n_stages == 50 and res.stages["tau"][-1] == 1.0


def test_interpolate_schedule_exact_length_and_shape():
    tuned = np.concatenate([[0.0], np.geomspace(1e-6, 1.0, 40)])
    out = interpolate_schedule(tuned, 300)
    assert out.size == 301 and out[0] == 0.0 and out[-1] == 1.0
    assert np.all(np.diff(out) > 0)
    # same shape: the value at relative position s is preserved where the grids coincide
    np.testing.assert_allclose(out[::300 // 3 * 1][:1], tuned[:1])
    np.testing.assert_allclose(interpolate_schedule(linear_schedule(10), 20), linear_schedule(20))
    np.testing.assert_allclose(interpolate_schedule(tuned, 40), tuned)


def test_constant_rate_overflowing_variance_takes_the_smallest_step():
    """α < 0 with Δ spread over thousands of nats: g(u) overflows and v = inf. The rule's
    step is then zero, so the schedule must take min_step, not jump to τ = 1."""
    rng = np.random.default_rng(0)
    n = 500
    state = ParticleState(rng.normal(size=(n, 1)), np.zeros(n), -np.abs(rng.normal(0.0, 3000.0, size=n)))
    path = make_path(-0.5, c=0.0)
    sched = ConstantRateSchedule(0.05, min_step=1e-3)
    with np.errstate(over="ignore", invalid="ignore"):
        v, _ = sched.rate_statistics(0.0, state, np.zeros(n), path)
        tau = sched.next_tau(0, 0.0, state, np.zeros(n), path)
    assert not np.isfinite(v)
    assert tau == pytest.approx(1e-3)
    no_floor = ConstantRateSchedule(0.05, min_step=0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        assert 0.0 < no_floor.next_tau(0, 0.0, state, np.zeros(n), path) < 1e-200


# ----------------------------------------------------------------------------- names
def test_rate_and_dtau_names_and_their_old_aliases():
    new = ConstantRateSchedule(0.3, min_dtau=1e-3, max_dtau=0.2)
    old = ConstantRateSchedule(delta=0.3, min_step=1e-3, max_step=0.2)
    for s in (new, old):
        assert (s.rate, s.min_dtau, s.max_dtau) == (0.3, 1e-3, 0.2)
        # the public names stay in the recorded settings
        assert s.describe()["delta"] == 0.3 and s.describe()["max_step"] == 0.2
    assert ConstantRateSchedule(0.3).max_dtau == 0.125
    ess = ESSSchedule(0.5, max_step=0.1, min_step=0.01)
    assert (ess.max_dtau, ess.min_dtau) == (0.1, 0.01) == (ESSSchedule(0.5, 0.1, 0.01).max_dtau, 0.01)
    with pytest.raises(TypeError, match="rate or its old name delta"):
        ConstantRateSchedule(0.3, delta=0.3)
    with pytest.raises(TypeError, match="max_dtau or its old name max_step"):
        CESSSchedule(0.5, max_dtau=0.1, max_step=0.1)
    # errors name the keyword the caller used
    with pytest.raises(ValueError, match="max_step must be in"):
        ESSSchedule(0.5, max_step=2.0)
    with pytest.raises(ValueError, match="max_dtau must be in"):
        ESSSchedule(0.5, max_dtau=2.0)
    with pytest.raises(ValueError, match="delta must be positive"):
        ConstantRateSchedule(delta=-1.0)
    with pytest.raises(ValueError, match="rate must be positive"):
        ConstantRateSchedule(-1.0)


def test_constant_rate_cess_floor_stops_the_crawl(rng):
    """A population whose Δ spreads over orders of magnitude: the rule's step is tiny (v
    huge) though the weights barely change; with cess_floor the step is the CESS rule's
    when that is larger, and the rule's own otherwise."""
    n = 1000
    delta = -np.exp(rng.normal(0.0, 6.0, size=n))  # log-likelihoods from ~-1e-8 to ~-1e8
    state = ParticleState(rng.normal(size=(n, 1)), np.zeros(n), delta)
    path, log_w = make_path(0.0), np.zeros(n)
    plain = ConstantRateSchedule(0.01).next_tau(0, 0.0, state, log_w, path)
    floored = ConstantRateSchedule(0.01, cess_floor=0.999)
    t = floored.next_tau(0, 0.0, state, log_w, path)
    cess_step = CESSSchedule(0.999, max_step=0.125).next_tau(0, 0.0, state, log_w, path)
    assert plain < 1e-6 and t == pytest.approx(cess_step) and t > 100 * plain
    assert floored.describe()["cess_floor"] == 0.999
    # where the rule asks for more than the floor, the rule's step stands
    calm = ParticleState(state.x, np.zeros(n), rng.normal(-1.0, 0.1, size=n))
    rule = ConstantRateSchedule(0.01).next_tau(0, 0.0, calm, log_w, path)
    assert floored.next_tau(0, 0.0, calm, log_w, path) == pytest.approx(max(rule, CESSSchedule(0.999, max_step=0.125).next_tau(0, 0.0, calm, log_w, path)))
    with pytest.raises(ValueError, match="cess_floor"):
        ConstantRateSchedule(0.01, cess_floor=1.0)
