"""Combining per-chain log Z estimates (mean of Ẑ, within/between MCSE)."""

from __future__ import annotations

import warnings
from decimal import Decimal, localcontext

import numpy as np
import pytest

from pymc_crais.core.estimators import combine_chain_estimates


def _log_mean_exp_decimal(lz):
    with localcontext() as ctx:
        ctx.prec = 50
        vals = [Decimal(float(v)).exp() for v in lz]
        return float((sum(vals) / len(vals)).ln())


def test_one_chain():
    value, mcse, det = combine_chain_estimates([-123.456], [0.04])
    assert value == -123.456
    assert mcse == pytest.approx(0.2, rel=1e-15)  # sqrt(within variance)
    assert det["mcse_within"] == pytest.approx(0.2, rel=1e-15)
    assert np.isnan(det["mcse_between"])
    assert det["n_chains"] == 1


def test_one_chain_without_within_variance():
    value, mcse, det = combine_chain_estimates(np.array([3.0]))
    assert value == 3.0
    assert np.isnan(mcse) and np.isnan(det["mcse_within"]) and np.isnan(det["mcse_between"])


@pytest.mark.parametrize("level", [0.0, -1e4, 700.0])
def test_equal_chains(level):
    lz = np.full(5, level)
    value, mcse, det = combine_chain_estimates(lz, np.full(5, 0.01))
    assert value == pytest.approx(level, abs=1e-15 + 4 * abs(level) * np.finfo(float).eps)
    assert det["mcse_between"] == 0.0
    # within: p_c = 1/5 for every chain, sqrt(5 · (1/25) · 0.01) = sqrt(0.002)
    assert det["mcse_within"] == pytest.approx(np.sqrt(0.002), rel=1e-12)
    assert mcse == det["mcse_within"]


@pytest.mark.parametrize("shift", [0.0, -1e4, -1e4 - 0.5])
def test_mean_of_z_against_direct_computation(shift):
    base = np.array([0.0, 1.0, -2.0, 0.3, -0.7])
    lz = base + shift
    v = np.array([0.01, 0.04, 0.02, np.nan, 0.03])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value, mcse, det = combine_chain_estimates(lz, v)
    # value: log of the mean of Z_c (not of the logs); exp(lz) underflows at −1e4, so use
    # the shifted values and decimal arithmetic as two independent references
    z = np.exp(base)
    ref = shift + np.log(z.mean())
    tol = 1e-13 + 4 * abs(shift) * np.finfo(float).eps
    assert value == pytest.approx(ref, abs=tol)
    assert value == pytest.approx(_log_mean_exp_decimal(lz), abs=tol)
    assert value != pytest.approx(np.mean(lz), abs=1e-3)  # not the mean of the logs
    # between (reported in the details only): sd(Z_c) / (sqrt(C) mean(Z_c)), scale-free
    between = z.std(ddof=1) / (np.sqrt(5) * z.mean())
    assert det["mcse_between"] == pytest.approx(between, rel=1e-12)
    # within: sqrt(sum p_c² v_c) over the chains with a finite v_c, p_c = Z_c / sum Z
    p = z / z.sum()
    ok = np.isfinite(v)
    within = np.sqrt(np.sum(p[ok] ** 2 * v[ok]))
    assert det["mcse_within"] == pytest.approx(within, rel=1e-12)
    assert mcse == pytest.approx(within, rel=1e-12)  # the pooled within-chain error
    assert det["n_chains"] == 5


def test_mcse_is_the_within_error_and_the_spread_only_a_fallback():
    lz = np.array([-5.0, -5.1])
    _, mcse_small_v, det = combine_chain_estimates(lz, [1e-8, 1e-8])
    assert mcse_small_v == det["mcse_within"] < det["mcse_between"]  # spread is not used
    _, mcse_big_v, det = combine_chain_estimates(lz, [4.0, 4.0])
    assert mcse_big_v == det["mcse_within"] > det["mcse_between"]
    _, mcse_none, det = combine_chain_estimates(lz)
    assert mcse_none == det["mcse_between"] and np.isnan(det["mcse_within"])
    _, mcse_f, det = combine_chain_estimates(lz, [4.0, 4.0], [2.25, 2.25])
    assert mcse_f == pytest.approx(1.5 * mcse_big_v) and det["tail_factor"] == pytest.approx(2.25)


def test_dominant_chain():
    # one chain 50 nats above the rest carries all the evidence
    lz = np.array([-1e4, -1e4 + 50.0, -1e4 - 3.0])
    value, _, det = combine_chain_estimates(lz, [0.5, 0.01, 0.5])
    assert value == pytest.approx(-1e4 + 50.0 - np.log(3.0), abs=1e-9)
    assert det["mcse_within"] == pytest.approx(0.1, rel=1e-9)
    # Ẑ ∝ (0, 1, 0): sd = √(1/3), mean = 1/3, so sd/(√3 mean) = 1
    assert det["mcse_between"] == pytest.approx(1.0, rel=1e-9)


def test_all_nan_within_variance_is_ignored():
    value, mcse, det = combine_chain_estimates([1.0, 1.2], [np.nan, np.nan])
    assert np.isnan(det["mcse_within"])
    assert mcse == det["mcse_between"]


@pytest.mark.parametrize("bad", [[], np.array([]), np.zeros((0, 3))])
def test_empty_raises(bad):
    with pytest.raises(ValueError, match="empty"):
        combine_chain_estimates(bad)


@pytest.mark.parametrize("bad", [[1.0, np.nan], [np.inf, 1.0], [-np.inf, 0.0], [np.nan]])
def test_non_finite_raises(bad):
    with pytest.raises(ValueError, match="finite"):
        combine_chain_estimates(bad)


def test_within_variance_shape_mismatch():
    with pytest.raises(ValueError, match="one entry per chain"):
        combine_chain_estimates([1.0, 2.0], [0.1])
