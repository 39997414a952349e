"""Log-space weight helpers: logsumexp, ESS, normalization, the delta-method variance."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.special import logsumexp as sp_logsumexp

from pymc_crais.core.weights import (
    clean_log_weights,
    ess,
    ess_from_log_weights,
    log_mean_exp,
    log_z_relative_variance,
    logsumexp,
    normalize_log_weights,
    normalized_weights,
)


@pytest.fixture
def no_warnings():
    with warnings.catch_warnings(), np.errstate(divide="raise", invalid="raise", over="raise"):
        warnings.simplefilter("error")
        yield


def _cases():
    rng = np.random.default_rng(0)
    a = rng.normal(0, 3, 50)
    b = rng.normal(-1e4, 2, 50)
    c = b.copy()
    c[::3] = -np.inf
    d = np.array([-1e4, -1e4 - 1e-9, -np.inf, -1e4 + 700.0])
    e = np.array([-np.inf, 5.0])
    f = np.array([800.0, 799.0, -800.0])  # exp would overflow naively
    g = np.array([3.0])
    return {"normal": a, "minus1e4": b, "minus1e4-inf": c, "mixed": d, "one-finite": e,
            "big": f, "single": g}


CASES = _cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_logsumexp_matches_scipy(name, no_warnings):
    a = CASES[name]
    got = logsumexp(a)
    assert isinstance(got, float)
    np.testing.assert_allclose(got, sp_logsumexp(a), rtol=1e-14, atol=0)


@pytest.mark.parametrize("name", sorted(CASES))
def test_log_mean_exp_matches_scipy(name, no_warnings):
    a = CASES[name]
    np.testing.assert_allclose(log_mean_exp(a), sp_logsumexp(a) - np.log(a.size), rtol=1e-14)


def test_logsumexp_all_minus_inf(no_warnings):
    for n in (1, 5):
        a = np.full(n, -np.inf)
        assert logsumexp(a) == -np.inf
        assert log_mean_exp(a) == -np.inf


def test_logsumexp_axis(no_warnings):
    rng = np.random.default_rng(3)
    a = rng.normal(-1e4, 5, size=(4, 6))
    a[1, :] = -np.inf  # a row of zeros
    a[:, 2] = -np.inf  # a column of zeros
    a[0, 0] = -np.inf
    for axis in (0, 1):
        got = logsumexp(a, axis=axis)
        with np.errstate(divide="ignore"):
            ref = sp_logsumexp(a, axis=axis)
        assert got.shape == ref.shape
        np.testing.assert_allclose(got, ref, rtol=1e-14)
        n = a.shape[axis]
        np.testing.assert_allclose(log_mean_exp(a, axis=axis), ref - np.log(n), rtol=1e-14)
    assert logsumexp(a, axis=1)[1] == -np.inf
    assert logsumexp(a, axis=0)[2] == -np.inf


def test_logsumexp_shift_invariance(no_warnings):
    a = CASES["normal"]
    np.testing.assert_allclose(logsumexp(a - 1e4), logsumexp(a) - 1e4, rtol=1e-15)


# --------------------------------------------------------------------------- clean


def test_clean_log_weights():
    src = np.array([1.0, np.nan, np.inf, -np.inf, -2.0])
    out = clean_log_weights(src)
    np.testing.assert_array_equal(out, [1.0, -np.inf, -np.inf, -np.inf, -2.0])
    assert np.isnan(src[1])  # input untouched (copy)


# --------------------------------------------------------------------------- ESS


@pytest.mark.parametrize("name", ["normal", "one-finite", "single"])
def test_ess_from_log_weights_matches_linear_space(name, no_warnings):
    lw = CASES[name]
    with np.errstate(under="ignore"):
        ref = ess(np.exp(lw))
    np.testing.assert_allclose(ess_from_log_weights(lw), ref, rtol=1e-12)


def test_ess_far_out_weights(no_warnings):
    lw = CASES["minus1e4-inf"]
    w = np.exp(lw - np.max(lw))
    ref = np.sum(w) ** 2 / np.sum(w * w)
    np.testing.assert_allclose(ess_from_log_weights(lw), ref, rtol=1e-12)
    assert 1.0 <= ess_from_log_weights(lw) <= lw.size


@pytest.mark.parametrize("n", [1, 7, 1000])
@pytest.mark.parametrize("level", [0.0, -1e4, 600.0])
def test_ess_equal_weights_is_n(n, level, no_warnings):
    # log-space round-off: ~|level|·eps absolute error in log ESS
    rtol = 1e-13 + 8 * abs(level) * np.finfo(float).eps
    np.testing.assert_allclose(ess_from_log_weights(np.full(n, level)), n, rtol=rtol)
    np.testing.assert_allclose(ess(np.full(n, 0.3)), n, rtol=1e-12)


@pytest.mark.parametrize("level", [0.0, -1e4, 600.0])
def test_ess_one_nonzero_is_one(level, no_warnings):
    lw = np.full(20, -np.inf)
    lw[13] = level
    assert ess_from_log_weights(lw) == 1.0
    w = np.zeros(20)
    w[13] = 2.5
    assert ess(w) == 1.0


def test_ess_k_equal_nonzero():
    lw = np.full(10, -np.inf)
    lw[[1, 4, 7]] = -5.0
    np.testing.assert_allclose(ess_from_log_weights(lw), 3.0, rtol=1e-14)


def test_ess_all_zero(no_warnings):
    assert ess_from_log_weights(np.full(5, -np.inf)) == 0.0
    assert ess_from_log_weights(np.array([np.nan, np.nan])) == 0.0
    assert ess(np.zeros(5)) == 0.0


def test_ess_nan_is_zero_weight(no_warnings):
    assert ess_from_log_weights(np.array([np.nan, 0.0, 0.0, np.inf])) == pytest.approx(2.0,
                                                                                        rel=1e-14)


# --------------------------------------------------------------------------- normalize


def test_normalize_log_weights(no_warnings):
    lw = CASES["minus1e4-inf"]
    out = normalize_log_weights(lw)
    np.testing.assert_allclose(sp_logsumexp(out), 0.0, atol=1e-11)  # |lw| ~ 1e4: ~1e4·eps round-off
    np.testing.assert_array_equal(np.isneginf(out), np.isneginf(lw))
    fin = np.isfinite(lw)
    np.testing.assert_allclose(out[fin], lw[fin] - sp_logsumexp(lw), rtol=1e-14)

    w = normalized_weights(lw)
    assert np.all(w >= 0) and w.sum() == pytest.approx(1.0, abs=1e-14)
    assert np.all(w[~fin] == 0.0)
    ref = np.exp(lw[fin] - lw[fin].max())
    np.testing.assert_allclose(w[fin], ref / ref.sum(), rtol=1e-12)


@pytest.mark.parametrize(
    "lw", [np.full(4, -np.inf), np.array([np.nan, np.nan]), np.array([np.nan, -np.inf, np.inf])]
)
def test_normalize_all_zero_raises(lw):
    with pytest.raises(FloatingPointError):
        normalize_log_weights(lw)
    with pytest.raises(FloatingPointError):
        normalized_weights(lw)


# --------------------------------------------------------------------------- delta method


@pytest.mark.parametrize("name", ["normal", "minus1e4", "minus1e4-inf", "one-finite"])
def test_log_z_relative_variance_formula(name, no_warnings):
    lw = CASES[name]
    w = np.exp(lw - np.max(lw))
    e = np.sum(w) ** 2 / np.sum(w * w)
    np.testing.assert_allclose(log_z_relative_variance(lw), 1.0 / e - 1.0 / lw.size,
                               rtol=1e-10, atol=1e-15)


def test_log_z_relative_variance_special_values(no_warnings):
    assert log_z_relative_variance(np.zeros(50)) == pytest.approx(0.0, abs=1e-15)  # equal w
    assert log_z_relative_variance(np.zeros(50)) >= 0.0
    assert log_z_relative_variance(np.full(3, -np.inf)) == np.inf
    lw = np.full(4, -np.inf)
    lw[0] = 1.0
    assert log_z_relative_variance(lw) == pytest.approx(1.0 - 0.25, rel=1e-14)


def test_log_z_relative_variance_is_the_variance_of_log_mean_w():
    # i.i.d. lognormal weights: the average estimate should match the empirical
    # Var[log mean w] over replications (delta method, N large).
    rng = np.random.default_rng(2024)
    reps, n, sigma = 2000, 500, 0.5
    lw = rng.normal(0.0, sigma, size=(reps, n))
    est = np.array([log_z_relative_variance(row) for row in lw])
    lz = sp_logsumexp(lw, axis=1) - np.log(n)
    emp = lz.var(ddof=1)
    # SE of the sample variance of ~Gaussian lz: emp·sqrt(2/(R−1)); of the mean estimate:
    se = np.hypot(emp * np.sqrt(2.0 / (reps - 1)), est.std(ddof=1) / np.sqrt(reps))
    exact = np.expm1(sigma**2) / n  # Var[w] / (N E[w]²)
    assert abs(est.mean() - emp) < 5 * se
    assert abs(est.mean() - exact) < 5 * est.std(ddof=1) / np.sqrt(reps) + 2 * exact / n
