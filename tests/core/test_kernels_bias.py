"""Population-tuned kernels must not bias adaptive AIS (docs/algorithms.md, "Adaptation bias").

The kernels are re-tuned from the population before every transition. When a particle's
own position entered the moments that move it (HMC/MALA inverse mass, RWMH covariance), the
transition was not invariant for γ_τ and AIS log Z on the d = 5 regression below came out
+0.37 nats high at N = 300 (within-run MCSE 0.055). These tests check the property directly
(a particle's parameters do not change when that particle moves) and the evidence against
the exact value with tolerances from the runs' own MCSE.
"""

from __future__ import annotations

import numpy as np
import pytest

from pymc_crais.core.anneal import anneal
from pymc_crais.core.kernels import (
    HMC,
    MALA,
    IndependentMetropolis,
    RandomWalkMetropolis,
    particle_variance,
    particle_variance_loo,
)
from pymc_crais.core.particles import ParticleState
from pymc_crais.core.paths import make_path
from pymc_crais.core.schedules import make_fixed_schedule
from pymc_crais.validation.testing import linear_regression_density


def _pooled_error(kernel_cls, seeds, n=300, n_steps=200):
    """Mean log Z error over independent runs and its MCSE from the runs' within variances."""
    dens, log_z = linear_regression_density()
    errs, variances = [], []
    for s in seeds:
        rng = np.random.default_rng(s)
        res = anneal(rng, dens, dens.sample_q0(rng, n), make_path(0.0), make_fixed_schedule("exponential", n_steps),
                     kernel_cls(), n_mcmc_steps=10)
        errs.append(res.log_marginal_likelihood - log_z)
        variances.append(res.log_z_variance)
    return float(np.mean(errs)), float(np.sqrt(np.sum(variances)) / len(seeds))


def _assert_unbiased(err, mcse, max_mcse):
    assert 0.0 < mcse < max_mcse, (err, mcse)
    assert abs(err) <= 4.0 * mcse + 0.02, (err, mcse)


# --------------------------------------------------------------------- the property itself


def _state(seed, n=40, d=3):
    x = np.random.default_rng(seed).normal(size=(n, d)) * [1.0, 3.0, 0.2]
    z = np.zeros(n)
    g = np.zeros((n, d))
    return ParticleState(x, z, z, g, g)


def _moved(state, i, shift):
    x = state.x.copy()
    x[i] += shift
    return ParticleState(x, state.log_q0, state.delta, state.grad_log_q0, state.grad_delta)


@pytest.mark.parametrize("weighted", [False, True])
def test_leave_one_out_variance_matches_brute_force(weighted):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(9, 4)) * [1.0, 50.0, 1e-3, 2.0] + 7.0
    w = rng.random(9) if weighted else None
    w = None if w is None else w / w.sum()
    loo = particle_variance_loo(x, w)
    assert loo.shape == x.shape
    for i in range(9):
        keep = np.arange(9) != i
        wi = None if w is None else w[keep] / w[keep].sum()
        np.testing.assert_allclose(loo[i], particle_variance(x[keep], wi), rtol=1e-9)


def test_leave_one_out_variance_with_a_dominant_weight_is_finite():
    x = np.random.default_rng(4).normal(size=(6, 2))
    w = np.full(6, 1e-12)
    w[2] = 1.0 - 5e-12
    loo = particle_variance_loo(x, w)
    assert np.isfinite(loo).all() and (loo > 0).all()
    np.testing.assert_allclose(loo[2], particle_variance(np.delete(x, 2, axis=0)), rtol=1e-9)


@pytest.mark.parametrize("kernel_cls", [lambda: HMC(dense_max_dim=0), MALA])
def test_inverse_mass_of_a_particle_ignores_its_own_position(kernel_cls):
    kern = kernel_cls()
    st = _state(5)
    p = kern.tune(kern.init(st), st, None)
    q = kern.tune(kern.init(st), _moved(st, 7, [10.0, -30.0, 5.0]), None)
    assert p.inv_mass_for(st.n).shape == st.x.shape
    np.testing.assert_allclose(q.particle_inv_mass[7], p.particle_inv_mass[7], rtol=1e-12)
    assert not np.allclose(q.inv_mass, p.inv_mass)  # the population estimate did move


def test_dense_hmc_metric_of_a_particle_ignores_its_own_family():
    """Dense metric, particles labelled by family (their initial ancestor): the factor that
    moves a particle comes from the other families' parity, so neither the particle nor its
    copies (same family, e.g. after resampling) enter it; without families, row parity."""
    kern = HMC()
    st = _state(5)
    fam = np.repeat(np.arange(20), 2)  # copies of 20 ancestors: rows 2k and 2k+1 are copies
    st_f = st.with_family(fam)
    p = kern.tune(kern.init(st_f), st_f, None)
    assert p.split_chol is not None and p.chol is not None
    np.testing.assert_array_equal(p.groups, fam % 2)
    for i in (6, 7):  # both copies of family 3 (odd): moved by the even families' factor [1]
        q = kern.tune(kern.init(st_f), _moved(st, i, [10.0, -30.0, 5.0]).with_family(fam), None)
        np.testing.assert_allclose(q.split_chol[1], p.split_chol[1], rtol=1e-12)
        assert not np.allclose(q.split_chol[0], p.split_chol[0])
    # without families (row parity) a copy in the other row parity would enter the factor
    q = kern.tune(kern.init(st), _moved(st, 7, [10.0, -30.0, 5.0]), None)
    assert q.groups is None
    np.testing.assert_allclose(q.split_chol[1], kern.tune(kern.init(st), st, None).split_chol[1])
    # what a replay keeps: the population factor, no per-particle parts
    r = kern.population_params(p)
    assert r.split_chol is None and r.groups is None and r.chol is not None


def test_rwmh_proposal_of_a_particle_ignores_its_own_position():
    kern = RandomWalkMetropolis()
    st = _state(6)
    p = kern.tune(kern.init(st), st, None)
    for i in (6, 7):  # an even- and an odd-indexed particle
        q = kern.tune(kern.init(st), _moved(st, i, [10.0, -30.0, 5.0]), None)
        np.testing.assert_allclose(q.split_chol[i % 2], p.split_chol[i % 2], rtol=1e-12)
        assert not np.allclose(q.split_chol[1 - i % 2], p.split_chol[1 - i % 2])


def test_recorded_parameters_have_no_per_particle_parts():
    """What a later run replays (ParamsByTau) must fit any population size."""
    dens, _ = linear_regression_density()
    rng = np.random.default_rng(0)
    for kernel_cls in (HMC, RandomWalkMetropolis):
        res = anneal(rng, dens, dens.sample_q0(rng, 64), make_path(0.0), make_fixed_schedule("linear", 5),
                     kernel_cls(), n_mcmc_steps=2)
        for p in res.kernel_params:
            assert getattr(p, "particle_inv_mass", None) is None and getattr(p, "split_chol", None) is None


# --------------------------------------------------------------------- exact evidence


@pytest.mark.slow
def test_adaptive_hmc_ais_is_unbiased_on_thelinear_regression_density():
    """Three runs pooled: before the fix the mean error was +0.37 against a 4·MCSE of ~0.13.
    Slow (three 200-step runs of 10 HMC moves); the default suite checks the property that
    removed the bias directly (``test_inverse_mass_of_a_particle_ignores_its_own_position``
    and the tests beside it)."""
    err, mcse = _pooled_error(HMC, seeds=[0, 1, 2])
    _assert_unbiased(err, mcse, max_mcse=0.05)


@pytest.mark.slow
def test_cross_fitted_imh_ais_is_unbiased_on_the_linear_regression_density():
    """Independence Metropolis with a proposal fitted to the whole population (the moving
    particle included) gave +0.337 ± 0.026 on these three runs; cross-fitted halves +0.037
    ± 0.028. Slow (three 200-step runs of 10 IMH moves); the default suite checks the same
    property directly: ``tests/core/test_kernels.py::test_imh_keeps_a_small_population_invariant``
    and its power check ``test_imh_fitted_to_the_moving_particles_is_not_invariant``."""
    err, mcse = _pooled_error(IndependentMetropolis, seeds=[0, 1, 2])
    _assert_unbiased(err, mcse, max_mcse=0.05)


@pytest.mark.slow
@pytest.mark.parametrize("kernel_cls", [HMC, RandomWalkMetropolis, MALA, IndependentMetropolis])
def test_adaptive_ais_unbiased_replicates(kernel_cls):
    """24 runs pooled (MCSE ~0.012 for HMC): the residual adaptation bias is below ~0.07."""
    err, mcse = _pooled_error(kernel_cls, seeds=range(100, 124))
    _assert_unbiased(err, mcse, max_mcse=0.02)
