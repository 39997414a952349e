"""The move object (core/kernels/moves.py): transition counts, the stopping rules ("auto": absolute,
"pymc": PyMC's relative rule), re-tuning, waste-free chains."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from pymc_crais.core.kernels import KernelInfo, MutationKernel
from pymc_crais.core.kernels.moves import (
    CorrelationStop,
    Moves,
    QuantileCorrelationStop,
    mean_correlation,
)
from pymc_crais.core.particles import ParticleState


@dataclass
class _Shrink(MutationKernel):
    """A deterministic kernel: ``x ← factor · x + shift`` (so the correlation with the start
    follows a known sequence), recording the parameters it was given."""

    factor: float = 0.5
    noise: float = 0.0
    name = "shrink"

    def __post_init__(self):
        self.seen = []

    def init(self, state):
        return 0

    def tune(self, params, state, info, log_weights=None):
        return params + 1

    def step(self, rng, state, density, path, tau, params):
        self.seen.append(params)
        x = self.factor * state.x + self.noise * rng.standard_normal(state.x.shape)
        x[0] = state.x[0]  # particle 0 never moves
        z = np.zeros(state.n)
        return ParticleState(x, z, z, family=state.family), KernelInfo(0.25 * len(self.seen), state.n)


def _state(rng, n=200, d=3):
    z = np.zeros(n)
    return ParticleState(rng.standard_normal((n, d)), z, z)


def test_fixed_moves_make_exactly_n_transitions_and_retune_between(rng):
    k = _Shrink()
    res = Moves.fixed(3).run(
        rng, k, _state(rng), None, None, 0.5, 10, tune=lambda p, s, i: k.tune(p, s, i)
    )
    assert res.n_transitions == 3
    assert k.seen == [10, 11, 12]  # tuned before every transition after the first
    assert res.params == 12
    assert res.acceptance_rates == [0.25, 0.5, 0.75]
    assert res.acceptance_rate == pytest.approx(0.5)
    assert not res.moved[0] and res.moved[1:].all()


def test_no_retune_without_tune_function_or_when_disabled(rng):
    k = _Shrink()
    Moves.fixed(3).run(rng, k, _state(rng), None, None, 0.5, 10)
    assert k.seen == [10, 10, 10]
    k = _Shrink()
    Moves.fixed(3, retune=False).run(
        rng, k, _state(rng), None, None, 0.5, 10, tune=lambda p, s, i: p + 1
    )
    assert k.seen == [10, 10, 10]


def test_zero_moves_keep_state_params_and_info(rng):
    st = _state(rng)
    info = KernelInfo(0.3, 5)
    res = Moves.fixed(0).run(rng, _Shrink(), st, None, None, 0.5, 7, info=info)
    assert res.state is st and res.params == 7 and res.info is info
    assert res.n_transitions == 0 and np.isnan(res.acceptance_rate) and not res.moved.any()


def test_pymc_rule_stops_when_correlation_stops_falling(rng):
    """Noise-free shrinking keeps the correlation at 1 (no decrease): one transition."""
    res = Moves.pymc(20, 0.01).run(rng, _Shrink(factor=0.5), _state(rng), None, None, 0.5, 0)
    assert res.n_transitions == 1


def test_pymc_rule_against_a_direct_implementation(rng):
    """The rule, written out: stop after transition k once corr_{k-1} − corr_k < tol or
    corr_k < 0.1 (corr_0 = 1), at most max_steps transitions."""
    for tol, cap, noise in ((0.01, 20, 0.3), (0.05, 20, 0.3), (0.0, 6, 0.3), (0.2, 20, 1.0)):
        st = _state(np.random.default_rng(1))
        res = Moves.pymc(cap, tol).run(
            np.random.default_rng(2), _Shrink(0.9, noise), st, None, None, 0.5, 0
        )
        # replay with the same random numbers
        r2, x, prev, n = np.random.default_rng(2), st.x, 1.0, 0
        for _ in range(cap):
            x_new = 0.9 * x + noise * r2.standard_normal(x.shape)
            x_new[0] = x[0]
            x, n = x_new, n + 1
            corr = mean_correlation(st.x, x)
            if prev - corr < tol or corr < 0.1:
                break
            prev = corr
        assert res.n_transitions == n, (tol, cap, noise)
        np.testing.assert_array_equal(res.state.x, x)
    assert 1 < n <= cap


def test_stopping_rule_is_pluggable(rng):
    class AfterTwo:
        def start(self, state):
            class T:
                k = 0

                def done(self, state):
                    self.k += 1
                    return self.k >= 2

            return T()

    res = Moves(10, AfterTwo()).run(rng, _Shrink(), _state(rng), None, None, 0.5, 0)
    assert res.n_transitions == 2


def test_mean_correlation():
    a = np.random.default_rng(0).standard_normal((500, 2))
    assert mean_correlation(a, a) == pytest.approx(1.0)
    assert mean_correlation(a, -a) == pytest.approx(-1.0)
    assert mean_correlation(np.ones((5, 2)), a[:5]) == 0.0  # no spread: no information


@pytest.mark.parametrize(
    ("setting", "match"),
    [
        ({"n_mcmc_steps": "many"}, "n_mcmc_steps must be an integer, 'auto' or 'pymc'"),
        ({"n_mcmc_steps": -1}, "non-negative"),
        ({"n_mcmc_steps": 1.5}, "non-negative"),
        ({"n_mcmc_steps": "auto", "max_mcmc_steps": 0}, "max_mcmc_steps"),
        ({"n_mcmc_steps": "pymc", "correlation_threshold": 1.0}, "correlation_threshold"),
        ({"n_mcmc_steps": "auto", "max_correlation": 0.0}, "max_correlation"),
    ],
)
def test_from_setting_errors(setting, match):
    with pytest.raises(ValueError, match=match):
        Moves.from_setting(**setting)


def test_from_setting():
    assert Moves.from_setting(3) == Moves(3, None)
    assert Moves.from_setting("pymc", 7, 0.05) == Moves(7, CorrelationStop(0.05))
    assert Moves.from_setting("auto", 7, 0.05, 0.2) == Moves(7, QuantileCorrelationStop(0.2, horizon=7))
    assert Moves.from_setting("auto") == Moves(20, QuantileCorrelationStop(0.1, 0.9, 0.1, 20, 3))


# ----------------------------------------------------------------- the absolute rule


def _auto_steps_direct(st, factor, noise, bound, cap, q=0.9, max_unmoved=0.1, window=3):
    """The "auto" rule written out on _Shrink's sequence (same random numbers): stop after
    transition k once at most max_unmoved of the particles are where they started and the
    q-quantile of |corr(start, x_k)| over coordinates (and of Δ, constant here) is < bound;
    or, futility, once that quantile fell since the first transition at a rate r with
    r^(cap - k) > 1/2 and s_k r^(cap - k) >= bound (judged from `window` transitions after
    the first on)."""
    r2, x, n, seq = np.random.default_rng(2), st.x, 0, []
    for _ in range(cap):
        x_new = factor * x + noise * r2.standard_normal(x.shape)
        x_new[0] = x[0]
        x, n = x_new, n + 1
        unmoved = np.mean(np.all(x == st.x, axis=1))
        if unmoved > max_unmoved:
            continue
        a, b = st.x - st.x.mean(0), x - x.mean(0)
        corr = np.abs((a * b).sum(0) / np.sqrt((a * a).sum(0) * (b * b).sum(0)))
        if np.quantile(corr, q) < bound:
            break
        seq.append(np.quantile(corr, q))
        if len(seq) > window and cap > n:
            rate = (seq[-1] / seq[0]) ** (1.0 / (len(seq) - 1))
            if rate >= 1 or (rate ** (cap - n) > 0.5 and seq[-1] * rate ** (cap - n) >= bound):
                break
    return n, x


@pytest.mark.parametrize(("factor", "noise", "bound", "cap"), [(0.9, 0.3, 0.1, 20), (0.5, 1.0, 0.1, 20),
                                                               (0.9, 0.3, 0.3, 20), (0.95, 0.1, 0.1, 6)])
def test_auto_rule_against_a_direct_implementation(factor, noise, bound, cap):
    st = _state(np.random.default_rng(1))
    res = Moves.auto(cap, bound).run(np.random.default_rng(2), _Shrink(factor, noise), st, None, None, 0.5, 0)
    n, x = _auto_steps_direct(st, factor, noise, bound, cap)
    assert res.n_transitions == n
    np.testing.assert_array_equal(res.state.x, x)


def test_auto_rule_keeps_moving_a_slow_kernel_that_pymc_stops():
    """A slowly mixing kernel (each transition lowers the correlation by less than 0.01):
    PyMC's relative rule stops after one transition, the absolute rule moves on until the
    correlation is below 0.1 (or the cap)."""
    st = _state(np.random.default_rng(1), n=2000)
    slow = dict(factor=0.99, noise=0.1)
    pymc = Moves.pymc(400, 0.01).run(np.random.default_rng(2), _Shrink(**slow), st, None, None, 0.5, 0)
    auto = Moves.auto(400).run(np.random.default_rng(2), _Shrink(**slow), st, None, None, 0.5, 0)
    assert pymc.n_transitions == 1
    assert 20 < auto.n_transitions < 400
    corr = [abs(np.corrcoef(st.x[:, j], auto.state.x[:, j])[0, 1]) for j in range(3)]
    assert max(corr) < 0.1


def test_futility_stops_a_kernel_that_cannot_decorrelate():
    """A kernel lowering the correlation by about 0.2 % a transition (a funnel's neck) makes
    window + 1 transitions, not the cap; without a horizon it runs to the cap."""
    st = _state(np.random.default_rng(1), n=2000)
    stuck = dict(factor=0.999, noise=0.02)
    auto = Moves.auto(20).run(np.random.default_rng(2), _Shrink(**stuck), st, None, None, 0.5, 0)
    assert auto.n_transitions == 4
    no_horizon = Moves(20, QuantileCorrelationStop(0.1))
    assert no_horizon.run(np.random.default_rng(2), _Shrink(**stuck), st, None, None, 0.5, 0).n_transitions == 20


@dataclass
class _AR1(MutationKernel):
    """A kernel at stationarity for N(0, I): ``x ← ρ x + sqrt(1 − ρ²) ε``; the correlation
    with the start after k transitions is ρ^k."""

    rho: float = 0.85
    name = "ar1"

    def init(self, state):
        return 0

    def tune(self, params, state, info, log_weights=None):
        return params

    def step(self, rng, state, density, path, tau, params):
        x = self.rho * state.x + np.sqrt(1 - self.rho**2) * rng.standard_normal(state.x.shape)
        z = np.zeros(state.n)
        return ParticleState(x, z, z, family=state.family), KernelInfo(1.0, state.n)


def test_futility_spares_a_kernel_that_reaches_the_bound_at_the_cap():
    """Near the cap few transitions are left and none would halve the correlation, but if
    they are projected to bring it below the bound the stage goes on: ρ = 0.87 needs 17."""
    st = _state(np.random.default_rng(1), n=4000)
    res = Moves.auto(18).run(np.random.default_rng(2), _AR1(0.87), st, None, None, 0.5, 0)
    assert res.n_transitions >= 16


def test_futility_spares_a_kernel_that_gets_there_slowly():
    """A kernel at stationarity with ρ = 0.85 needs ⌈log 0.1 / log 0.85⌉ = 15 transitions:
    slower than the window, but it gets there within the cap, so it is not stopped."""
    st = _state(np.random.default_rng(1), n=4000)
    res = Moves.auto(20).run(np.random.default_rng(2), _AR1(0.85), st, None, None, 0.5, 0)
    assert 13 <= res.n_transitions <= 17
    corr = [abs(np.corrcoef(st.x[:, j], res.state.x[:, j])[0, 1]) for j in range(3)]
    assert np.quantile(corr, 0.9) < 0.1


def test_futility_ignores_transitions_that_moved_nothing(rng):
    """Transitions that leave the particles in place (a step size being re-tuned) do not
    count towards the window."""
    st = _state(rng, n=500)
    tracker = QuantileCorrelationStop(0.1, horizon=20).start(st)
    z = np.zeros(st.n)
    for _ in range(6):
        assert not tracker.done(ParticleState(st.x.copy(), z, z))
    assert tracker.history == []
    x = st.x.copy()
    for k in range(4):  # no progress at all once moving: stop after window + 1
        x = x + 1e-9 * (k + 1)
        assert tracker.done(ParticleState(x, z, z)) == (k == 3)


def test_auto_rule_waits_for_unmoved_particles(rng):
    """A kernel whose moves all decorrelate but leave 30% of the particles in place: not done."""
    rule = QuantileCorrelationStop(0.1)
    st = _state(rng, n=1000)
    tracker = rule.start(st)
    x = rng.standard_normal(st.x.shape)
    keep = np.arange(st.n) < 300
    x[keep] = st.x[keep]
    z = np.zeros(st.n)
    assert not tracker.done(ParticleState(x, z, z))
    x[keep] = rng.standard_normal((300, 3))
    assert tracker.done(ParticleState(x, z, z))


def test_auto_rule_watches_the_log_likelihood(rng):
    """Positions decorrelated but Δ still equal to its start: not done."""
    st = _state(rng, n=500)
    st = ParticleState(st.x, st.log_q0, rng.standard_normal(st.n))
    tracker = QuantileCorrelationStop(0.1).start(st)
    moved = ParticleState(rng.standard_normal(st.x.shape), st.log_q0, st.delta)
    assert not tracker.done(moved)
    assert tracker.done(ParticleState(moved.x, st.log_q0, rng.standard_normal(st.n)))


@pytest.mark.parametrize(("kwargs", "match"), [({"bound": 0.0}, "max_correlation"), ({"quantile": 1.5}, "quantile"),
                                               ({"max_unmoved": -0.1}, "max_unmoved"),
                                               ({"horizon": 0}, "horizon"), ({"window": 0}, "window")])
def test_auto_rule_argument_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        QuantileCorrelationStop(**kwargs)


# ----------------------------------------------------------------- waste-free chains


def test_run_chains_keeps_every_state_of_every_chain(rng):
    st = _state(rng, n=30)
    st = st.with_family(np.arange(30))
    k = _Shrink(0.5)
    res = Moves(1).run_chains(rng, k, st, None, None, 0.5, 0, 100, tune=lambda p, s, i: p + 1)
    # P = ceil(100 / 30) = 4 states per chain: the start and 3 transitions, cut to 100
    assert res.n_transitions == 3 and res.state.n == 100 and k.seen == [0, 1, 2]
    for j in range(4):
        block = res.state.x[30 * j : 30 * (j + 1)]
        np.testing.assert_allclose(block[1:], st.x[1 : block.shape[0]] * 0.5**j)
    np.testing.assert_array_equal(res.state.family, np.tile(np.arange(30), 4)[:100])
    np.testing.assert_allclose(res.last.x[1:], st.x[1:] * 0.125)


def test_old_names_of_the_transitions_still_work_with_a_renamed_warning(rng):
    """n_steps / max_steps count annealing steps; the transitions of a stage are
    n_transitions / max_transitions, and the old names warn (RenamedWarning)."""
    from pymc_crais.warnings import RenamedWarning

    with pytest.warns(RenamedWarning, match="max_transitions"):
        assert Moves.auto(max_steps=7) == Moves.auto(max_transitions=7)
    with pytest.warns(RenamedWarning, match="max_transitions"):
        assert Moves.pymc(max_steps=7) == Moves.pymc(7)
    with pytest.raises(TypeError, match="unexpected keyword"):
        Moves.auto(max_stages=7)
    res = Moves.fixed(2).run(rng, _Shrink(), _state(rng), None, None, 0.5, 0)
    with pytest.warns(RenamedWarning, match="n_transitions"):
        assert res.n_steps == res.n_transitions == 2
    with pytest.warns(RenamedWarning, match="n_transitions"):
        assert Moves.fixed(3).n_steps == 3
