"""RTS and thermodynamic integration in the NumPy core (docs/algorithms.md, RTS section).

The end-to-end cases use a mean-shift Gaussian: ``q0 = N(0, I)``, ``Δ(x) = b·x + C``, so that
``γ_τ = N(τ b, I)``, ``log Z_τ = τ C + τ² |b|² / 2`` and ``E_τ[Δ] = C + τ |b|²`` is linear in
τ: the trapezoid rule is exact on it and TI has no discretization error, only Monte Carlo
error. Tolerances are multiples of the run's own standard errors.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logsumexp

from pymc_crais.core.density import FunctionDensity
from pymc_crais.core.kernels import MALA, make_kernel
from pymc_crais.core.particles import ParticleState
from pymc_crais.core.paths import make_path
from pymc_crais.core.rts import (
    ArrayTauPath,
    ladder_log_ratio,
    rts,
    rts_update,
    sample_levels,
    tau_derivative,
    temperature_log_conditional,
    trapezoid,
)
from pymc_crais.core.schedules import linear_schedule

B = np.array([1.5, -1.0])
C = 0.7
D = B.size
LOG_Z = C + 0.5 * B @ B


def _log_q0(x):
    return -0.5 * np.sum(x * x, axis=1) - 0.5 * D * np.log(2 * np.pi)


def shift_density():
    return FunctionDensity(
        D,
        _log_q0,
        lambda x: _log_q0(x) + x @ B + C,
        lambda x: -x,
        lambda x: -x + B,
        lambda rng, n: rng.standard_normal((n, D)),
    )


def log_z_tau(tau):
    return tau * C + 0.5 * tau**2 * (B @ B)


PATHS = [make_path(0.0), make_path(0.0, c=0.4), make_path(0.5, c=0.3), make_path(-0.7, c=-0.2), make_path(1.0)]


# ----------------------------------------------------------------------------- paths
@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.describe())
def test_array_tau_path_matches_scalar_path(path, rng):
    taus = np.array([0.0, 1e-4, 0.3, 0.3, 0.77, 1.0])[rng.integers(0, 6, size=300)]
    delta = rng.normal(-2.0, 3.0, size=300)
    delta[:5] = -np.inf
    log_q0 = rng.normal(size=300)
    ap = ArrayTauPath(path)
    want_h = np.array([path.log_ratio(t, delta[i : i + 1])[0] for i, t in enumerate(taus)])
    want_w = np.array([path.gradient_weight(t, delta[i : i + 1])[0] for i, t in enumerate(taus)])
    np.testing.assert_allclose(ap.log_ratio(taus, delta), want_h, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(ap.gradient_weight(taus, delta), want_w, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(ap.log_density(taus, log_q0, delta), path.log_density(0.0, log_q0, delta) * 0 + log_q0 + want_h)
    # a scalar τ goes to the wrapped path unchanged
    np.testing.assert_array_equal(ap.log_ratio(0.3, delta), path.log_ratio(0.3, delta))


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.describe())
def test_ladder_log_ratio_and_tau_derivative(path, rng):
    ladder = np.array([0.0, 0.01, 0.2, 0.5, 0.9, 1.0])
    delta = rng.normal(-1.0, 2.0, size=50)
    got = ladder_log_ratio(path, ladder, delta)
    assert got.shape == (ladder.size, delta.size)
    np.testing.assert_allclose(got, np.stack([path.log_ratio(t, delta) for t in ladder]), rtol=1e-13, atol=1e-13)
    # ∂τ h against central finite differences, inside (0, 1)
    for t in (0.05, 0.4, 0.8):
        h = 1e-6
        fd = (path.log_ratio(t + h, delta) - path.log_ratio(t - h, delta)) / (2 * h)
        np.testing.assert_allclose(tau_derivative(path, t, delta), fd, rtol=1e-6, atol=1e-6)


def test_tau_derivative_is_finite_for_extreme_deltas():
    path = make_path(0.5, c=0.0)
    d = np.array([-1e4, -50.0, 0.0, 50.0, 1e4])
    out = tau_derivative(path, 0.5, d)
    assert np.all(np.isfinite(out))
    # x = α Δ → +∞: (1 − e^{−x}) / (α τ) → 1 / (α τ); x → −∞: −1 / (α (1 − τ))
    assert out[-1] == pytest.approx(1.0 / (0.5 * 0.5))
    assert out[0] == pytest.approx(-1.0 / (0.5 * 0.5))


# ----------------------------------------------------------------------------- k | θ
def test_temperature_conditional_against_brute_force(rng):
    path = make_path(0.5, c=0.2)
    ladder = np.array([0.0, 0.1, 0.35, 0.7, 1.0])
    K = ladder.size
    r = rng.random(K) + 0.1
    log_r = np.log(r / r.sum())
    log_z = rng.normal(0.0, 3.0, size=K)
    delta = rng.normal(-3.0, 4.0, size=40)
    log_q0 = rng.normal(size=40)
    got = temperature_log_conditional(ladder_log_ratio(path, ladder, delta), log_r, log_z)
    for j in range(delta.size):
        # q(k | θ) ∝ r_k γ_k(θ) / Ẑ_k with the full log γ_k (log q0 included)
        lg = np.array([path.log_density(t, log_q0[j : j + 1], delta[j : j + 1])[0] for t in ladder])
        want = log_r + lg - log_z
        want -= logsumexp(want)
        np.testing.assert_allclose(got[:, j], want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.exp(got).sum(axis=0), 1.0, rtol=1e-12)


def test_temperature_conditional_with_zero_density_particle():
    lr = np.array([[0.0, 0.0], [-np.inf, -1.0], [-np.inf, -2.0]])
    out = temperature_log_conditional(lr, np.log(np.full(3, 1 / 3)), np.zeros(3))
    assert np.all(np.isfinite(out[0]))
    assert out[1, 0] == -np.inf and out[0, 0] == 0.0
    np.testing.assert_allclose(np.exp(out).sum(axis=0), 1.0)


def test_sample_levels_frequencies(rng):
    p = np.array([0.05, 0.5, 0.0, 0.3, 0.15])
    n = 200_000
    with np.errstate(divide="ignore"):
        log_q = np.tile(np.log(p)[:, None], (1, n))
    k = sample_levels(rng, log_q)
    freq = np.bincount(k, minlength=p.size) / n
    se = np.sqrt(p * (1 - p) / n)
    assert np.all(np.abs(freq - p) <= 5 * se + 1e-12)
    assert freq[2] == 0.0


def test_rts_update_recovers_exact_log_z():
    """With ĉ equal to the exact marginal q(k) ∝ r_k Z_k / Ẑ_k, the update returns log Z_k."""
    ladder = linear_schedule(6)
    true = log_z_tau(ladder)
    r = np.array([0.1, 0.2, 0.1, 0.15, 0.15, 0.2, 0.1])
    guess = true + np.array([0.0, 0.3, -1.0, 2.0, 0.5, -0.2, 4.0])
    c = r * np.exp(true - guess)
    c /= c.sum()
    np.testing.assert_allclose(rts_update(guess, np.log(r), np.log(c)), true, atol=1e-12)


def test_trapezoid_exact_for_linear_integrand():
    ladder = np.sort(np.concatenate([[0.0, 1.0], np.random.default_rng(3).random(17)]))
    assert trapezoid(ladder, C + ladder * (B @ B)) == pytest.approx(LOG_Z, rel=1e-13)
    assert np.isnan(trapezoid(ladder, np.full(ladder.size, np.nan)))


# ----------------------------------------------------------------------------- θ | k kernels
@pytest.mark.parametrize("kernel", ["hmc", "mala", "rwmh"])
def test_batched_kernel_at_per_particle_temperatures_is_invariant(kernel, rng):
    """Exact draws from γ_{τ_j} stay exact after 20 transitions at per-level step sizes."""
    density = shift_density()
    ladder = np.array([0.0, 0.2, 0.5, 1.0])
    n = 4000
    levels = rng.integers(0, ladder.size, size=n)
    mean = ladder[levels][:, None] * B
    x = mean + rng.standard_normal((n, D))
    k = make_kernel(kernel)
    state = ParticleState.evaluate(density, x, gradient=k.needs_gradient)
    params = k.level_params(k.init(state), ladder.size)
    params.log_step += np.log([1.5, 0.7, 1.0, 0.4])  # deliberately different per level
    path = ArrayTauPath(make_path(0.0))
    p = k.select_level_params(params, levels)
    for _ in range(20):
        state, info = k.step(rng, state, density, path, ladder[levels], p)
    assert 0.05 < info.acceptance_rate < 1.0
    z = state.x - mean
    assert np.all(np.abs(z.mean(axis=0)) < 5 / np.sqrt(n))
    assert np.all(np.abs(z.var(axis=0) - 1.0) < 5 * np.sqrt(2 / n))


def test_level_params_from_stages_and_for_levels():
    k = MALA()
    st = ParticleState.evaluate(shift_density(), np.random.default_rng(0).standard_normal((50, D)), gradient=True)
    p0 = k.init(st)
    from dataclasses import replace

    stages = [replace(p0, step_size=s, inv_mass=np.full(D, v)) for s, v in ((0.1, 1.0), (0.2, 2.0), (0.4, 3.0))]
    lp = k.stack_level_params(stages)
    got = k.select_level_params(lp, np.array([2, 0, 1]))
    np.testing.assert_allclose(got.step_size[:, 0], [0.4, 0.1, 0.2])
    np.testing.assert_allclose(got.inv_mass[:, 0], [3.0, 1.0, 2.0])
    np.testing.assert_allclose(lp.step_sizes(), [0.1, 0.2, 0.4])


# ----------------------------------------------------------------------------- the run
@pytest.fixture(scope="module")
def shift_run():
    density = shift_density()
    rng = np.random.default_rng(7)
    ladder = linear_schedule(15)
    res = rts(rng, density, density.sample_q0(rng, 400), make_path(0.0), ladder, make_kernel("hmc"), n_sweeps=300)
    return res, ladder


def test_rts_and_ti_match_exact_log_z(shift_run):
    res, ladder = shift_run
    for value, var in (
        (res.log_marginal_likelihood, res.log_z_variance),
        (res.log_z_ti, res.log_z_ti_variance),
        (res.log_z_rbti, res.log_z_rbti_variance),
    ):
        se = np.sqrt(var)
        assert 0 < se < 0.05
        assert abs(value - LOG_Z) < 4 * se, (value, LOG_Z, se)
    # the per-level RTS estimates follow log Z_τ along the whole ladder
    se_c = res.c_hat_mcse / res.c_hat
    err = res.log_z_rts_levels - log_z_tau(ladder)
    assert np.all(np.abs(err) < 4 * np.sqrt(se_c**2 + se_c[0] ** 2) + 1e-12)
    # RB-TI level means estimate E_τ[Δ] = C + τ|b|²
    assert np.all(np.abs(res.rbti_means - (C + ladder * (B @ B))) < 0.15)


def test_rb_statistics_and_bookkeeping(shift_run):
    res, ladder = shift_run
    K, n = ladder.size, 400
    assert res.c_hat.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(res.c_hat_init.sum(axis=1), 1.0)
    assert res.transitions.sum() == res.n_sweeps * n
    assert res.extras["level_visits"].sum() == res.n_sweeps * n
    assert res.transitions.shape == (K, K)
    assert np.all((res.acceptance_rate > 0.2) & (res.acceptance_rate <= 1.0))
    assert np.all(res.ess > 0)
    assert res.n_logp_evals > res.n_logp_evals_init > 0
    assert res.posterior_x.shape[1] == D


def test_c_hat_close_to_prior_after_initial_loop(shift_run):
    """After the loop stops (max |r − ĉ| < 0.1/K in a round, then one more update), the
    final run's ĉ equals r up to the Monte Carlo error of that round and of the final run."""
    res, ladder = shift_run
    K = ladder.size
    assert res.init_converged
    assert res.init_deviation[-1] < 0.1 / K
    se_final = res.c_hat_mcse
    # the round used 25 of 50 sweeps against the final run's 300: its error is larger by √12
    se_round = se_final * np.sqrt(res.n_sweeps / 25)
    assert np.all(np.abs(res.c_hat - 1.0 / K) < 4 * np.sqrt(se_final**2 + se_round**2))


def test_posterior_draws_follow_the_target(shift_run):
    res, _ = shift_run
    w = np.exp(res.posterior_log_weights - logsumexp(res.posterior_log_weights))
    ess = 1.0 / np.sum(w * w)
    mean = w @ res.posterior_x
    assert np.all(np.abs(mean - B) < 5 / np.sqrt(ess) + 0.05)


def test_cold_start_paper_recipe_and_power_mean_path():
    density = shift_density()
    rng = np.random.default_rng(11)
    res = rts(
        rng, density, density.sample_q0(rng, 300), make_path(0.5, c=1.0), linear_schedule(11),
        make_kernel("hmc"), n_sweeps=200, warm_start=None, restart_levels="prior", init_burn=0.0,
        max_init_rounds=30,
    )
    for value, var in ((res.log_marginal_likelihood, res.log_z_variance), (res.log_z_rbti, res.log_z_rbti_variance)):
        se = np.sqrt(var)
        assert 0 < se < 0.1
        # TI on a power-mean path has a discretization error (E_τ[∂τ log γ] is not linear)
        assert abs(value - LOG_Z) < 4 * se + (0.05 if value is res.log_z_rbti else 0.0), (value, se)
    # the guesses were learnt from log Ẑ_k = 0: the final ĉ is at r up to the MC errors of
    # the last round (all 50 sweeps, no burn-in) and of the final run
    K = res.ladder.size
    assert res.init_converged and res.n_init_rounds >= 2
    se = res.c_hat_mcse * np.sqrt(1.0 + res.n_sweeps / 50)
    assert np.all(np.abs(res.c_hat - 1.0 / K) < 4 * se)


def test_same_seed_same_result():
    density = shift_density()
    out = []
    for _ in range(2):
        rng = np.random.default_rng(5)
        res = rts(rng, density, density.sample_q0(rng, 60), make_path(0.0), linear_schedule(5),
                  make_kernel("rwmh"), n_sweeps=20, n_init_sweeps=10, max_init_rounds=2)
        out.append(res)
    assert out[0].log_marginal_likelihood == out[1].log_marginal_likelihood
    np.testing.assert_array_equal(out[0].posterior_x, out[1].posterior_x)
    np.testing.assert_array_equal(out[0].transitions, out[1].transitions)


def test_initial_loop_cap_warns():
    density = shift_density()
    rng = np.random.default_rng(1)
    with pytest.warns(match="max_init_rounds=1"):
        res = rts(rng, density, density.sample_q0(rng, 50), make_path(0.0), linear_schedule(9),
                  make_kernel("hmc"), n_sweeps=5, n_init_sweeps=4, max_init_rounds=1, tol=1e-6)
    assert not res.init_converged


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"n_sweeps": 0}, "n_sweeps"),
        ({"tol": -1.0}, "tol"),
        ({"warm_start": "laplace"}, "warm_start"),
        ({"restart_levels": "uniform"}, "restart_levels"),
        ({"init_burn": 1.0}, "init_burn"),
        ({"level_prior": [1.0, 2.0]}, "level_prior"),
    ],
)
def test_bad_arguments(kwargs, match):
    density = shift_density()
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=match):
        rts(rng, density, density.sample_q0(rng, 10), make_path(0.0), linear_schedule(4), make_kernel("hmc"), **kwargs)


def test_tau_derivative_at_tau_one_for_very_low_delta():
    """At τ = 1 the integrand is (1 − e^{−x}) / α: large but finite for x = α(Δ − c) ≪ 0."""
    path = make_path(0.5, c=0.0)
    d = np.array([-85.0, -200.0])
    x = 0.5 * d
    np.testing.assert_allclose(tau_derivative(path, 1.0, d), -np.expm1(-x) / 0.5, rtol=1e-12)


def test_options_object_equals_keyword_settings():
    from pymc_crais.core.rts import RTSOptions

    density = shift_density()

    def run(**kw):
        rng = np.random.default_rng(11)
        return rts(rng, density, density.sample_q0(rng, 40), make_path(0.5), linear_schedule(4),
                   make_kernel("mala"), **kw)

    settings = dict(n_sweeps=6, n_init_sweeps=4, max_init_rounds=2, n_groups=4, tol=10.0)
    a, b = run(**settings), run(options=RTSOptions(**settings))
    assert a.log_marginal_likelihood == b.log_marginal_likelihood
    assert a.log_z_rbti == b.log_z_rbti
    np.testing.assert_array_equal(a.posterior_x, b.posterior_x)
    with pytest.raises(TypeError, match="either options or keyword"):
        run(options=RTSOptions(**settings), n_sweeps=3)


def test_rts_with_a_kernel_without_level_hooks_fails_clearly():
    from pymc_crais.core.kernels import KernelInfo, MutationKernel

    class Plain(MutationKernel):
        def init(self, state):
            return None

        def tune(self, params, state, info, log_weights=None):
            return None

        def step(self, rng, state, density, path, tau, params):
            return state, KernelInfo(1.0, state.n)

    density = shift_density()
    rng = np.random.default_rng(0)
    with pytest.raises(NotImplementedError, match="Plain does not implement level_params"):
        rts(rng, density, density.sample_q0(rng, 20), make_path(0.0), linear_schedule(3), Plain(),
            warm_start=None)
