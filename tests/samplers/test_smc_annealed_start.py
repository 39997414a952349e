"""sample_smc's annealed start (samplers/engine/annealed_start.py): where the Laplace fit
fails (a funnel) and the path from the prior is long, smaller SMC chains from the prior
find a Student-t, and the run starts from its defensive mixture with the prior; right,
reproducible, counted and recorded; a short path keeps the prior."""

from types import SimpleNamespace

import numpy as np
import pytest

import pymc_crais as pmc
from pymc_crais.samplers.engine.annealed_start import (
    DEFENSIVE_WEIGHT,
    SMC_MIN_PILOT_STAGES,
    SMC_PILOT_MAX_TRANSITIONS,
    SMC_START_DRAWS,
    SMC_START_KHAT,
    smc_needs_annealed_start,
    smc_pilot_particles,
)
from pymc_crais.validation.cases import get_case


def _setup(discrete=False, gradient=True, **attrs):
    base = {"init": "auto", "init_choice": "prior", "laplace_converged": True,
            "init_n_modes": np.nan}  # fmt: skip
    merged = {k: v for k, v in {**base, **attrs}.items() if v is not None}
    return SimpleNamespace(
        attrs=merged,
        layout=SimpleNamespace(has_discrete=discrete),
        model_density=SimpleNamespace(has_gradient=gradient),
    )


@pytest.mark.parametrize(
    ("setup", "wanted"),
    [
        (_setup(), True),  # the fit failed: the prior
        (_setup(laplace_converged=None), True),  # no fit at all (a Hessian not finite)
        (_setup(init_n_modes=2.0), False),  # several modes found: the prior stays
        (_setup(init_choice="laplace"), False),
        (_setup(init="prior"), False),  # the user's choice
        (_setup(discrete=True), False),
        (_setup(gradient=False), False),
    ],
)
def test_when_sample_smc_anneals_to_a_start(setup, wanted):
    assert smc_needs_annealed_start(setup) is wanted


def test_pilot_particles():
    assert smc_pilot_particles(2000) == 500  # a quarter of draws
    assert smc_pilot_particles(200) == 100  # at least 100
    assert smc_pilot_particles(60) == 60  # at most draws


@pytest.fixture(scope="module")
def slopes():
    """Random intercepts and slopes, centred (d = 42): the Laplace fit fails, and the data
    move the posterior far from the prior (17-18 pilot stages)."""
    return get_case("applied_random_slopes").build()


# these models have a latent-Gaussian block: without conditional_start=False sample_smc would
# take the conditional-Laplace start before the annealed one (test_conditional_start.py)
KW = {"draws": 600, "chains": 2, "progressbar": False, "conditional_start": False}
# With 600 draws the pilot has 150 particles a chain, too few for a sure fit in 42
# dimensions: its k-hat was 0.89-1.27 at seeds 6-9 (pilot on Numba), the start kept at 7 and 8.
SEED = 7


def _first_run(a, idata):
    """``(log Z, MCSE, stages)`` of the run from the annealed start: the first run when the
    precision restart replaced it (``refit_first_*``), else the returned one."""
    if a["refit_restarted"]:
        return a["refit_first_run_log_z"], a["refit_first_mcse_run"], None
    log_z, mcse = pmc.log_marginal_likelihood(idata)
    return log_z, mcse, int(max(idata.sample_stats.n_stages.values))


def test_a_long_path_from_the_prior_starts_from_the_mixture_and_is_right(slopes, annealed_pilot_calls):
    """The pilot chains have a quarter of the particles and at most 10 transitions a stage;
    the Student-t is fitted with shrunk correlations."""
    idata = pmc.sample_smc(model=slopes.model, random_seed=SEED, cores=1, **KW)
    assert annealed_pilot_calls[:2] == [(smc_pilot_particles(600), SMC_PILOT_MAX_TRANSITIONS), True]
    a = idata.sample_stats.attrs
    assert a["init_choice"] == "annealed" and a["init_first_choice"] == "prior"
    assert a["init_defensive_weight"] == DEFENSIVE_WEIGHT
    assert a["init_annealed_stages"] >= SMC_MIN_PILOT_STAGES
    assert a["init_annealed_pareto_k"] < SMC_START_KHAT
    assert a["init_annealed_particles"] == smc_pilot_particles(600)
    assert 0.0 < a["init_annealed_shrinkage"] < 1.0  # 300 draws in 42 dimensions
    # the pilot's chains and its k-hat draws, counted once, and all of the pilot's count
    assert a["n_logp_evals_annealed_start"] > SMC_START_DRAWS + 2 * a["init_annealed_particles"]
    assert a["n_logp_evals_pilot"] == a["n_logp_evals_annealed_start"]
    log_z, mcse, stages = _first_run(a, idata)
    assert stages is None or stages < a["init_annealed_stages"]
    assert abs(log_z - slopes.log_z) < 3 * mcse
    final, final_mcse = pmc.log_marginal_likelihood(idata)
    assert abs(final - slopes.log_z) < 3 * final_mcse


@pytest.mark.slow
def test_the_annealed_start_is_the_same_bits_whatever_cores_is(slopes):
    one = pmc.sample_smc(model=slopes.model, random_seed=SEED, cores=1, **KW)
    two = pmc.sample_smc(model=slopes.model, random_seed=SEED, cores=2, **KW)
    assert one.sample_stats.attrs["init_choice"] == "annealed"
    assert (
        one.sample_stats.attrs["init_annealed_pareto_k"]
        == two.sample_stats.attrs["init_annealed_pareto_k"]
    )
    np.testing.assert_array_equal(
        one.sample_stats.log_marginal_likelihood.values,
        two.sample_stats.log_marginal_likelihood.values,
    )


@pytest.fixture(scope="module")
def funnel():
    return get_case("hier_centered").build()


@pytest.mark.filterwarnings("ignore::pymc_crais.UnreliableEvidenceWarning")
def test_a_short_path_keeps_the_prior(funnel):
    """The suite's weak-data funnel: 5-6 pilot stages, so the neck holds much of the mass
    and the prior stays (the pilot is recorded and counted)."""
    idata = pmc.sample_smc(
        model=funnel.model, draws=400, chains=1, random_seed=5, progressbar=False,
        conditional_start=False,
    )
    a = idata.sample_stats.attrs
    assert a["init_choice"] == "prior" and not a["init_annealed"]
    assert a["init_annealed_stages"] < SMC_MIN_PILOT_STAGES
    assert a["n_logp_evals_pilot"] >= a["n_logp_evals_annealed_start"] > 0


def test_a_start_the_user_chose_is_kept(funnel):
    idata = pmc.sample_smc(
        model=funnel.model, draws=300, chains=1, init="prior", random_seed=3, progressbar=False
    )
    assert "init_annealed" not in idata.sample_stats.attrs


@pytest.mark.filterwarnings("ignore::pymc_crais.UnreliableEvidenceWarning")
def test_a_start_whose_weights_are_too_heavy_keeps_the_prior(funnel, monkeypatch):
    """Both fits measured (the Student-t, then the widened one), both refused: the prior
    stays, and the 2 x 2,000 draws that measured them are counted."""
    from pymc_crais.samplers.engine import annealed_start

    monkeypatch.setattr(annealed_start, "SMC_MIN_PILOT_STAGES", 1)
    monkeypatch.setattr(annealed_start, "SMC_START_KHAT", -np.inf)
    idata = pmc.sample_smc(
        model=funnel.model, draws=300, chains=1, random_seed=5, progressbar=False,
        conditional_start=False,
    )
    a = idata.sample_stats.attrs
    assert a["init_choice"] == "prior" and not a["init_annealed"]
    assert np.isfinite(a["init_annealed_pareto_k"]) and np.isfinite(
        a["init_annealed_pareto_k_wide"]
    )
    assert a["n_logp_evals_annealed_start"] > 2 * SMC_START_DRAWS
    assert a["n_logp_evals_pilot"] == a["n_logp_evals_annealed_start"]


@pytest.mark.filterwarnings("ignore::pymc_crais.UnreliableEvidenceWarning")
@pytest.mark.parametrize("costly", [True, False])
def test_a_costly_pilot_runs_on_numba_from_the_start(funnel, monkeypatch, costly):
    """The pilot is a tempered SMC run: on a model whose NumPy calls are costly its chains
    start on Numba (the set-up's budget counts as spent, the Numba function compiled before
    they start); on a cheap one they keep their NumPy budget."""
    from pymc_crais.samplers.engine import annealed_start, pipeline
    from pymc_crais.samplers.engine.model_density import ModelDensity

    monkeypatch.setattr(annealed_start, "costly", lambda *args: costly)
    monkeypatch.setattr(pipeline, "long_run_ahead", lambda cost, draws, attrs: False)
    budgets, for_chain = [], ModelDensity.for_chain

    def recorded(self):
        chain = for_chain(self)
        budgets.append((chain._numpy_budget, chain._fn_grad.then.compiled))
        return chain

    monkeypatch.setattr(ModelDensity, "for_chain", recorded)
    idata = pmc.sample_smc(
        model=funnel.model, draws=200, chains=1, random_seed=5, progressbar=False, cores=1,
        conditional_start=False,
    )
    assert idata.sample_stats.attrs["init_annealed_chains"] == 1
    pilot_budget, compiled = budgets[0]
    assert (pilot_budget == 0.0 and compiled) if costly else pilot_budget > 0.0
