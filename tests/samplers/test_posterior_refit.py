"""The posterior refit check (samplers/engine/posterior_refit.py): it fires on a run whose
log Ẑ lies below what its own posterior draws support, stays quiet on a right run and on a
run above the importance estimate, restarts from the fitted start (also for precision, when
the run is right but its error bar is wide), and is reported."""

from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from pymc_crais.core.density import FunctionDensity
from pymc_crais.core.refit import importance_estimate, student_t_from_draws
from pymc_crais.diagnostic_checks import find_problems
from pymc_crais.samplers.engine.posterior_refit import (
    PRECISION_TARGET,
    REFIT_DRAWS,
    RefitCheck,
    checked_chains,
    refit_check,
    wants_precision,
)

# a 2-d Gaussian posterior: prior N(0, 3² I), likelihood exp(-|x - m|² / 2) (unnormalized)
M = np.array([1.0, -0.5])
S2 = 1.0 / (1.0 / 9.0 + 1.0)  # posterior variance per coordinate
POST_MEAN = M * S2
LOG_Z = float(
    np.sum(stats.norm.logpdf(M, 0.0, np.sqrt(10.0)) + 0.5 * np.log(2 * np.pi))
)  # ∫ N(x; 0, 9) exp(-(x - m)²/2) dx = sqrt(2π) N(m; 0, 10) per coordinate


def _density():
    return FunctionDensity(
        2,
        log_q0=lambda x: stats.norm.logpdf(x, 0.0, 3.0).sum(axis=1),
        log_target=lambda x: (
            stats.norm.logpdf(x, 0.0, 3.0).sum(axis=1) - 0.5 * np.sum((x - M) ** 2, axis=1)
        ),
    )


def _setup(chains=4, seed=0):
    density = _density()  # started from the prior: the model's density is the run's
    return SimpleNamespace(
        layout=SimpleNamespace(has_discrete=False, dim=2),
        density=density,
        model_density=density,
        aux_rng=np.random.default_rng(seed),
        chains=chains,
    )


def _chains(log_z, n=2000, chains=4, seed=1, mcse=0.02):
    """Chains with exact posterior draws and the given log Ẑ (equal final weights)."""
    rng = np.random.default_rng(seed)
    return [
        _Chain(
            x=POST_MEAN + np.sqrt(S2) * rng.standard_normal((n, 2)),
            log_marginal_likelihood=log_z,
            log_z_variance=(mcse * np.sqrt(chains)) ** 2,
            log_weights=np.zeros(n),
            n_logp_evals=100 * n,
            hit_max_steps=False,
        )
        for _ in range(chains)
    ]


class _Chain(SimpleNamespace):
    """A chain result as the check reads it (``as_dict`` for the run's own checks)."""

    def as_dict(self):
        keys = ("log_marginal_likelihood", "log_z_variance", "n_logp_evals", "log_weights", "hit_max_steps")
        return {k: getattr(self, k) for k in keys}


def test_importance_estimate_from_fitted_student_t_is_right():
    x = POST_MEAN + np.sqrt(S2) * np.random.default_rng(3).standard_normal((4000, 2))
    q = student_t_from_draws(x)
    est = importance_estimate(_density(), q, np.random.default_rng(4), 4000)
    assert est.n_evals == 4000
    assert abs(est.log_z - LOG_Z) < 4 * est.mcse + 1e-3
    assert student_t_from_draws(np.ones((50, 2))) is None  # no spread: nothing to fit
    assert student_t_from_draws(x[:2]) is None  # fewer draws than d + 1


def test_check_fires_on_a_run_that_lost_mass():
    """All chains agree on a log Ẑ 3 nats low (the trapped BUGS run's pattern)."""
    setup = _setup()
    check = refit_check(setup, _chains(LOG_Z - 3.0), np.random.default_rng(5))
    assert check.disagrees
    assert check.pareto_k <= 0.7 and check.gap_sigma > 10
    assert abs(check.log_z - LOG_Z) < 0.1 and check.n_evals == max(REFIT_DRAWS, 4 * 2000)


@pytest.mark.parametrize("offset", [0.0, 3.0])
def test_check_quiet_on_a_right_run_and_one_sided(offset):
    """Quiet when the run is right, and when the run is *above* the importance estimate
    (the proposal's failure, not the run's)."""
    check = refit_check(_setup(), _chains(LOG_Z + offset), np.random.default_rng(6))
    assert not check.disagrees
    assert abs(check.gap_sigma) < 4 if offset == 0 else check.gap_sigma < -10


def test_restart_replaces_a_disagreeing_run_and_records_both():
    setup = _setup()
    seen = {}

    def rerun(new_setup):
        seen["setup"] = new_setup
        first = new_setup.draw(new_setup.chain_rngs[0], 5)  # draws of the fitted start
        seen["draw"] = first
        return _chains(LOG_Z, seed=9), 1.5

    attrs = {"sampling_time": 2.0}
    out = checked_chains(setup, _chains(LOG_Z - 3.0), attrs, rerun)
    assert out[0].log_marginal_likelihood == LOG_Z
    assert attrs["refit_restarted"] and attrs["refit_first_disagrees"]
    assert not attrs["refit_disagrees"]  # the second run agrees
    assert attrs["sampling_time"] == 3.5
    assert attrs["n_logp_evals_refit"] == 2 * max(REFIT_DRAWS, 4 * 2000) + 4 * 100 * 2000
    # the second run anneals from the fitted Student-t, with the model as its base
    assert seen["setup"].density.base is setup.density and len(seen["setup"].chain_rngs) == 4
    assert seen["draw"].shape == (5, 2)
    assert not find_problems([], attrs)


def test_right_run_is_returned_unchanged_and_check_only_flags():
    chains = _chains(LOG_Z)
    attrs = {}
    assert checked_chains(_setup(), chains, attrs, rerun=None) is chains
    assert attrs["refit_checked"] and not attrs["refit_restarted"]
    bad = {}
    checked_chains(_setup(), _chains(LOG_Z - 3.0), bad, rerun=None)  # "check": no restart
    problems = find_problems([], bad)
    assert [p.check for p in problems] == ["refit"]
    assert "Student-t fitted to the run's own posterior draws" in problems[0].message


def test_discrete_models_are_not_checked():
    setup = _setup()
    setup.layout.has_discrete = True
    attrs = {}
    checked_chains(setup, _chains(LOG_Z - 3.0), attrs, rerun=None)
    assert attrs["refit_checked"] is False and "refit_log_z" not in attrs


@pytest.mark.slow
def test_bugs_oneway_trapped_run_is_restarted_and_right():
    """End to end (about 15 s): with defaults, seed 2, the first run of the centred BUGS
    one-way model stays at its Laplace start's funnel neck, 5.3 nats low with no other
    check failing (2026-11-27); the refit check sees it and the second run is right."""
    import warnings

    import pymc_crais as pmc
    from pymc_crais.validation import get_case

    inst = get_case("applied_bugs_oneway").build()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pmc.sample_smc(
            model=inst.model, chains=4, random_seed=2, progressbar=False, cores=1
        )
    at = idata["sample_stats"].attrs
    assert at["refit_restarted"] and at["refit_first_disagrees"]
    assert at["refit_first_run_log_z"] < inst.log_z - 3.0
    log_z, mcse = pmc.log_marginal_likelihood(idata)
    assert abs(log_z - inst.log_z) < 3 * mcse + 0.1


def test_crais_runs_the_check_and_pools_it():
    """``sample_crais`` records the refit check (no second run) and
    ``log_marginal_likelihood`` pools its importance estimate as for ``sample_smc``: on an
    exact model the pooled error bar is smaller and still covers the truth."""
    import warnings

    import pymc_crais as pmc
    from pymc_crais.samplers.engine.crais_plan import REFIT
    from pymc_crais.validation.testing import build_case

    model, exact = build_case("normal_mean")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pmc.sample_crais(model=model, chains=2, draws=500, random_seed=3, cores=1,
                                 progressbar=False)  # fmt: skip
    at = idata["sample_stats"].attrs
    assert REFIT == "check" and at["refit_checked"] and not at["refit_restarted"]
    log_z, mcse, det = pmc.log_marginal_likelihood(idata, return_details=True)
    assert det["refit_pooled"] and mcse < det["mcse_chains_pooled"]
    assert abs(log_z - exact) < 4 * mcse + 0.01


# ------------------------------------------------------------------ restart for precision
def _check(**kw):
    base = {
        "log_z": LOG_Z, "mcse": 0.02, "pareto_k": 0.3, "run_log_z": LOG_Z, "run_mcse": 0.08,
        "gap_sigma": 0.0, "disagrees": False, "proposal": None, "n_evals": 8000,
        "reported_mcse": 0.07,
    }  # fmt: skip
    base.update(kw)
    return RefitCheck(**base)


@pytest.mark.parametrize(
    ("change", "problems", "wanted"),
    [
        ({}, [], True),
        ({"reported_mcse": 0.04}, [], False),  # precise enough once pooled
        ({"disagrees": True}, [], False),  # the other restart's business
        ({"pareto_k": 0.9}, [], False),  # the Student-t is no start
        ({"reported_mcse": float("nan")}, [], False),
        # a failed check must stay visible: the second run would not show it
        ({}, ["precision"], False),
        ({}, ["chains"], False),
        ({}, ["pareto_k"], False),
        ({}, ["max_steps"], False),
    ],
)
def test_wants_precision_only_for_an_imprecise_run_that_passed_its_checks(
    change, problems, wanted
):
    assert wants_precision(_check(**change), problems) is wanted
    calls = []  # the run's checks are computed only when the rest holds

    def lazy():
        calls.append(1)
        return problems

    assert wants_precision(_check(**change), lazy) is wanted
    needed = not change.get("disagrees") and change.get("pareto_k", 0.3) <= 0.7
    needed = needed and change.get("reported_mcse", 0.07) > PRECISION_TARGET
    assert len(calls) == int(needed)
    assert PRECISION_TARGET == 0.05


def test_imprecise_run_is_run_again_from_the_fitted_start(monkeypatch):
    """A run that agrees with its check but whose reported error stays above the target
    (here: nothing pooled) is replaced by a second run from the fitted Student-t, and the
    record says why; a precise one, or one whose chains' error is past the precision flag's
    line, is returned as it is."""
    from pymc_crais.samplers.engine import posterior_refit

    monkeypatch.setattr(posterior_refit, "pool_with_refit", lambda *a, **k: None)
    calls = []

    def rerun(new_setup):
        calls.append(new_setup)
        return _chains(LOG_Z, seed=9, mcse=0.03), 1.0

    attrs = {}
    out = checked_chains(_setup(), _chains(LOG_Z, mcse=0.1), attrs, rerun)
    assert len(calls) == 1 and out[0].log_marginal_likelihood == LOG_Z
    assert attrs["refit_restarted"] and attrs["refit_restart_reason"] == "precision"
    assert attrs["refit_first_mcse_reported"] > PRECISION_TARGET
    assert not attrs["refit_first_disagrees"] and not find_problems([], attrs)
    for mcse in (0.03, 0.3):  # precise already; the precision flag's business
        attrs = {}
        chains = _chains(LOG_Z, mcse=mcse)
        assert checked_chains(_setup(), chains, attrs, rerun) is chains
        assert not attrs["refit_restarted"] and attrs["refit_restart_reason"] == ""
    assert len(calls) == 1
