"""Pareto k̂ of pymc_crais.tail_stats against arviz_stats' (the reference implementation)."""

import numpy as np
import pytest

from pymc_crais import tail_stats as ts


def _arviz_khat(log_weights) -> float:
    from arviz_stats.base import array_stats

    lw = np.asarray(log_weights, dtype=np.float64)
    lw = lw[np.isfinite(lw)]
    w = np.exp(lw - lw.max())
    try:
        return float(array_stats.pareto_khat(w, chain_axis=None, r_eff=1.0, tail="right"))
    except ValueError:  # all tail values equal
        return float("nan")


def _cases():
    rng = np.random.default_rng(20261123)
    out = []
    for n in (25, 100, 226, 1000, 2000, 8000):
        out.append(rng.standard_normal(n))  # light tail
        out.append(3.0 * rng.standard_normal(n))  # log-normal weights, heavy
        out.append(np.log(rng.pareto(1.5, n) + 1e-3))  # k ≈ 0.67
        out.append(np.log(rng.pareto(0.5, n) + 1e-3))  # k ≈ 2
        out.append(-rng.exponential(size=n))  # bounded weights, k < 0
    lw = rng.standard_normal(500)
    lw[:50] = -np.inf  # zero weights are left out
    out.append(lw)
    out.append(np.round(rng.standard_normal(1000), 1))  # ties
    return out


@pytest.mark.parametrize("i", range(32))
def test_pareto_khat_equals_arviz_stats(i):
    lw = _cases()[i]
    ours, ref = ts.pareto_khat(lw), _arviz_khat(lw)
    if np.isnan(ref):
        assert np.isnan(ours)
    else:
        assert ours == pytest.approx(ref, rel=1e-12, abs=1e-12)


def test_pareto_khat_edge_cases():
    assert np.isnan(ts.pareto_khat(np.zeros(1000)))  # equal weights: no tail
    assert np.isnan(ts.pareto_khat(np.arange(24.0)))  # too few
    assert np.isnan(ts.pareto_khat(np.full(100, -np.inf)))
    # a tail whose first quartile equals its minimum is no Pareto tail (arviz: NaN too)
    lw = np.zeros(1000)
    lw[-5:] = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert np.isnan(ts.pareto_khat(lw)) and np.isnan(_arviz_khat(lw))


def test_khat_separates_light_from_heavy_tails():
    rng = np.random.default_rng(3)
    assert ts.pareto_khat(0.3 * rng.standard_normal(4000)) < 0.3
    assert ts.pareto_khat(np.log(rng.pareto(0.8, 4000))) > ts.KHAT_THRESHOLD


def test_chain_agreement_p_value_is_chi2_sf():
    from scipy import stats

    lz, v = np.array([0.0, 0.1, -0.2, 0.05]), np.full(4, 0.01)
    q, p = ts.chain_agreement(lz, v)
    assert p == pytest.approx(stats.chi2.sf(q, 3), rel=1e-12)


def test_weights_beyond_float_range_are_infinitely_heavy_not_missing():
    # A prior pilot of a d = 31 regression: log-weights spread over thousands of nats, so
    # all but a handful of weights underflow to 0 relative to the largest. arviz_stats
    # cannot fit such a tail (NaN); k̂ = inf says what the weights are, and keeps a
    # degenerate start from looking like the lightest-tailed one (init="auto").
    lw = np.random.default_rng(0).normal(0.0, 1000.0, 1000)
    assert np.isnan(_arviz_khat(lw))
    assert ts.pareto_khat(lw) == np.inf
    assert ts.pooled_pareto_khat(np.stack([lw, lw]), np.zeros(2)) == np.inf
    # 90 weights in range and 910 underflowed: the tail (3·sqrt(1000) = 95 weights)
    # reaches the zeros; arviz_stats fits the 90 and calls them light-tailed
    lw = np.full(1000, -1e4)
    lw[:90] = np.random.default_rng(1).standard_normal(90)
    assert _arviz_khat(lw) < 0.7 and ts.pareto_khat(lw) == np.inf
    # 100 in range: the tail is all in range and fitted as usual
    lw[:100] = np.random.default_rng(1).standard_normal(100)
    assert ts.pareto_khat(lw) == pytest.approx(_arviz_khat(lw), rel=1e-12)
    # weights that are -inf (impossible draws) are left out, not counted as underflowed
    lw[100:] = -np.inf
    assert ts.pareto_khat(lw) == pytest.approx(_arviz_khat(lw), rel=1e-12)


def test_heavy_tail_factor_of_degenerate_weights_is_its_largest():
    f = ts.heavy_tail_factor(np.array([np.inf, np.nan, 0.0, ts.KHAT_THRESHOLD]))
    assert f.tolist() == pytest.approx([4.6, 1.0, 1.0, 4.6])


def test_the_pooled_khat_of_a_start_in_families_is_taken_over_the_families():
    from pymc_crais.core.families import family_log_weights
    from pymc_crais.tail_stats import pareto_khat, pooled_pareto_khat

    rng = np.random.default_rng(8)
    # two chains of 125 families of 16 near-copies: one weight per family, light-tailed
    fam = rng.normal(0.0, 0.4, (2, 125))
    lw = np.repeat(fam, 16, axis=1) + rng.normal(0.0, 1e-7, (2, 2000))
    lz = np.zeros(2)
    by_family = pooled_pareto_khat(lw, lz, [16, 16])
    assert by_family == pytest.approx(pooled_pareto_khat(np.log(np.exp(fam)), lz), abs=1e-5)
    assert by_family < 0.5
    block = family_log_weights(lw[0], np.repeat(np.arange(125), 16))
    assert pareto_khat(block) == pytest.approx(pooled_pareto_khat(lw[:1], lz[:1], [16]), abs=1e-5)
    # without the family sizes (or with mixed ones) the rows are pooled as they are
    assert pooled_pareto_khat(lw, lz) == pooled_pareto_khat(lw, lz, [16, None])
    assert pooled_pareto_khat(lw, lz, [np.nan, np.nan]) == pooled_pareto_khat(lw, lz)
