"""Fixed annealing schedules (docs/algorithms.md, "Schedules")."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_crais.core.schedules import (
    FIXED_SCHEDULES,
    FixedSchedule,
    exponential_schedule,
    linear_schedule,
    make_fixed_schedule,
    sigmoid_schedule,
    validate_schedule,
)

N_STEPS = [1, 2, 3, 10, 100, 1000]


def _check_shape_and_ends(taus, n_steps):
    assert isinstance(taus, np.ndarray) and taus.dtype == np.float64
    assert taus.shape == (n_steps + 1,)
    assert taus[0] == 0.0  # exactly
    assert taus[-1] == 1.0  # exactly
    assert np.all(np.diff(taus) > 0), "not strictly increasing"
    assert np.all(np.isfinite(taus))


@pytest.mark.parametrize("n_steps", N_STEPS)
def test_linear(n_steps):
    taus = linear_schedule(n_steps)
    _check_shape_and_ends(taus, n_steps)
    np.testing.assert_allclose(taus, np.arange(n_steps + 1) / n_steps, rtol=1e-15, atol=1e-16)


@pytest.mark.parametrize("n_steps", N_STEPS)
@pytest.mark.parametrize("scale", [0.5, 4.0, 10.0, 30.0])
def test_sigmoid(n_steps, scale):
    taus = sigmoid_schedule(n_steps, scale=scale)
    _check_shape_and_ends(taus, n_steps)
    # independent formula (docs/algorithms.md, "Schedules")
    k = np.arange(n_steps + 1) / n_steps
    sig = lambda v: 0.5 * (1.0 + np.tanh(0.5 * v))
    ref = (sig(scale * (k - 0.5)) - sig(-scale / 2)) / (sig(scale / 2) - sig(-scale / 2))
    np.testing.assert_allclose(taus, ref, rtol=1e-9, atol=1e-13)
    # symmetric about the middle: τ_k + τ_{M−k} = 1
    np.testing.assert_allclose(taus + taus[::-1], 1.0, rtol=0, atol=1e-12)


def test_sigmoid_default_scale_is_10():
    np.testing.assert_array_equal(sigmoid_schedule(20), sigmoid_schedule(20, scale=10.0))


@pytest.mark.parametrize("n_steps", N_STEPS)
@pytest.mark.parametrize("tau_min", [1e-8, 1e-4, 0.01, 0.3])
def test_exponential(n_steps, tau_min):
    taus = exponential_schedule(n_steps, tau_min=tau_min)
    _check_shape_and_ends(taus, n_steps)
    if n_steps >= 2:
        assert taus[1] == tau_min  # exactly
        # evenly spaced in log τ from tau_min to 1
        logs = np.log(taus[1:])
        np.testing.assert_allclose(np.diff(logs), -np.log(tau_min) / (n_steps - 1), rtol=1e-9)


def test_exponential_default_tau_min():
    assert exponential_schedule(10)[1] == 1e-4


@pytest.mark.parametrize("fn", [linear_schedule, sigmoid_schedule, exponential_schedule])
@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "10"])
def test_bad_n_steps(fn, bad):
    with pytest.raises(ValueError, match="n_steps"):
        fn(bad)


@pytest.mark.parametrize("fn", [linear_schedule, sigmoid_schedule, exponential_schedule])
def test_nan_n_steps(fn):
    with pytest.raises(ValueError):
        fn(np.nan)


@pytest.mark.parametrize("bad", [0.0, -1.0, np.nan, np.inf])
def test_bad_sigmoid_scale(bad):
    with pytest.raises(ValueError, match="scale"):
        sigmoid_schedule(10, scale=bad)


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, 1.5])
def test_bad_tau_min(bad):
    with pytest.raises(ValueError, match="tau_min"):
        exponential_schedule(10, tau_min=bad)


# --------------------------------------------------------------------------- validate


def test_validate_accepts_and_converts():
    t = validate_schedule([0, 0.25, 0.5, 1])
    assert t.dtype == np.float64
    np.testing.assert_array_equal(t, [0.0, 0.25, 0.5, 1.0])
    np.testing.assert_array_equal(validate_schedule([0.0, 1.0]), [0.0, 1.0])


@pytest.mark.parametrize(
    "taus,match",
    [
        ([0.0, 0.5, 0.5, 1.0], "strictly increasing"),
        ([0.0, 0.6, 0.4, 1.0], "strictly increasing"),
        ([0.1, 0.5, 1.0], "start at 0"),
        ([-0.1, 0.5, 1.0], "start at 0"),
        ([0.0, 0.5, 0.99], "end at 1"),
        ([0.0, 0.5, 1.0 + 1e-15], "end at 1"),
        ([0.0, np.nan, 1.0], "finite"),
        ([0.0, 0.5, np.nan], "finite"),
        ([0.0, np.inf, 1.0], "finite"),
        ([1.0], "at least two"),
        ([], "at least two"),
        ([[0.0, 1.0]], "1-D"),
    ],
)
def test_validate_rejects(taus, match):
    with pytest.raises(ValueError, match=match):
        validate_schedule(taus)


def test_validate_reports_the_offending_entry():
    with pytest.raises(ValueError, match="entry 3"):
        validate_schedule([0.0, 0.2, 0.4, 0.4, 1.0])


# --------------------------------------------------------------------------- factory


@pytest.mark.parametrize("name", sorted(FIXED_SCHEDULES))
def test_make_fixed_schedule_named(name):
    s = make_fixed_schedule(name, 7)
    assert isinstance(s, FixedSchedule)
    assert s.n_steps == 7 and s.name == name
    np.testing.assert_array_equal(s.taus, FIXED_SCHEDULES[name](7))
    assert s.describe() == {"schedule": name, "n_steps": 7}


def test_make_fixed_schedule_kwargs_and_case():
    s = make_fixed_schedule("Exponential", 5, tau_min=1e-3)
    assert s.taus[1] == 1e-3
    assert s.describe() == {"schedule": "exponential", "n_steps": 5, "tau_min": 1e-3}
    np.testing.assert_array_equal(make_fixed_schedule("SIGMOID", 9, scale=3.0).taus,
                                  sigmoid_schedule(9, 3.0))


def test_make_fixed_schedule_unknown_name():
    with pytest.raises(ValueError) as err:
        make_fixed_schedule("cosine", 10)
    msg = str(err.value)
    assert "cosine" in msg
    for name in ("linear", "sigmoid", "exponential"):
        assert name in msg


def test_make_fixed_schedule_needs_n_steps():
    with pytest.raises(ValueError, match="n_steps"):
        make_fixed_schedule("linear")


def test_make_fixed_schedule_bad_kwargs():
    with pytest.raises(TypeError, match="schedule_kwargs|sigmoid"):
        make_fixed_schedule("sigmoid", 10, tau_min=0.1)
    with pytest.raises(TypeError, match="schedule_kwargs"):
        make_fixed_schedule([0.0, 1.0], scale=3.0)


def test_make_fixed_schedule_array():
    s = make_fixed_schedule(np.array([0.0, 0.1, 0.7, 1.0]))
    assert s.name == "array" and s.n_steps == 3
    with pytest.raises(ValueError):
        make_fixed_schedule([0.0, 0.7, 0.1, 1.0])


def test_fixed_schedule_next_tau_walks_the_array():
    taus = np.array([0.0, 0.05, 0.2, 0.6, 1.0])
    s = FixedSchedule(taus)
    tau, stage, seen = 0.0, 0, []
    while tau < 1.0:
        nxt = s.next_tau(stage, tau, None, None, None)
        assert isinstance(nxt, float)
        seen.append(nxt)
        tau, stage = nxt, stage + 1
    assert seen == [0.05, 0.2, 0.6, 1.0]
    assert stage == s.n_steps == 4
    # the stage index, not the current τ, decides
    assert s.next_tau(2, 0.0) == 0.6
