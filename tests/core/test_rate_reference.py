"""The constant-rate rule for every α (issue 15): its statistics from a reference population.

* On 1-D Gaussian endpoints with exact statistics (a quadrature grid as the reference), each
  step of the rule lowers the α-divergence ``D_α(π ‖ p_τ)`` by δ, for α ∈ {−1, −½, 0, ½, 1}
  (the paper's Proposition 3.4; the divergence is computed by quadrature).
* The pooled geometric stages (balance heuristic) estimate the power-mean path's ``Z_τ``
  without bias.
* On a target much narrower than ``q0`` the particles' own statistics make every α = ½
  step hit the cap, and the reference's do not.
"""

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import norm

from pymc_crais.core.paths import make_path
from pymc_crais.core.schedules.adaptive import ConstantRateSchedule, rate_statistics
from pymc_crais.core.schedules.rate_reference import (
    RateReference,
    reference_rate_for_steps,
    reference_schedule,
)

GRID = np.linspace(-10.0, 10.0, 8_001)
DX = GRID[1] - GRID[0]
LOG_Q0 = norm.logpdf(GRID, 0.0, 1.0)


def _grid_reference(log_pi):
    """Quadrature as a weighted population: ``Σ_j e^{log_base_j + h} f_j ≈ ∫ γ_τ f``."""
    return RateReference(log_pi - LOG_Q0, LOG_Q0 + np.log(DX))


def _alpha_divergence(alpha, log_pi, log_gamma):
    """``D_α(π ‖ p)`` of the paper's Table 1 (α = 0: KL(p ‖ π); α = 1: KL(π ‖ p))."""
    lp = log_pi - logsumexp(log_pi + np.log(DX))
    lq = log_gamma - logsumexp(log_gamma + np.log(DX))
    q, lu = np.exp(lq) * DX, lp - lq
    if alpha == 0.0:
        return float(np.sum(q * -lu))
    if alpha == 1.0:
        return float(np.sum(q * np.exp(lu) * lu))
    u = np.exp(lu)
    return float(np.sum(q * (u**alpha - 1.0 - alpha * (u - 1.0))) / (alpha * (alpha - 1.0)))


@pytest.mark.parametrize("alpha", [-1.0, -0.5, 0.0, 0.5, 1.0])
def test_each_step_lowers_the_alpha_divergence_by_the_rate(alpha):
    # the target is wider than q0 so that D_α is finite for α < 0 as well
    log_pi = norm.logpdf(GRID, 2.0, 1.2)
    ref = _grid_reference(log_pi)
    path = make_path(alpha, 0.0)
    rate = 0.02
    taus = reference_schedule(ConstantRateSchedule(rate, reference=ref, max_dtau=1.0, v_min=0.0), path)
    assert 40 < taus.size < 1000 and np.all(np.diff(taus) > 0) and taus[-1] == 1.0
    div = np.array([_alpha_divergence(alpha, log_pi, LOG_Q0 + path.log_ratio(t, ref.delta)) for t in taus])
    per_step = -np.diff(div)[:-1] / rate  # the last step jumps to τ = 1
    # a forward-Euler rule: O(δ) relative error, largest over the first steps from τ = 0
    # (α = 1: the rate changes fastest there) and over the last ones, where the rule's
    # log β runs to −∞ while the divergence left is a few δ; in between every step is
    # within 10 % of δ (forward Euler at δ = 0.02)
    assert np.median(per_step) == pytest.approx(1.0, abs=0.03)
    middle = per_step[5:][div[6:-1] > 10 * rate]
    assert middle.size > 0.7 * per_step.size
    assert np.all(np.abs(middle - 1.0) < 0.1), middle.min()


def test_pooled_geometric_stages_estimate_the_power_mean_normalizer_without_bias():
    """Exact draws of each geometric stage (weights = its exact Z_s): the pool's estimate
    of ``Z_τ`` for α = ½ and α = −½ is unbiased (mean over replicates within 4 standard
    errors of the exact value, by quadrature)."""
    mu, s = 1.5, 0.3  # target N(1.5, 0.3²), unnormalized by e^{-2}
    log_pi = norm.logpdf(GRID, mu, s) - 2.0
    stage_taus = np.array([0.0, 0.05, 0.2, 0.5, 1.0])
    # p_s ∝ N(0,1)^{1-τ} N(μ,s²)^τ e^{-2τ}: Gaussian, precision (1-τ) + τ/s²
    prec = (1 - stage_taus) + stage_taus / s**2
    mean = stage_taus * mu / s**2 / prec
    log_z_s = np.array([logsumexp(LOG_Q0 + t * (log_pi - LOG_Q0) + np.log(DX)) for t in stage_taus])
    rng = np.random.default_rng(3)
    for alpha in (0.5, -0.5):
        path = make_path(alpha, 0.0)
        exact = {t: logsumexp(LOG_Q0 + path.log_ratio(t, log_pi - LOG_Q0) + np.log(DX)) for t in (0.01, 0.3, 0.9)}
        est = {t: [] for t in exact}
        for _ in range(200):
            deltas, log_ws = [], []
            for k in range(stage_taus.size):
                x = rng.normal(mean[k], 1 / np.sqrt(prec[k]), size=100)
                deltas.append(norm.logpdf(x, mu, s) - 2.0 - norm.logpdf(x))
                log_ws.append(np.full(100, log_z_s[k]))
            ref = RateReference.from_geometric_stages(stage_taus, deltas, log_ws)
            for t in exact:
                est[t].append(np.exp(logsumexp(ref.log_weights(t, path)) - exact[t]))
        for t, ratios in est.items():
            ratios = np.asarray(ratios)
            assert abs(ratios.mean() - 1.0) < 4 * ratios.std(ddof=1) / np.sqrt(ratios.size), (alpha, t)


def test_reference_sees_the_mass_of_a_narrow_target():
    """q0 = N(0, I₈), target N(0, 0.05² I₈) (log Z = 0, exact c = 0), α = ½. Particles that
    stayed near q0's typical set (as local moves leave them) give ``v·r^α ≈ 0`` and so a
    step at the cap; pooled exact geometric stages give the rule's own small steps."""
    d, s, n = 8, 0.05, 400
    rng = np.random.default_rng(0)
    path = make_path(0.5, 0.0)

    def delta(x):
        return np.sum(norm.logpdf(x, 0.0, s) - norm.logpdf(x), axis=1)

    stuck = rng.normal(size=(n, d))
    v, log_r = rate_statistics(delta(stuck), np.zeros(n), 0.3, path, weighted=False)
    assert np.exp(0.5 * log_r) * v < 1e-30  # the particles' r misses the target's mass
    old = ConstantRateSchedule(0.05)
    state = type("S", (), {"delta": delta(stuck)})()
    assert old.next_tau(3, 0.3, state, np.zeros(n), path) == pytest.approx(0.425)  # the cap

    stage_taus = np.array([0.0, 1e-3, 1e-2, 0.05, 0.2, 0.5, 1.0])
    deltas, log_ws = [], []
    for t in stage_taus:  # exact draws of the geometric stages, weights = exact log Z_s
        prec = (1 - t) + t / s**2
        x = rng.normal(0.0, 1 / np.sqrt(prec), size=(n, d))
        deltas.append(delta(x))
        log_ws.append(np.full(n, d * (-0.5 * np.log(prec) - t * np.log(s))))
    ref = RateReference.from_geometric_stages(stage_taus, deltas, log_ws)
    new = ConstantRateSchedule(0.05, reference=ref)
    taus = reference_schedule(new, path)
    steps = np.diff(taus)
    assert taus.size - 1 > 20 and np.mean(steps >= 0.125 * (1 - 1e-9)) < 0.2
    # δ for a wanted number of steps
    rate = reference_rate_for_steps(ref, path, 40)
    m = reference_schedule(ConstantRateSchedule(rate, reference=ref), path).size - 1
    assert 36 <= m <= 44


def test_reference_validation():
    with pytest.raises(ValueError, match="two particles"):
        RateReference(np.array([np.nan, 1.0]), np.zeros(2))
    with pytest.raises(ValueError, match="one shape"):
        RateReference(np.zeros(3), np.zeros(2))
    with pytest.raises(TypeError, match="RateReference"):
        ConstantRateSchedule(0.1, reference=np.zeros(3))
    with pytest.raises(ValueError, match="reference"):
        reference_schedule(ConstantRateSchedule(0.1), make_path(0.5))


def test_rate_variance_survives_overflowing_g_squared():
    """A weighted pool whose far particles carry tiny weights: ``g²`` overflows but the
    weighted variance is finite; it is computed in log space and agrees with the direct
    formula where that one is finite."""
    path = make_path(1.0, 0.0)
    rng = np.random.default_rng(1)
    delta = rng.normal(0.0, 1.0, size=50)
    lw = rng.normal(size=50)
    v_direct, log_r = rate_statistics(delta, lw, 0.0, path, weighted=True)
    from pymc_crais.core.schedules.adaptive import _log_space_variance

    z = delta - log_r  # τ = 0: a = Δ − c
    assert _log_space_variance(z, lw, 1.0) == pytest.approx(v_direct, rel=1e-9)
    # one particle 400 nats up with weight e^{-500}: g² = e^{800} overflows, v ≈ e^{300}
    delta2 = np.append(delta, 400.0)
    lw2 = np.append(lw, -500.0)
    v, _ = rate_statistics(delta2, lw2, 0.0, path, weighted=True)
    # normalized weight e^{-500 - logsumexp(lw)} times u² = e^{2(400 - log r)}
    assert np.isfinite(v) and np.log(v) == pytest.approx(300.0 - logsumexp(lw) - 2 * log_r, abs=0.05)
