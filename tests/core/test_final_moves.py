"""``AnnealOptions.final_moves``: the transitions at τ = 1 where no copies are left to break up
(core/stages.py). The moves there precede the final resampling and change no weight."""

from __future__ import annotations

import numpy as np

from pymc_crais.core.anneal import AnnealOptions, anneal
from pymc_crais.core.conditional_laplace import WeightedStart
from pymc_crais.core.kernels.hmc import HMC
from pymc_crais.core.paths import make_path
from pymc_crais.core.schedules import FixedSchedule
from pymc_crais.core.schedules.adaptive import ESSSchedule
from pymc_crais.validation.testing import linear_regression_density


def _run(seed, n=600, schedule=None, x0=None, **settings):
    dens, _ = linear_regression_density()
    rng = np.random.default_rng(seed)
    x0 = dens.sample_q0(rng, n) if x0 is None else x0(dens, rng)
    return anneal(rng, dens, x0, make_path(0.0), schedule or ESSSchedule(0.5), HMC(),
                  resample="always", tune_from_weights=True, **settings)  # fmt: skip


def test_one_final_move_and_the_same_log_z_and_weights():
    """The stages before τ = 1 keep ``moves``; ``Ẑ`` and the final weights are the same bits."""
    base = _run(3, n_mcmc_steps=4)
    final = _run(3, n_mcmc_steps=4, final_mcmc_steps=1)
    steps = final.stages["mcmc_steps"]
    assert len(steps) >= 2 and (steps[:-1] == 4).all() and steps[-1] == 1
    assert (base.stages["mcmc_steps"] == 4).all()
    assert final.log_marginal_likelihood == base.log_marginal_likelihood
    np.testing.assert_array_equal(final.log_weights, base.log_weights)
    assert final.n_logp_evals < base.n_logp_evals


def test_moves_that_ran_to_their_cap_keep_the_rule_at_the_target():
    """Where the last resampling stage's adaptive moves ran out (copies may be left), τ = 1
    keeps ``moves``: a correlation bound no transition can reach caps every stage."""
    capped = _run(5, n_mcmc_steps="auto", max_mcmc_steps=2, max_correlation=1e-9,
                  final_mcmc_steps=1)  # fmt: skip
    assert (capped.stages["mcmc_steps"] == 2).all()
    free = _run(5, n_mcmc_steps="auto", final_mcmc_steps=1)
    assert free.stages["mcmc_steps"][-1] == 1 and free.stages["mcmc_steps"][:-1].max() > 1


def test_a_start_whose_families_share_a_draw_keeps_the_moves():
    """A one-stage run from a start drawn in families of two (copies sharing their
    hyperparameters) keeps ``moves`` at τ = 1: they are what breaks the families up; in
    families of one, ``final_moves``."""

    for size, wanted in ((2, 3), (1, 1)):

        def start(dens, rng, size=size):
            x = dens.sample_q0(rng, 400)
            if size == 2:
                x[1::2] = x[::2]
            return WeightedStart(x, dens.evaluate(x).log_q0, np.arange(400) // size)

        res = _run(4, x0=start, schedule=FixedSchedule(np.array([0.0, 1.0])), n_mcmc_steps=3,
                   final_mcmc_steps=1)  # fmt: skip
        assert res.stages["mcmc_steps"][-1] == wanted


def test_persistent_sampling_resamples_at_the_target_and_keeps_the_moves():
    from pymc_crais.core.persistent import PersistentSampling

    opts = AnnealOptions.from_settings(n_mcmc_steps=2, resample="always", tune_from_weights=True,
                                       final_mcmc_steps=1, stages=PersistentSampling())  # fmt: skip
    dens, _ = linear_regression_density()
    rng = np.random.default_rng(6)
    res = anneal(rng, dens, dens.sample_q0(rng, 400), make_path(0.0), ESSSchedule(0.5), HMC(),
                 options=opts)  # fmt: skip
    assert res.stages["resampled"][-1] and res.stages["mcmc_steps"][-1] == 2
