"""Resampling schemes (docs/algorithms.md, "Tempered SMC"): unbiased offspring counts and scheme-specific
structure."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_crais.core.resampling import (
    RESAMPLERS,
    get_resampler,
    multinomial,
    residual,
    stratified,
    systematic,
)

SCHEMES = ["systematic", "stratified", "multinomial", "residual"]
# uneven, one exact zero, n·w never an integer for n = 10 (except the zero)
W10 = np.array([0.31, 0.0, 0.05, 0.17, 0.02, 0.09, 0.13, 0.11, 0.07, 0.05])
N_REPS = 4000


def _counts(name, weights, n, reps=N_REPS, seed=0):
    fn = get_resampler(name)
    rng = np.random.default_rng(seed)
    out = np.empty((reps, weights.size), dtype=np.int64)
    for r in range(reps):
        idx = fn(rng, weights, n)
        assert idx.shape == (n,)
        assert np.issubdtype(idx.dtype, np.integer)
        assert idx.min() >= 0 and idx.max() < weights.size
        out[r] = np.bincount(idx, minlength=weights.size)
    return out


@pytest.fixture(scope="module", params=[(10, 0), (25, 1), (7, 2)], ids=["n10", "n25", "n7"])
def all_counts(request):
    n, seed = request.param
    return n, {s: _counts(s, W10, n, seed=seed) for s in SCHEMES}


@pytest.mark.parametrize("scheme", SCHEMES)
def test_unbiased_offspring_counts(all_counts, scheme):
    n, counts = all_counts
    counts = counts[scheme]
    assert np.all(counts.sum(axis=1) == n)
    mean = counts.mean(axis=0)
    se = counts.std(axis=0, ddof=1) / np.sqrt(N_REPS)
    expected = n * W10
    z = np.abs(mean - expected) / np.where(se > 0, se, np.inf)
    # where the count never varies it must be exactly n·w (only possible for integer n·w)
    assert np.all((se > 0) | (mean == expected)), (mean, expected)
    assert np.all(z < 5.0), (scheme, mean, expected, se)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_zero_weight_never_selected(all_counts, scheme):
    _, counts = all_counts
    assert np.all(counts[scheme][:, W10 == 0.0] == 0)


def test_systematic_counts_are_floor_or_ceil(all_counts):
    n, counts = all_counts
    c = counts["systematic"]
    nw = n * W10
    assert np.all((c == np.floor(nw)) | (c == np.ceil(nw)))


def test_residual_keeps_deterministic_copies(all_counts):
    n, counts = all_counts
    c = counts["residual"]
    assert np.all(c >= np.floor(n * W10))


def test_stratified_counts_within_one_of_two(all_counts):
    # a stratum [k/n, (k+1)/n) meets at most ceil(n w)+1 cells: |count − n w| < 2
    n, counts = all_counts
    assert np.all(np.abs(counts["stratified"] - n * W10) < 2)


def test_multinomial_count_variance(all_counts):
    # Var[count_i] = n w_i (1 − w_i); the sample variance has SE sqrt((μ4 − σ⁴)/R)
    n, counts = all_counts
    c = counts["multinomial"].astype(float)
    p = W10
    var = n * p * (1 - p)
    # fourth central moment of a Binomial(n, p)
    mu4 = n * p * (1 - p) * (1 + 3 * (n - 2) * p * (1 - p))
    se = np.sqrt(np.maximum(mu4 - var**2, 0) / N_REPS)
    s2 = c.var(axis=0, ddof=1)
    ok = se > 0
    assert np.all(np.abs(s2[ok] - var[ok]) < 5 * se[ok])


def test_systematic_uniform_weights_is_a_permutation_of_all():
    rng = np.random.default_rng(11)
    for _ in range(200):
        idx = systematic(rng, np.full(8, 0.125), 8)
        np.testing.assert_array_equal(np.sort(idx), np.arange(8))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_unnormalized_weights_are_normalized(scheme):
    fn = get_resampler(scheme)
    a = fn(np.random.default_rng(5), W10 * 37.0, 10)
    b = fn(np.random.default_rng(5), W10, 10)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_single_nonzero_weight(scheme):
    fn = get_resampler(scheme)
    w = np.zeros(6)
    w[4] = 1.0
    idx = fn(np.random.default_rng(0), w, 9)
    np.testing.assert_array_equal(idx, np.full(9, 4))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_deterministic_for_a_seed(scheme):
    fn = get_resampler(scheme)
    a = fn(np.random.default_rng(42), W10, 10)
    b = fn(np.random.default_rng(42), W10, 10)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize(
    "weights",
    [
        np.array([0.5, -0.1, 0.6]),
        np.array([0.5, np.nan, 0.5]),
        np.array([0.5, np.inf, 0.5]),
        np.zeros(4),
        np.array([]),
        np.ones((2, 2)),
    ],
    ids=["negative", "nan", "inf", "all-zero", "empty", "2d"],
)
def test_bad_weights(scheme, weights):
    fn = get_resampler(scheme)
    with pytest.raises(ValueError):
        fn(np.random.default_rng(0), weights, 3)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_bad_n(scheme):
    with pytest.raises(ValueError, match="n must"):
        get_resampler(scheme)(np.random.default_rng(0), W10, 0)


def test_get_resampler():
    assert get_resampler("systematic") is systematic
    assert get_resampler("stratified") is stratified
    assert get_resampler("multinomial") is multinomial
    assert get_resampler("residual") is residual
    assert sorted(RESAMPLERS) == sorted(SCHEMES)
    with pytest.raises(ValueError) as err:
        get_resampler("bogus")
    for s in SCHEMES:
        assert s in str(err.value)
