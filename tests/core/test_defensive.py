"""The defensive mixture start (core/defensive.py): a normalized q0 with exact draws, the
right gradients, and weights no larger than 1/ε times the base start's."""

import numpy as np
import pytest
from scipy import integrate, stats

from pymc_crais.core.defensive import DefensiveDraw, DefensiveMixtureDensity
from pymc_crais.core.density import FunctionDensity
from pymc_crais.core.initial import StudentTInitial

PRIOR_SD = 3.0


def _base(dim=1):
    """A prior start N(0, 3²) per coordinate and an unnormalized target N(1, 0.5²)·e²."""

    def log_prior(x):
        return stats.norm(0.0, PRIOR_SD).logpdf(x).sum(1)

    def log_target(x):
        return stats.norm(1.0, 0.5).logpdf(x).sum(1) + 2.0

    return FunctionDensity(
        dim,
        log_q0=log_prior,
        log_target=log_target,
        grad_log_q0=lambda x: -x / PRIOR_SD**2,
        grad_log_target=lambda x: -(x - 1.0) / 0.25,
        sample_q0=lambda rng, n: rng.normal(0.0, PRIOR_SD, size=(n, dim)),
    )


def _fitted(dim=1):
    return StudentTInitial(np.full(dim, 1.0), np.eye(dim) * 0.36, df=5.0)


def test_the_mixture_is_normalized_and_keeps_the_target():
    dens = DefensiveMixtureDensity(1, base=_base(), initial=_fitted(), weight=0.3)

    def q0(v):
        return float(np.exp(dens.evaluate(np.array([[v]])).log_q0[0]))

    total, _ = integrate.quad(q0, -40, 40, points=[0.0, 1.0], limit=200)
    assert total == pytest.approx(1.0, abs=1e-7)
    x = np.linspace(-4, 5, 11)[:, None]
    ev = dens.evaluate(x)
    want = stats.norm(1.0, 0.5).logpdf(x[:, 0]) + 2.0  # log q0 + Δ is the target
    np.testing.assert_allclose(ev.log_q0 + ev.delta, want, rtol=1e-12, atol=1e-12)
    # weights π̃/q0 at most 1/ε times the base start's, everywhere
    base = _base().evaluate(x)
    assert np.all(ev.delta <= base.delta - np.log(0.3) + 1e-12)


def test_gradients_match_finite_differences():
    dens = DefensiveMixtureDensity(2, base=_base(2), initial=_fitted(2), weight=0.5)
    x = np.random.default_rng(0).normal(0.5, 2.0, size=(6, 2))
    ev = dens.evaluate(x, gradient=True)
    h = 1e-6
    for j in range(2):
        e = np.zeros(2)
        e[j] = h
        up, down = dens.evaluate(x + e), dens.evaluate(x - e)
        np.testing.assert_allclose(
            ev.grad_log_q0[:, j], (up.log_q0 - down.log_q0) / (2 * h), rtol=1e-5, atol=1e-7
        )
        np.testing.assert_allclose(
            ev.grad_delta[:, j], (up.delta - down.delta) / (2 * h), rtol=1e-5, atol=1e-7
        )


def test_draws_come_from_both_components_in_proportion():
    base = _base()
    draw = DefensiveDraw(_fitted(), base.sample_q0, 0.25)
    x = draw(np.random.default_rng(1), 40_000)
    assert x.shape == (40_000, 1)
    # the mixture's CDF at 0: 0.25·Φ(0/3) + 0.75·T5((0 − 1)/0.6)
    want = 0.25 * 0.5 + 0.75 * stats.t(5).cdf(-1.0 / 0.6)
    assert np.mean(x[:, 0] < 0.0) == pytest.approx(
        want, abs=4 * np.sqrt(want * (1 - want) / 40_000)
    )
    same = draw(np.random.default_rng(1), 40_000)
    np.testing.assert_array_equal(x, same)  # its generator only
    assert draw(np.random.default_rng(2), 0).shape == (0, 1)


@pytest.mark.parametrize("weight", [0.0, 1.0, -0.1, float("nan")])
def test_a_weight_outside_the_open_interval_is_refused(weight):
    with pytest.raises(ValueError, match="defensive weight"):
        DefensiveMixtureDensity(1, base=_base(), initial=_fitted(), weight=weight)


def _log_exp_prior(x):  # an Exponential(1) prior per coordinate: -inf below 0
    with np.errstate(divide="ignore"):
        return np.where(x >= 0.0, -x, -np.inf).sum(1)


def _grad_exp_prior(x):
    return -np.ones_like(x)


def _log_target_half(x):
    return _log_exp_prior(x) + stats.norm(1.0, 0.5).logpdf(x).sum(1)


def _grad_target_half(x):
    return -np.ones_like(x) - (x - 1.0) / 0.25


def _exp_draw(rng, n):
    return rng.exponential(1.0, size=(n, 1))


def test_outside_the_base_support_the_mixture_is_the_fitted_start_and_the_target_is_zero():
    base = FunctionDensity(1, log_q0=_log_exp_prior, log_target=_log_target_half,
                           grad_log_q0=_grad_exp_prior, grad_log_target=_grad_target_half)  # fmt: skip
    dens = DefensiveMixtureDensity(1, base=base, initial=_fitted(), weight=0.5)
    ev = dens.evaluate(np.array([[-0.5], [0.5]]), gradient=True)
    assert np.isfinite(ev.log_q0).all()  # the Student-t covers x < 0
    assert ev.delta[0] == -np.inf and np.isfinite(ev.delta[1])  # zero weight there
    assert np.isfinite(ev.grad_log_q0).all() and np.isfinite(ev.grad_delta[1]).all()


def test_the_mixture_and_its_draws_survive_pickling():
    """Chains in other processes get both by pickle: same values, same draws."""
    import pickle

    base = FunctionDensity(1, log_q0=_log_exp_prior, log_target=_log_target_half,
                           grad_log_q0=_grad_exp_prior, grad_log_target=_grad_target_half)  # fmt: skip
    dens = DefensiveMixtureDensity(1, base=base, initial=_fitted(), weight=0.5)
    draw = DefensiveDraw(_fitted(), _exp_draw, 0.5)
    dens2, draw2 = pickle.loads(pickle.dumps((dens, draw)))
    x = draw(np.random.default_rng(3), 50)
    np.testing.assert_array_equal(x, draw2(np.random.default_rng(3), 50))
    np.testing.assert_array_equal(dens.evaluate(x).delta, dens2.evaluate(x).delta)


def test_a_mixture_needs_both_components_of_one_dimension():
    with pytest.raises(ValueError, match="dimension"):
        DefensiveMixtureDensity(2, base=_base(2), initial=_fitted(1))
    with pytest.raises(ValueError, match="base density"):
        DefensiveMixtureDensity(1, initial=_fitted())
    with pytest.raises(ValueError, match="defensive weight"):
        DefensiveDraw(_fitted(), _exp_draw, 1.5)
