"""The choice of an AIS run's length from measured relative variances (core/schedules/run_length.py)."""

import numpy as np
import pytest

from pymc_crais.core.schedules.run_length import (
    LengthPoint,
    choose_length,
    length_settled,
    predicted_mcse,
    predicted_relative_variance,
    relative_variance,
)


def test_relative_variance_of_known_weights():
    assert relative_variance(np.zeros(500)) == pytest.approx(0.0, abs=1e-12)
    assert relative_variance([np.nan, -np.inf]) == np.inf
    # log-normal weights: r = exp(σ²) − 1
    lw = np.random.default_rng(0).normal(3.0, 0.5, 200_000)
    assert relative_variance(lw) == pytest.approx(np.expm1(0.25), rel=0.03)
    # a far-left draw (weight ~0) leaves r as it was
    assert relative_variance(np.r_[lw, -500.0]) == pytest.approx(relative_variance(lw), rel=1e-3)


def test_prediction_interpolates_and_bounds_extrapolation():
    pts = [LengthPoint(1, 1.0), LengthPoint(16, 0.25)]
    assert predicted_relative_variance(pts, 1) == pytest.approx(1.0)
    assert predicted_relative_variance(pts, 16) == pytest.approx(0.25)
    assert predicted_relative_variance(pts, 4) == pytest.approx(0.5)  # log-log linear
    # beyond the last point: the measured slope (−1/2 here) continues
    assert predicted_relative_variance(pts, 64) == pytest.approx(0.125)
    # a measured fall faster than 1/K is not extrapolated faster than 1/K
    steep = [LengthPoint(1, 100.0), LengthPoint(10, 0.01)]
    assert predicted_relative_variance(steep, 100) == pytest.approx(0.001)
    # a rise is not extrapolated; one point alone is held; below the shortest: unknown
    assert predicted_relative_variance([LengthPoint(1, 0.1), LengthPoint(8, 0.2)], 64) == pytest.approx(0.2)
    assert predicted_relative_variance([LengthPoint(8, 0.3)], 200) == pytest.approx(0.3)
    assert predicted_relative_variance([LengthPoint(8, 0.3)], 4) == np.inf


def test_choose_length_takes_the_fewest_steps_that_meet_the_target():
    assert predicted_mcse(0.4, 1000, 4) == pytest.approx(0.01)
    pts = [LengthPoint(1, 4.0), LengthPoint(32, 0.125)]  # r = 4 / K
    k, mcse = choose_length(pts, draws=1000, chains=4, target=0.01)
    assert k == 12 and mcse <= 0.01  # 4 / 12 = 0.33 <= 0.4; 4 / 8 = 0.5 > 0.4
    assert choose_length(pts, 1000, 4, target=0.03)[0] == 2  # 4 / 2 = 2 <= 3.6
    # out of reach: the longest run, with its (larger) prediction
    k, mcse = choose_length([LengthPoint(8, 50.0)], 1000, 4, target=0.01, max_length=200)
    assert k == 200 and mcse == pytest.approx(np.sqrt(50 / 4000))
    # the old name of max_length still works, with a RenamedWarning
    from pymc_crais.warnings import RenamedWarning

    with pytest.warns(RenamedWarning, match="max_length"):
        assert choose_length([LengthPoint(8, 50.0)], 1000, 4, 0.01, max_steps=100)[0] == 100


def test_length_settled_says_when_another_tuning_length_cannot_shorten_the_run():
    # r = 3.2 meets 0.02 pooled over 2000 × 4 particles
    kw = dict(draws=2000, chains=4, target=0.02, max_length=200, short_enough=64)
    # the start (K = 1) and a long attempt already meet the target at a short length
    assert length_settled([LengthPoint(1, 3.5), LengthPoint(92, 1.3)], next_length=32, **kw)
    # one long attempt that meets it only at its own length: a shorter point may help
    assert not length_settled([LengthPoint(87, 1.97)], next_length=32, **kw)
    # out of reach at 200 even if r fell as 1/K beyond the longest point: 18.1·105/200 > 3.2
    assert length_settled([LengthPoint(105, 18.1)], next_length=32, **kw)
    # ... but a longer next point could still show a steeper fall
    assert not length_settled([LengthPoint(16, 307.0)], next_length=32, **kw)
    # reachable at 200 if r falls as 1/K: 5·105/200 < 3.2, so a second point may help
    assert not length_settled([LengthPoint(105, 5.0)], next_length=32, **kw)
    assert not length_settled([], next_length=32, **kw)
