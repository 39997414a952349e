"""The synthetic targets of benchmarks/bench_synthetic.py (pymc_crais.validation.synthetic_targets): normalized, with correct gradients."""

import itertools

import numpy as np
import pytest
from scipy import integrate

from pymc_crais.validation.synthetic_targets import (
    EXTRA_TARGETS,
    TARGETS,
    make_density,
    make_target,
    mixture_means,
)

NAMES = sorted({**TARGETS, **EXTRA_TARGETS})


def _density_1d(name):
    t = make_target(name, 1)
    return lambda v: float(np.exp(t.log_density(np.array([[v]]))[0]))


@pytest.mark.parametrize("name", NAMES)
def test_normalized_in_one_dimension(name):
    # d = 1 by adaptive quadrature over R (the integrand is smooth except Laplace at 0,
    # which is split there); quad's own error estimate is far below the tolerance
    f = _density_1d(name)
    pts = [0.0]
    if name.startswith("mixture"):
        pts = sorted([0.0, *mixture_means(1, 3.0 if name == "mixture_wide" else 1.0)[:, 0]])
    edges = [-np.inf, *pts, np.inf]
    total = sum(integrate.quad(f, a, b, limit=200)[0] for a, b in itertools.pairwise(edges))
    assert total == pytest.approx(1.0, abs=1e-6)
    assert make_target(name, 1).log_z == 0.0


@pytest.mark.parametrize("name, half_width, h", [("normal", 1.0, 0.01), ("mixture", 12.0, 0.1), ("mixture_wide", 16.0, 0.1)])
def test_normalized_in_two_dimensions(name, half_width, h):
    # d = 2 (the mixture's means depend on d) by the trapezoid rule on a grid covering all
    # but a negligible mass (> 9 standard deviations beyond every mean); for these
    # smooth, rapidly decaying densities; for a Gaussian of standard deviation σ the rule's
    # error is of order exp(−2π²σ²/h²), negligible at h = σ/10
    t = make_target(name, 2)
    g = np.arange(-half_width, half_width + h / 2, h)
    xx, yy = np.meshgrid(g, g, indexing="ij")
    dens = np.exp(t.log_density(np.column_stack([xx.ravel(), yy.ravel()]))).reshape(xx.shape)
    total = integrate.trapezoid(integrate.trapezoid(dens, g, axis=1), g)
    assert total == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("name", ["laplace", "student_t"])
def test_product_targets_factorize(name):
    # the product targets are sums of the 1-D log-densities, so the 1-D normalization
    # above implies it in every d
    d = 5
    x = np.random.default_rng(1).standard_t(3.0, size=(7, d)) * 2.0
    t, t1 = make_target(name, d), make_target(name, 1)
    expected = sum(t1.log_density(x[:, [j]]) for j in range(d))
    np.testing.assert_allclose(t.log_density(x), expected, rtol=1e-12)


def test_normal_is_exactly_normalized_in_high_dimension():
    # the Gaussian target and q0 have closed forms: at x = 0, log N(0; 0, σ²I) = −d log σ − d/2 log 2π
    d = 128
    t = make_target("normal", d)
    expected = -d * np.log(0.1) - 0.5 * d * np.log(2 * np.pi)
    assert t.log_density(np.zeros((1, d)))[0] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_gradient_matches_finite_differences(name):
    rng = np.random.default_rng(3)
    d = 6
    t = make_target(name, d)
    x = rng.normal(0.0, 1.5, size=(5, d))
    if name == "laplace":
        x = np.where(np.abs(x) < 1e-3, 0.5, x)  # away from the kink at 0
    g = t.grad_log_density(x)
    h = 1e-6
    fd = np.empty_like(x)
    for j in range(d):
        e = np.zeros(d)
        e[j] = h
        fd[:, j] = (t.log_density(x + e) - t.log_density(x - e)) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-6)


def test_density_wraps_q0_and_target():
    d = 4
    t = make_target("student_t", d)
    dens = make_density(t)
    x = np.random.default_rng(0).normal(size=(3, d))
    ev = dens.evaluate(x, gradient=True)
    log_q0 = -0.5 * (x * x).sum(axis=1) - 0.5 * d * np.log(2 * np.pi)
    np.testing.assert_allclose(ev.log_q0, log_q0)
    np.testing.assert_allclose(ev.delta, t.log_density(x) - log_q0)
    np.testing.assert_allclose(ev.grad_delta, t.grad_log_density(x) + x)


def test_mixture_means_are_reproducible():
    np.testing.assert_array_equal(mixture_means(5), mixture_means(5))
    assert mixture_means(5).shape == (8, 5)
