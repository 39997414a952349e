"""Annealing paths (docs/algorithms.md, "Paths"): endpoints, the α → 0 limit, the closed form,
the gradient weight, and the handling of extreme / non-finite Δ."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from decimal import Decimal, localcontext

import numpy as np
import pytest

from pymc_crais.core.density import FunctionDensity
from pymc_crais.core.particles import ParticleState
from pymc_crais.core.paths import (
    AnnealingPath,
    ArrayTauPath,
    GeometricPath,
    PowerMeanPath,
    make_path,
)

ALPHAS = [-0.5, 0.5, 1.0, 2.0]
ALL_PATHS = [(0.0, 0.0), (0.0, 3.0)] + [(a, c) for a in ALPHAS for c in (0.0, 3.0)]


def _exact_power_mean(tau: float, alpha: float, d: float) -> float:
    """``log((1 − τ) + τ e^{α d}) / α`` in 60-digit decimal arithmetic (independent reference)."""
    with localcontext() as ctx:
        ctx.prec = 60
        t, a, x = Decimal(tau), Decimal(alpha), Decimal(d)
        return float(((1 - t) + t * (a * x).exp()).ln() / a)


@pytest.fixture
def deltas():
    rng = np.random.default_rng(1)
    return np.concatenate([rng.normal(0.0, 10.0, 200), [0.0, -50.0, 50.0, 1e-12, -3.7]])


# --------------------------------------------------------------------------- endpoints


@pytest.mark.parametrize("c", [0.0, 3.0, -7.25])
def test_geometric_endpoints_exact(deltas, c):
    p = make_path(0.0, c)
    assert isinstance(p, GeometricPath)
    h0 = p.log_ratio(0.0, deltas)
    h1 = p.log_ratio(1.0, deltas)
    assert h0.shape == deltas.shape and np.all(h0 == 0.0)
    np.testing.assert_array_equal(h1, deltas - c)


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("c", [0.0, 3.0, -7.25])
def test_power_mean_endpoints_exact(deltas, alpha, c):
    p = make_path(alpha, c)
    assert isinstance(p, PowerMeanPath)
    np.testing.assert_array_equal(p.log_ratio(0.0, deltas), np.zeros_like(deltas))
    np.testing.assert_array_equal(p.log_ratio(1.0, deltas), deltas - c)


@pytest.mark.parametrize("alpha", [0.3, -0.3, 3.0])
def test_power_mean_endpoint_exact_non_power_of_two_alpha(deltas, alpha):
    p = make_path(alpha, 0.0)
    np.testing.assert_array_equal(p.log_ratio(1.0, deltas), deltas)


@pytest.mark.parametrize("alpha,c", ALL_PATHS)
def test_log_density_endpoints(deltas, alpha, c):
    p = make_path(alpha, c)
    log_q0 = np.linspace(-5.0, 1.0, deltas.size)
    np.testing.assert_array_equal(p.log_density(0.0, log_q0, deltas), log_q0)
    np.testing.assert_allclose(p.log_density(1.0, log_q0, deltas), log_q0 + deltas - c,
                               rtol=1e-15, atol=1e-13)


# --------------------------------------------------------------------------- values


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("c", [0.0, 2.0])
def test_power_mean_matches_naive_formula(alpha, c):
    # moderate values where the naive formula neither overflows nor loses all precision
    d = np.linspace(-20.0, 20.0, 81)
    p = make_path(alpha, c)
    for tau in (1e-3, 0.1, 0.5, 0.9, 0.999):
        naive = np.log((1.0 - tau) + tau * np.exp(alpha * (d - c))) / alpha
        got = p.log_ratio(tau, d)
        np.testing.assert_allclose(got, naive, rtol=1e-12, atol=1e-13)
        ref = np.array([_exact_power_mean(tau, alpha, v - c) for v in d])
        np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("alpha", ALPHAS)
def test_power_mean_matches_high_precision_far_out(alpha):
    # |α(Δ−c)| large on both sides: uses the logaddexp and the log1p/expm1 branches
    d = np.array([-1e4, -700.0, -40.0, -1.0, 0.5, 1.9, 2.1, 40.0, 700.0, 1e4])
    p = make_path(alpha, 0.0)
    for tau in (1e-6, 0.3, 0.7, 0.99):
        ref = np.array([_exact_power_mean(tau, alpha, v) for v in d])
        np.testing.assert_allclose(p.log_ratio(tau, d), ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("alpha", [1.0, 0.5, -0.5, 2.0])
def test_power_mean_precision_near_tau_one(alpha):
    tau = 1.0 - 1e-12
    x = np.array([-30.0, -36.0, -40.0])  # α(Δ − c)
    d = x / alpha
    ref = np.array([_exact_power_mean(tau, alpha, v) for v in d])
    got = make_path(alpha, 0.0).log_ratio(tau, d)
    # the logaddexp form is accurate to ~1e-14 here; the code is off by ~1e-5
    np.testing.assert_allclose(got, ref, rtol=0.0, atol=1e-9)


@pytest.mark.parametrize("alpha", [1e-8, -1e-8])
@pytest.mark.parametrize("c", [0.0, 5.0])
def test_power_mean_tends_to_geometric(alpha, c):
    d = np.array([-50.0, -10.0, -1.0, -1e-3, 1e-3, 1.0, 10.0, 50.0, 55.0]) + c
    p = make_path(alpha, c)
    g = make_path(0.0, c)
    for tau in (1e-4, 0.1, 0.5, 0.9):
        got = p.log_ratio(tau, d)
        geo = g.log_ratio(tau, d)
        # h = τx + α τ(1−τ) x²/2 + O(α²x³): relative gap to τx is ≤ α|x|/2 (≈ 1.4e-7 at |x|=55)
        bound = 0.5 * abs(alpha) * np.abs(d - c) * (1 - tau) * (1 + 1e-6) + 1e-13
        assert np.all(np.abs(got - geo) <= bound * np.abs(geo)), (tau, got, geo)
        assert np.all(np.abs(got - geo) <= 3e-7 * np.abs(geo))
        # and it is the right side of the limit, to near machine precision
        ref = np.array([_exact_power_mean(tau, alpha, v - c) for v in d])
        np.testing.assert_allclose(got, ref, rtol=1e-13, atol=0.0)
        # gradient weight → τ
        np.testing.assert_allclose(p.gradient_weight(tau, d), tau, rtol=1e-6)


def test_geometric_value_and_weight(deltas):
    p = make_path(0.0, 1.5)
    for tau in (0.0, 0.25, 0.6, 1.0):
        np.testing.assert_allclose(p.log_ratio(tau, deltas), tau * (deltas - 1.5), rtol=1e-15,
                                   atol=1e-15)
        np.testing.assert_array_equal(p.gradient_weight(tau, deltas), np.full(deltas.shape, tau))


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("c", [0.0, -2.0])
def test_power_mean_gradient_weight_closed_form(alpha, c):
    d = np.linspace(-15.0, 15.0, 61)
    p = make_path(alpha, c)
    for tau in (0.05, 0.5, 0.95):
        e = np.exp(alpha * (d - c))
        w_ref = tau * e / ((1 - tau) + tau * e)
        w = p.gradient_weight(tau, d)
        np.testing.assert_allclose(w, w_ref, rtol=1e-12, atol=1e-300)
        assert np.all((w >= 0) & (w <= 1))
    np.testing.assert_array_equal(p.gradient_weight(0.0, d), 0.0)
    np.testing.assert_array_equal(p.gradient_weight(1.0, d), 1.0)


# --------------------------------------------------------------------------- gradient vs FD


MU = np.array([0.7, -1.2])
S = np.array([0.5, 1.3])


def _smooth_density(offset: float = 2.0) -> FunctionDensity:
    def log_q0(x):
        return -0.5 * np.sum(x * x, axis=1) - np.log(2 * np.pi)

    def grad_q0(x):
        return -x

    def log_t(x):
        return offset - 0.5 * np.sum(((x - MU) / S) ** 2, axis=1) + 0.8 * np.sin(2.0 * x[:, 0])

    def grad_t(x):
        g = -(x - MU) / S**2
        g[:, 0] += 1.6 * np.cos(2.0 * x[:, 0])
        return g

    return FunctionDensity(2, log_q0, log_t, grad_q0, grad_t)


@pytest.mark.parametrize("alpha,c", ALL_PATHS)
@pytest.mark.parametrize("tau", [0.15, 0.5, 0.85])
def test_gradient_matches_finite_differences(alpha, c, tau):
    dens = _smooth_density()
    rng = np.random.default_rng(3)
    x = rng.normal(0.0, 1.5, size=(40, 2))
    path = make_path(alpha, c)
    state = ParticleState.evaluate(dens, x, gradient=True)
    if alpha == 2.0:
        # make sure both branches of the power-mean formula are exercised
        xx = alpha * (state.delta - c)
        assert np.any(xx <= 1.0) and np.any(xx > 1.0)
    g = state.grad_log_density(path, tau)
    h = 1e-5
    fd = np.empty_like(x)
    for j in range(2):
        e = np.zeros(2)
        e[j] = h
        fp = ParticleState.evaluate(dens, x + e, gradient=False).log_density(path, tau)
        fm = ParticleState.evaluate(dens, x - e, gradient=False).log_density(path, tau)
        fd[:, j] = (fp - fm) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)
    # directional derivative along a random direction
    v = rng.normal(size=2)
    v /= np.linalg.norm(v)
    fp = ParticleState.evaluate(dens, x + h * v, gradient=False).log_density(path, tau)
    fm = ParticleState.evaluate(dens, x - h * v, gradient=False).log_density(path, tau)
    np.testing.assert_allclose(g @ v, (fp - fm) / (2 * h), rtol=1e-6, atol=1e-6)


def test_grad_log_density_requires_gradients():
    dens = _smooth_density()
    state = ParticleState.evaluate(dens, np.zeros((3, 2)), gradient=False)
    with pytest.raises(ValueError, match="gradient"):
        state.grad_log_density(make_path(0.0), 0.5)


# --------------------------------------------------------------------------- extreme Δ


@pytest.mark.parametrize("alpha", [0.0] + ALPHAS)
def test_no_overflow_or_nan_at_huge_delta(alpha):
    d = np.array([-1e4, 1e4, -1e300, 1e300, 0.0])
    p = make_path(alpha, 0.0)
    with warnings.catch_warnings(), np.errstate(over="raise", invalid="raise", divide="raise"):
        warnings.simplefilter("error")
        for tau in (0.0, 1e-12, 0.3, 0.5, 1 - 1e-12, 1.0):
            h = p.log_ratio(tau, d)
            w = p.gradient_weight(tau, d)
            assert np.all(np.isfinite(h)), (tau, h)
            assert np.all(np.isfinite(w)) and np.all((w >= 0) & (w <= 1)), (tau, w)
            lq = np.zeros_like(d)
            assert np.all(np.isfinite(p.log_density(tau, lq, d)))
    # the values at ±1e4 are the exact ones
    for tau in (0.3, 0.5):
        if alpha == 0.0:
            ref = tau * d[:2]
        else:
            ref = np.array([_exact_power_mean(tau, alpha, v) for v in d[:2]])
        np.testing.assert_allclose(p.log_ratio(tau, d[:2]), ref, rtol=1e-13)


@pytest.mark.parametrize("alpha", [0.0] + ALPHAS)
def test_minus_inf_delta(alpha):
    d = np.array([-np.inf, 0.0, -np.inf])
    p = make_path(alpha, 0.0)
    with warnings.catch_warnings(), np.errstate(over="raise", invalid="raise", divide="raise"):
        warnings.simplefilter("error")
        h0 = p.log_ratio(0.0, d)
        assert np.all(h0 == 0.0)  # γ_0 = q0 whatever Δ is
        for tau in (0.2, 0.7):
            h = p.log_ratio(tau, d)
            w = p.gradient_weight(tau, d)
            assert not np.any(np.isnan(h)) and not np.any(np.isnan(w))
            assert np.all((w >= 0) & (w <= 1))
            if alpha > 0:
                # ((1−τ) q0^α + 0)^{1/α}: finite, log(1 − τ)/α
                np.testing.assert_allclose(h[[0, 2]], np.log1p(-tau) / alpha, rtol=1e-15)
                assert np.all(w[[0, 2]] == 0.0)
            else:
                assert np.all(h[[0, 2]] == -np.inf)
        h1 = p.log_ratio(1.0, d)
        assert np.all(h1[[0, 2]] == -np.inf) and h1[1] == 0.0


@pytest.mark.parametrize("alpha,c", ALL_PATHS)
def test_log_increment_never_nan(alpha, c):
    d = np.array([-np.inf, np.inf, np.nan, -1e4, 1e4, -1e300, 1e300, 0.0, 3.0, -3.0])
    p = make_path(alpha, c)
    taus = [0.0, 1e-9, 0.1, 0.5, 0.9, 1 - 1e-9, 1.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i, t0 in enumerate(taus):
            for t1 in taus[i + 1:]:
                inc = p.log_increment(t0, t1, d)
                assert inc.shape == d.shape
                assert not np.any(np.isnan(inc)), (t0, t1, inc)
                # Δ = −inf: zero density from the first τ > 0 on (α ≤ 0) or at τ = 1 (α > 0)
                if t1 > 0 and (alpha <= 0 or t1 == 1.0):
                    assert inc[0] == -np.inf
                # finite Δ: the increment is the difference of log-ratios
                fin = np.isfinite(d)
                np.testing.assert_allclose(
                    inc[fin], p.log_ratio(t1, d[fin]) - p.log_ratio(t0, d[fin]), rtol=1e-15
                )
                lq = np.zeros_like(d)
                assert not np.any(np.isnan(p.log_density(t1, lq, d)))


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0, 2.0])
def test_nan_delta_is_treated_as_minus_inf(alpha):
    p = make_path(alpha, 0.0)
    d_nan = np.array([np.nan])
    d_inf = np.array([-np.inf])
    for t0, t1 in [(0.0, 0.5), (0.5, 1.0), (0.0, 1.0)]:
        np.testing.assert_array_equal(p.log_increment(t0, t1, d_nan), p.log_increment(t0, t1, d_inf))
        np.testing.assert_array_equal(p.log_density(t1, np.zeros(1), d_nan),
                                      p.log_density(t1, np.zeros(1), d_inf))


@pytest.mark.parametrize("alpha", [-0.5, -2.0])
def test_nan_delta_is_treated_as_minus_inf_negative_alpha(alpha):
    test_nan_delta_is_treated_as_minus_inf(alpha)


@pytest.mark.parametrize("alpha,c", ALL_PATHS)
def test_log_increment_telescopes(alpha, c):
    d = np.random.default_rng(5).normal(0, 8, 50)
    p = make_path(alpha, c)
    taus = np.linspace(0, 1, 11)
    total = sum(p.log_increment(a, b, d) for a, b in zip(taus[:-1], taus[1:]))
    np.testing.assert_allclose(total, d - c, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- make_path


def test_make_path_types():
    assert isinstance(make_path(), GeometricPath)
    assert isinstance(make_path(0), GeometricPath)
    p = make_path(np.float32(0.5), c=2)
    assert isinstance(p, PowerMeanPath) and p.alpha == 0.5 and p.c == 2.0
    assert p.describe() == "power_mean(alpha=0.5)"
    assert make_path(0.0).describe() == "geometric"


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, float("nan")])
def test_make_path_non_finite_alpha(bad):
    with pytest.raises(ValueError, match="alpha"):
        make_path(bad)


@pytest.mark.parametrize("bad", [None, "abc", object(), [0.5, 1.0], {"a": 1}])
def test_make_path_non_number_alpha(bad):
    with pytest.raises(TypeError, match="alpha"):
        make_path(bad)


@pytest.mark.parametrize("alpha", [0.0, 0.5])
@pytest.mark.parametrize("bad_c", [np.nan, np.inf])
def test_make_path_non_finite_c(alpha, bad_c):
    with pytest.raises(ValueError, match="c must be finite"):
        make_path(alpha, bad_c)


def test_path_classes_validate_alpha():
    with pytest.raises(ValueError):
        GeometricPath(0.5, 0.0)
    with pytest.raises(ValueError):
        PowerMeanPath(0.0, 0.0)
    with pytest.raises(ValueError):
        PowerMeanPath(np.nan, 0.0)


# ----------------------------------------------------------------------------- one τ per particle
PP_PATHS = [make_path(0.0), make_path(0.0, c=0.4), make_path(0.5, c=0.3), make_path(-0.7, c=-0.2), make_path(1.0)]


def _per_particle_case(seed=0, n=300):
    rng = np.random.default_rng(seed)
    taus = np.array([0.0, 1e-4, 0.3, 0.77, 1.0])[rng.integers(0, 5, size=n)]
    delta = rng.normal(-2.0, 3.0, size=n)
    delta[:4] = [-np.inf, np.nan, 50.0, -1e4]
    return taus, delta


@pytest.mark.parametrize("p", PP_PATHS, ids=lambda p: p.describe())
def test_per_particle_methods_equal_the_scalar_ones(p):
    taus, delta = _per_particle_case()
    taus_from = np.maximum(taus - 0.2, 0.0)
    one = [slice(i, i + 1) for i in range(delta.size)]
    want_h = np.array([p.log_ratio(t, delta[s])[0] for t, s in zip(taus, one, strict=True)])
    want_w = np.array([p.gradient_weight(t, delta[s])[0] for t, s in zip(taus, one, strict=True)])
    want_inc = np.array(
        [p.log_increment(f, t, delta[s])[0] for f, t, s in zip(taus_from, taus, one, strict=True)]
    )
    np.testing.assert_allclose(p.log_ratio_per_particle(taus, delta), want_h, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(p.gradient_weight_per_particle(taus, delta), want_w, rtol=1e-14, atol=0)
    np.testing.assert_allclose(
        p.log_increment_per_particle(taus_from, taus, delta), want_inc, rtol=1e-14, atol=1e-14
    )
    # one τ for all particles broadcasts
    np.testing.assert_allclose(p.log_ratio_per_particle(0.3, delta), p.log_ratio(0.3, delta), rtol=1e-14)


@pytest.mark.parametrize("p", PP_PATHS, ids=lambda p: p.describe())
def test_closed_forms_equal_the_generic_level_by_level_ones(p):
    """A path's own closed forms (the geometric path's) give the generic methods' bits."""
    taus, delta = _per_particle_case(1)
    ladder = np.array([0.0, 0.01, 0.2, 0.5, 0.9, 1.0])
    base = AnnealingPath
    np.testing.assert_array_equal(
        p.log_ratio_per_particle(taus, delta), base.log_ratio_per_particle(p, taus, delta)
    )
    np.testing.assert_array_equal(
        p.gradient_weight_per_particle(taus, delta), base.gradient_weight_per_particle(p, taus, delta)
    )
    np.testing.assert_array_equal(p.ladder_log_ratio(ladder, delta), base.ladder_log_ratio(p, ladder, delta))
    np.testing.assert_array_equal(
        p.ladder_tau_derivative(ladder, delta), base.ladder_tau_derivative(p, ladder, delta)
    )


@pytest.mark.parametrize("p", PP_PATHS, ids=lambda p: p.describe())
def test_tau_derivative_against_finite_differences(p):
    delta = np.random.default_rng(2).normal(-1.0, 2.0, size=50)
    assert p.has_tau_derivative
    for t in (0.05, 0.4, 0.8):
        h = 1e-6
        fd = (p.log_ratio(t + h, delta) - p.log_ratio(t - h, delta)) / (2 * h)
        np.testing.assert_allclose(p.tau_derivative(t, delta), fd, rtol=1e-6, atol=1e-6)
    ladder = np.array([0.0, 0.3, 1.0])
    dk = p.ladder_tau_derivative(ladder, delta)
    assert dk.shape == (3, delta.size)
    for k, t in enumerate(ladder):
        np.testing.assert_allclose(dk[k], p.tau_derivative(t, delta), rtol=1e-14)
    assert p.constant_tau_derivative == (p.alpha == 0.0)


def test_a_path_without_tau_derivative_says_so():
    @dataclass(frozen=True)
    class Scaled(AnnealingPath):
        """h = τ² (Δ − c): a valid path with no tau_derivative."""

        name = "scaled"

        def log_ratio(self, tau, delta):
            return tau**2 * (np.where(np.isnan(delta), -np.inf, delta) - self.c)

        def gradient_weight(self, tau, delta):
            return np.full(np.shape(delta), tau**2)

    p = Scaled()
    assert not p.has_tau_derivative
    with pytest.raises(TypeError, match="tau_derivative"):
        p.tau_derivative(0.5, np.zeros(3))
    # the generic per-particle methods work from the scalar ones
    taus, delta = np.array([0.0, 0.5, 1.0]), np.array([1.0, 2.0, -np.inf])
    np.testing.assert_array_equal(p.log_ratio_per_particle(taus, delta), [0.0, 0.5, -np.inf])
    view = ArrayTauPath(p)
    np.testing.assert_array_equal(view.log_density(taus, np.ones(3), delta), [1.0, 1.5, -np.inf])
    np.testing.assert_array_equal(view.gradient_weight(taus, delta), [0.0, 0.25, 1.0])
