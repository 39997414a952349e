"""Diagnostics, UnreliableEvidenceWarning, the combined MCSE, bad input and the global RNG."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
import xarray as xr
from xarray import DataTree

import pymc_crais as pmc
from pymc_crais import diagnostics as dg
from pymc_crais.core.density import FunctionDensity, InfiniteDensityError
from pymc_crais.core.estimators import combine_chain_estimates
from pymc_crais.core.initial import laplace_fit
from pymc_crais.core.tails import log_weight_tail, pareto_tail_size
from pymc_crais.samplers.engine.term_checks import ImpossibleModelError
from pymc_crais.validation import testing as em

QUIET = {"cores": 1, "progressbar": False}


# ----------------------------------------------------------------------------- Pareto k̂
@pytest.mark.parametrize("n", [100, 1000, 3000])
@pytest.mark.parametrize("scale", [0.5, 2.0, 4.0])
def test_khat_from_recorded_tail_equals_khat_of_all_weights(n, scale):
    lw = np.random.default_rng(n).normal(size=n) * scale
    tail = log_weight_tail(lw)
    assert tail.size == pareto_tail_size(n) + 1 and np.all(np.diff(tail) >= 0)
    assert dg.pareto_khat_from_tail(tail, n) == pytest.approx(dg.pareto_khat(lw), abs=1e-12)


def test_khat_separates_light_and_heavy_tails():
    rng = np.random.default_rng(0)
    light = rng.normal(size=4000) * 0.3  # log-normal weights, sd 0.3: all moments tame
    heavy = -0.9 * np.log(rng.random(4000))  # Pareto weights with tail index k = 0.9
    assert dg.pareto_khat(light) < 0.3
    assert dg.pareto_khat(heavy) > dg.KHAT_THRESHOLD
    assert np.isnan(dg.pareto_khat(np.zeros(10)))  # too few weights


def test_heavy_tail_factor():
    f = dg.heavy_tail_factor(np.array([np.nan, -0.5, 0.1, 0.4, 0.7, 2.0]))
    np.testing.assert_allclose(f, [1.0, 1.0, 1.0, 2.8, 4.6, 4.6])


# ----------------------------------------------------------------------------- MCSE
def test_combined_mcse_is_pooled_within_error_without_t_factor():
    lz = np.array([-10.0, -10.1])
    v = np.array([0.01, 0.02])
    _, mcse, det = combine_chain_estimates(lz, v)
    p = np.exp(lz - np.logaddexp(*lz))
    assert mcse == pytest.approx(np.sqrt(np.sum(p**2 * v)))
    assert det["mcse_within"] == pytest.approx(mcse) and det["tail_factor"] == 1.0
    # the heavy-tail factor multiplies the variance
    _, mcse_f, det_f = combine_chain_estimates(lz, v, np.array([4.0, 4.0]))
    assert mcse_f == pytest.approx(2.0 * mcse) and det_f["tail_factor"] == pytest.approx(4.0)
    # no within-chain errors: the spread of the chains (no t factor)
    rel = np.exp(lz - lz.max())
    _, mcse_b, _ = combine_chain_estimates(lz, None)
    assert mcse_b == pytest.approx(np.std(rel, ddof=1) / (np.sqrt(2) * rel.mean()))


def test_chain_agreement_test():
    q, p = dg.chain_agreement([-10.0, -10.05, -9.98, -10.02], [0.01] * 4)
    assert p > 0.5
    q, p = dg.chain_agreement([-10.0, -12.0], [0.01, 0.01])
    assert q == pytest.approx(200.0) and p < 1e-10
    assert np.isnan(dg.chain_agreement([-1.0], [0.1])[1])


def _tree(lml, mcse, n_draws=50, attrs=None):
    rng = np.random.default_rng(0)
    stats = xr.Dataset(
        {
            "log_marginal_likelihood": (("chain",), np.asarray(lml, dtype=float)),
            "log_marginal_likelihood_mcse": (("chain",), np.asarray(mcse, dtype=float)),
            "log_weights": (("chain", "draw"), rng.normal(size=(len(lml), n_draws)) * 0.1),
            "n_stages": (("chain",), np.ones(len(lml), dtype=int)),
        },
        attrs=dict(attrs or {"method": "ais"}),
    )
    post = xr.Dataset({"x": (("chain", "draw"), np.zeros((len(lml), n_draws)))})
    return DataTree.from_dict({"/posterior": post, "/sample_stats": stats})


def test_disagreeing_chains_warn_with_a_filterable_subclass():
    tree = _tree([-10.0, -12.0], [0.05, 0.05])
    assert issubclass(pmc.ChainDisagreementWarning, pmc.UnreliableEvidenceWarning)
    with pytest.warns(pmc.UnreliableEvidenceWarning, match="beyond their errors"):
        _, _, det = pmc.log_marginal_likelihood(tree, return_details=True)
    assert det["agreement_p_value"] < 1e-10
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=pmc.UnreliableEvidenceWarning)
        pmc.log_marginal_likelihood(tree)  # filtered by the parent category: no error
    assert "chains" in pmc.diagnose(tree).flags
    ok = _tree([-10.0, -10.02], [0.05, 0.05])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pmc.log_marginal_likelihood(ok)
    assert pmc.diagnose(ok).ok


# ----------------------------------------------------------------------------- each check
def _chain(**kw):
    """Per-chain statistics of a healthy run, with overrides."""
    rng = np.random.default_rng(kw.pop("seed", 0))
    n = kw.pop("n", 500)
    cs = {
        "log_marginal_likelihood": -10.0,
        "log_z_variance": 0.01,
        "log_weights": rng.normal(size=n) * 0.2,
        "n_resamplings": 10,
        "n_eves": 200,
        "hit_max_steps": False,
        "tau": np.linspace(0.1, 1, 10),
        "move_correlation": np.full(10, 0.2),
        "move_correlation_max": np.full(10, 0.4),
        "weight_tail": np.stack([log_weight_tail(rng.normal(size=n) * 0.3) for _ in range(10)]),
    }
    cs.update(kw)
    return cs


def _check(chains, attrs=None):
    attrs = {"method": "smc", **(attrs or {})}
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        diag = dg.check_run(chains, attrs)
    caught = [w for w in rec if issubclass(w.category, pmc.UnreliableEvidenceWarning)]
    assert bool(caught) == (not diag.ok)
    assert attrs["diagnostics_flags"] == ",".join(diag.flags)
    return diag


def test_healthy_run_passes_every_check():
    chains = [_chain(seed=s) for s in range(4)]
    diag = _check(chains)
    assert diag.ok, str(diag)
    assert "All checks passed" in str(diag)
    cs = chains[0]  # tails replaced by k̂ values
    assert "weight_tail" not in cs and cs["pareto_k"].shape == (10,) and cs["pareto_k_max"] < 0.7


def test_genealogy_collapse_is_flagged():
    diag = _check([_chain(seed=0, n_eves=4), _chain(seed=1)])
    assert diag.flags == ["genealogy"] and diag.problems[0].chains == [0]
    assert "draws" in diag.problems[0].advice
    # AIS (no resampling) has no genealogy to collapse
    assert _check([_chain(seed=0, n_eves=4, n_resamplings=0), _chain(seed=1)]).ok


def test_heavy_tailed_stage_weights_are_flagged():
    rng = np.random.default_rng(5)
    tails = np.stack([log_weight_tail(rng.normal(size=500) * 0.3) for _ in range(10)])
    tails[4] = log_weight_tail(-1.2 * np.log(rng.random(500)))  # one stage with k ≈ 1.2
    diag = _check([_chain(seed=0, weight_tail=tails), _chain(seed=1)])
    assert diag.flags == ["pareto_k"] and chains_of(diag, "pareto_k") == [0]


def chains_of(diag, check):
    return next(p.chains for p in diag.problems if p.check == check)


def test_stage_and_start_weights_that_underflow_are_flagged():
    """k̂ is inf when all but a few weights underflow (tail_stats.pareto_khat); a stage or a
    start whose every k̂ is inf must be flagged, not dropped as 'no measurement' (NaN)."""
    lw = np.full(500, -2000.0)
    lw[:5] = 0.0  # five weights carry everything; the rest are exp(-2000) = 0
    assert dg.pareto_khat(lw) == np.inf
    tails = np.stack([log_weight_tail(lw) for _ in range(10)])
    chains = [_chain(seed=s, weight_tail=tails) for s in range(2)]
    diag = _check(chains)
    assert "pareto_k" in diag.flags and chains[0]["pareto_k_max"] == np.inf
    good = {"init": "laplace", "laplace_converged": 1, "laplace_n_nonconcave": 0}
    d = _check([_chain(seed=s, initial_weight_tail=log_weight_tail(lw)) for s in range(2)], good)
    assert d.flags == ["start"] and "Pareto k̂ inf" in str(d)
    # final weights of the same shape: the pooled k̂ is inf, and the report shows it
    d = _check([_chain(seed=s, log_weights=lw, n_resamplings=0) for s in range(2)])
    assert "pareto_k" in d.flags and "pooled final weights: inf" in str(d)


def test_heavy_tailed_final_weights_are_flagged():
    rng = np.random.default_rng(6)
    heavy = [
        _chain(seed=s, n_resamplings=0, log_weights=-1.0 * np.log(rng.random(500)))
        for s in range(2)
    ]
    diag = _check(heavy)
    assert "pareto_k" in diag.flags and diag.table.shape[0] == 2


def test_moves_that_do_not_move_are_flagged():
    stuck = _chain(
        seed=0, move_correlation=np.full(10, 0.97), move_correlation_max=np.full(10, 0.99)
    )
    assert _check([stuck, _chain(seed=1)]).flags == ["mixing"]
    # a bimodal target keeps ~0.7 through mode membership: not flagged
    assert _check([_chain(seed=0, move_correlation=np.full(10, 0.7)), _chain(seed=1)]).ok
    # only the stages that resampled have copies to break up: single moves in stages that
    # kept their weights (τ = 1, CR-SMC's idle stages) that leave the particles in place are
    # not a mixing failure (counted, 2 of 3 stages would be "stuck")
    last = dict(move_correlation=np.array([0.2, 0.99, 0.99]), tau=np.linspace(0.25, 1, 3),
                move_correlation_max=np.array([0.4, 0.999, 0.999]), weight_tail=None)
    resampled = np.array([True, False, False])
    chains = [_chain(seed=s, **last, resampled=resampled) for s in range(2)]
    for c in chains:
        c["weight_tail"] = np.stack([log_weight_tail(np.zeros(500))] * 3)
    assert _check(chains).ok
    stuck = [dict(c, move_correlation=np.full(3, 0.97), move_correlation_max=np.full(3, 0.99))
             for c in chains]  # fmt: skip
    assert _check(stuck).flags == ["mixing"]


def test_max_steps_is_flagged():
    assert _check([_chain(seed=0, hit_max_steps=True), _chain(seed=1)]).flags == ["max_steps"]


def test_laplace_start_checks():
    good = {"init": "laplace", "laplace_converged": 1, "laplace_n_nonconcave": 0}
    rng = np.random.default_rng(0)
    light = log_weight_tail(rng.normal(size=500) * 0.3)
    heavy = log_weight_tail(-1.0 * np.log(rng.random(500)))
    assert _check([_chain(seed=s, initial_weight_tail=light) for s in range(2)], good).ok
    d = _check([_chain(seed=s, initial_weight_tail=heavy) for s in range(2)], good)
    assert d.flags == ["start"] and "Pareto" in str(d)
    d = _check([_chain(seed=s) for s in range(2)], {**good, "laplace_n_nonconcave": 2})
    assert d.flags == ["start"] and "non-concave" in str(d)
    d = _check([_chain(seed=s) for s in range(2)], {**good, "laplace_converged": 0})
    assert d.flags == ["start"]


def test_modes_found_by_the_automatic_start_are_flagged():
    chains = [_chain(seed=s) for s in range(2)]
    one = {"init": "auto", "init_choice": "laplace", "init_reason": "ok", "init_n_modes": 1}
    assert _check(chains, one).ok
    several = {**one, "init_choice": "prior", "init_n_modes": 3}
    d = _check(chains, several)
    assert d.flags == ["modes"] and "3 separated modes" in str(d)
    # no search ran (init="prior" forced): nothing to report
    assert _check(chains, {"init": "prior", "init_n_modes": 3}).ok


def test_rts_after_a_start_without_interior_mode_is_flagged():
    """RTS is flagged where init='auto' found no interior mode (it was silently 0.3 nat low on
    the centred funnel); SMC and CR-AIS, whose own checks see their failures, are not."""
    chains = [_chain(seed=s) for s in range(2)]
    funnel = {"init": "auto", "init_choice": "prior", "laplace_n_nonconcave": 2}
    d = _check(chains, {**funnel, "method": "rts"})
    assert d.flags == ["funnel"] and "sample_smc" in str(d)
    assert _check(chains, {**funnel, "method": "smc"}).ok
    assert _check(chains, {**funnel, "method": "rts", "laplace_n_nonconcave": 0}).ok
    assert _check(chains, {"init": "prior", "method": "rts"}).ok


def test_laplace_fit_counts_non_concave_directions():
    def log_target(x):  # concave in x0, flat in x1: no interior mode along x1
        return -0.5 * x[:, 0] ** 2

    def grad(x):
        return np.stack([-x[:, 0], np.zeros(len(x))], axis=1)

    dens = FunctionDensity(2, lambda x: np.zeros(len(x)), log_target, lambda x: 0 * x, grad)
    assert laplace_fit(dens, np.array([1.0, 0.5])).n_nonconcave == 1
    dens = FunctionDensity(
        2,
        lambda x: np.zeros(len(x)),
        lambda x: -0.5 * np.sum(x**2, 1),
        lambda x: 0 * x,
        lambda x: -x,
    )
    assert laplace_fit(dens, np.array([1.0, 0.5])).n_nonconcave == 0


# ----------------------------------------------------------------------------- end to end
def test_sampler_runs_store_diagnostics_and_report():
    case = em.normal_mean()
    with warnings.catch_warnings():
        warnings.simplefilter("error", pmc.UnreliableEvidenceWarning)
        idata = pmc.sample_smc(model=case.model, draws=300, chains=2, random_seed=3, **QUIET)
    st = idata.sample_stats
    for name in ("pareto_k", "move_correlation", "move_correlation_max"):
        assert st[name].dims == ("chain", "stage")
    for name in ("pareto_k_final", "pareto_k_max", "move_correlation_mean", "n_eves"):
        assert st[name].dims == ("chain",)
    assert st.attrs["diagnostics_flags"] == ""
    diag = pmc.diagnose(idata)
    assert diag.ok and list(diag.table.index) == [0, 1] and np.isfinite(diag.log_z)
    table = pmc.compare({"a": idata, "b": (case.log_z - 5.0, 0.1)})
    assert list(table["unreliable"]) == ["", ""]
    raw = pmc.sample_smc(
        model=case.model, draws=300, chains=2, random_seed=3, return_inferencedata=False, **QUIET
    )
    again = pmc.diagnose(raw)
    assert again.ok and again.table.equals(diag.table)


def test_a_poor_run_warns_and_is_flagged_in_compare():
    case = em.linear_regression()
    with pytest.warns(pmc.UnreliableEvidenceWarning, match="pareto_k") as rec:
        bad = pmc.sample_ais(
            model=case.model, draws=300, n_steps=5, chains=2, random_seed=3, init="prior", **QUIET
        )  # from the prior: 5 steps are far too few
    text = str(next(w.message for w in rec if w.category is pmc.UnreliableEvidenceWarning))
    assert "n_steps" in text and "diagnose" in text  # says what to do
    assert "pareto_k" in bad.sample_stats.attrs["diagnostics_flags"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pmc.UnreliableEvidenceWarning)
        table = pmc.compare({"bad": bad, "other": (case.log_z - 50.0, 0.1)})
    assert "pareto_k" in table.loc["bad", "unreliable"] and table.loc["other", "unreliable"] == ""
    assert re.search(r"UNRELIABLE: [a-z_,]*pareto_k", repr(table)) and "Flags(" not in repr(table)
    with pytest.raises(TypeError, match="idata"):
        pmc.diagnose(None)


# ----------------------------------------------------------------------------- bad input
def test_plus_inf_density_names_the_potential():
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0)
        pm.Potential("half_inf", pt.switch(x > 0, np.inf, 0.0))
    with pytest.raises(ImpossibleModelError, match="Potential 'half_inf'") as info:
        pmc.sample_smc(model=model, draws=100, chains=1, random_seed=1, **QUIET)
    assert isinstance(info.value.__cause__, InfiniteDensityError)


def test_impossible_data_names_the_observed_variable():
    with pm.Model() as model:
        lam = pm.Exponential("lam", 1.0)
        pm.Poisson("counts", lam, observed=np.array([1, -2, 3]))
    with pytest.raises(ImpossibleModelError, match="observed variable 'counts'.*impossible"):
        pmc.sample_smc(model=model, draws=100, chains=2, random_seed=1, **QUIET)


def test_core_refuses_plus_inf():
    dens = FunctionDensity(
        1, lambda x: np.zeros(len(x)), lambda x: np.where(x[:, 0] > 0, np.inf, 0.0)
    )
    with pytest.raises(InfiniteDensityError, match=r"\+inf at 1 particle") as info:
        dens.evaluate(np.array([[-1.0], [2.0]]))
    np.testing.assert_array_equal(info.value.points, [[2.0]])


@pytest.mark.parametrize("seed", [-1, [3, -2]])
def test_negative_seed_names_the_argument(seed):
    with pytest.raises(ValueError, match="random_seed must be a non-negative integer"):
        pmc.sample_ais(model=em.normal_mean().model, draws=50, chains=2, random_seed=seed, **QUIET)


@pytest.mark.parametrize("bad", [None, 3.0, "idata"])
def test_log_marginal_likelihood_of_non_result_names_idata(bad):
    with pytest.raises(TypeError, match="idata must be the output of a pymc_crais sampler"):
        pmc.log_marginal_likelihood(bad)


# ----------------------------------------------------------------------------- global RNG
def test_first_call_in_a_fresh_process_leaves_the_global_rng_alone():
    code = textwrap.dedent(
        """
        import numpy as np
        try:  # importing JAX draws from NumPy's global RNG, and ArviZ imports it lazily
            import jax  # when it is installed (pymc_crais[jax]); not pymc_crais' doing
        except ImportError:
            pass
        np.random.seed(20160911)
        before = np.random.get_state()
        import pymc as pm
        import pymc_crais as pmc
        with pm.Model() as m:
            x = pm.Uniform("x", -2, 2, shape=2)
            pm.Potential("p", -((x - 0.5) ** 2).sum() / 0.02)
        pmc.sample_smc(draws=100, model=m, chains=2, cores=1, progressbar=False,
                       return_inferencedata=False)
        pmc.sample_ais(draws=50, n_steps=5, model=m, chains=2, cores=1, progressbar=False)
        after = np.random.get_state()
        same = before[0] == after[0] and np.array_equal(before[1], after[1])
        same = same and before[2:] == after[2:]
        print("SAME" if same else "CHANGED")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("SAME"), out.stdout


# ----------------------------------------------------------------------------- slow: the bar
def _run_default(sampler, model, seed):
    fn = {"ais": pmc.sample_ais, "crais": pmc.sample_crais, "smc": pmc.sample_smc}[sampler]
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        idata = fn(model=model, chains=4, random_seed=seed, **QUIET)
    flagged = any(issubclass(w.category, pmc.UnreliableEvidenceWarning) for w in rec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value, mcse = pmc.log_marginal_likelihood(idata)
    return value, mcse, flagged


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["smc", "crais", "ais"])
@pytest.mark.parametrize(
    "case",
    [
        "d50_regression",
        "mixture10",
        pytest.param(
            "mixture10_unequal",
            marks=pytest.mark.xfail(
                reason="when every chain misses the same modes nothing in the run shows it "
                "(docs/reliability.md, issue 13's silent failures)",
                strict=False,
            ),
        ),
    ],
)
def test_issue13_silent_failures_are_right_or_flagged(case, sampler):
    """Issue 13's table: every miss by more than 3 MCSE must raise the warning."""
    from pymc_crais.validation.testing import build_case

    model, exact = build_case(case)
    value, mcse, flagged = _run_default(sampler, model, 2026)
    assert flagged or abs(value - exact) <= 3 * mcse, (value, exact, mcse)


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["smc", "crais", "ais"])
@pytest.mark.parametrize("case", ["normal_mean", "beta_binomial", "gaussian_mixture_potential"])
def test_right_runs_rarely_warn(case, sampler):
    """On easy exact models the defaults are right, and must not cry wolf (2 seeds each)."""
    c = getattr(em, case)()
    for seed in (11, 12):
        value, mcse, flagged = _run_default(sampler, c.model, seed)
        assert abs(value - c.log_z) <= 3 * mcse + 0.01, (seed, value, c.log_z, mcse)
        assert not flagged, seed


def test_likelihood_plus_inf_outside_the_start_support_is_no_error():
    """Δ = log π̃ − log q0 is +inf wherever log q0 = -inf: there Δ is dropped (no weight),
    not reported as an improper likelihood. A diverging HMC trajectory of CR-AIS on
    ``hier_noncentered`` (seed 13) reached coordinates of 1e154, where a Student-t start's
    z·z overflows (log q0 = -inf) while the model's density is still finite, and the run
    stopped with InfiniteDensityError."""
    from pymc_crais.core.initial import GaussianInitial, InitialReweightedDensity

    def log_cauchy(x):  # finite at any finite x
        return -np.sum(np.log(np.pi) + 2.0 * np.log(np.abs(x)) + np.log1p(x**-2.0), axis=1)

    base = FunctionDensity(2, log_cauchy, log_cauchy)
    start = InitialReweightedDensity(2, base=base, initial=GaussianInitial(np.zeros(2), np.eye(2)))
    x = np.array([[0.5, -0.5], [1e200, -2e200]])
    with np.errstate(over="ignore"):
        ev = start.evaluate(x)
    assert np.isfinite(ev.delta[0]) and ev.delta[1] == -np.inf and ev.log_q0[1] == -np.inf
    # with q0 > 0, a +inf likelihood is still an error
    dens = FunctionDensity(1, lambda x: np.zeros(len(x)), lambda x: np.full(len(x), np.inf))
    with pytest.raises(InfiniteDensityError, match="likelihood"):
        dens.evaluate(np.zeros((2, 1)))
