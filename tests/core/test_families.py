"""Importance draws in families (core/families.py): family weights, the between/within split
of their variance, and the copies it predicts a target error for."""

import numpy as np
import pytest

from pymc_crais.core.families import (
    copies_for_mcse,
    family_log_weights,
    family_size,
    family_variances,
    predicted_family_mcse,
)


def test_family_log_weights_average_each_family():
    lw = np.log(np.array([1.0, 3.0, 2.0, 2.0, 8.0]))
    np.testing.assert_allclose(family_log_weights(lw, np.array([0, 0, 1, 1, 2])), np.log([2, 2, 8]))


def test_family_size_is_the_largest_divisor_up_to_copies():
    assert family_size(2000, 16) == 16
    assert family_size(2000, 12) == 10
    assert family_size(7, 4) == 1


def _two_level(rng, m, c, sd_between, sd_within):
    # log w = a_θ + b_θx: lognormal parts, so B and W have closed forms
    a = rng.normal(0, sd_between, m)[:, None]
    b = rng.normal(0, sd_within, (m, c))
    return (a + b).ravel(), np.repeat(np.arange(m), c)


def test_family_variances_match_the_two_level_closed_form():
    rng = np.random.default_rng(3)
    sb, sw, c = 0.4, 0.3, 4
    lw, fam = _two_level(rng, 200_000, c, sb, sw)
    b, w = family_variances(lw, fam)
    # w = e^a e^b, mean 1 after normalizing by E[e^a] E[e^b]
    ea2 = np.exp(sb**2)  # E[e^{2a}] / E[e^a]^2
    eb2 = np.exp(sw**2)
    assert b == pytest.approx(ea2 - 1, rel=0.03)  # Var E[w | θ] = Var e^a (normalized)
    assert w == pytest.approx(ea2 * (eb2 - 1), rel=0.03)  # E Var[w | θ]
    # and the family means' relative variance is B + W / c
    means = np.exp(family_log_weights(lw, fam))
    assert np.var(means / means.mean()) == pytest.approx(b + w / c, rel=0.02)


def test_an_exact_conditional_has_no_within_part():
    rng = np.random.default_rng(4)
    a = rng.normal(0, 0.5, 1000)
    b, w = family_variances(np.repeat(a, 4), np.repeat(np.arange(1000), 4))
    assert w == pytest.approx(0.0, abs=1e-12)
    assert b > 0.2


def test_family_variances_edge_cases():
    assert family_variances(np.zeros(4), np.arange(4)) == (np.inf, np.inf)  # copies of 1
    assert family_variances(np.full(4, -np.inf), np.repeat([0, 1], 2)) == (np.inf, np.inf)
    with pytest.raises(ValueError, match="equal size"):
        family_variances(np.zeros(5), np.array([0, 0, 1, 1, 1]))
    # a weight of zero (non-finite log) counts as zero
    b, w = family_variances(np.array([0.0, -np.inf, 0.0, 0.0]), np.repeat([0, 1], 2))
    assert np.isfinite(b) and w > 0


def test_copies_for_mcse_takes_the_most_copies_that_meet_the_target():
    # B = 0.32, W = 0: predicted sqrt(0.32 c / 8000) <= 0.02 for c <= 10
    assert copies_for_mcse(0.32, 0.0, 2000, 4, 0.02, low=4, high=16) == 10
    assert predicted_family_mcse(0.32, 0.0, 10, 8000) == pytest.approx(0.02)
    # nothing meets it: the floor, as a divisor of n
    assert copies_for_mcse(5.0, 1.0, 2000, 4, 0.02, low=4, high=16) == 4
    assert copies_for_mcse(5.0, 1.0, 999, 4, 0.02, low=4, high=16) == 3
    # a free copy: all of them
    assert copies_for_mcse(0.0, 0.5, 2000, 4, 0.02, low=4, high=16) == 16


def test_an_infinite_weight_is_not_hidden():
    lw = np.array([0.0, np.inf, 0.0, 0.0])
    assert family_variances(lw, np.repeat([0, 1], 2)) == (np.inf, np.inf)
