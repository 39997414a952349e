"""init="auto": the choice between a Student-t at the Laplace fit, a widened one and the prior."""

import functools

import numpy as np
import pymc as pm
import pytest

import pymc_crais as pmc
from pymc_crais.core.density import FunctionDensity
from pymc_crais.core.initial import laplace_fit
from pymc_crais.core.mode_search import search_modes
from pymc_crais.samplers.engine.compile import (
    compile_model_density,
    initial_point_vector,
    parameter_layout,
)
from pymc_crais.samplers.engine.init_auto import N_STARTS, choose_initial
from pymc_crais.samplers.engine.prior import prior_sampler
from pymc_crais.validation import testing as em

QUICK = {"chains": 2, "cores": 1, "progressbar": False}


def _choose(model, seed=0):
    layout = parameter_layout(model)
    dens = compile_model_density(model, gradient=True)
    prior = prior_sampler(model, layout)
    before = dens.n_evals
    auto = choose_initial(dens, initial_point_vector(model, layout), prior, np.random.default_rng(seed))
    assert auto.n_evals == dens.n_evals - before == auto.attrs["n_logp_evals_laplace"]
    return auto


def _centred_funnel():
    y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0])
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        theta = pm.Normal("theta", mu, tau, shape=y.size)
        pm.Normal("y", theta, 10.0, observed=y)
    return model


def _gaussian_density(d=3):
    """A FunctionDensity with log q0 = 0 and target N(1, diag(1..d))."""
    var = np.arange(1.0, d + 1)

    def lt(x):
        return -0.5 * np.sum((x - 1.0) ** 2 / var, axis=1)

    def glt(x):
        return -(x - 1.0) / var

    zero = lambda x: np.zeros(x.shape[0])
    return FunctionDensity(d, log_q0=zero, log_target=lt, grad_log_q0=np.zeros_like, grad_log_target=glt)


def _two_mode_density():
    """Equal-weight mixture of N((±3, 0), 0.5² I) as a FunctionDensity (log q0 = 0)."""
    centres = np.array([[3.0, 0.0], [-3.0, 0.0]])

    def parts(x):
        return np.stack([-0.5 * np.sum((x - c) ** 2, axis=1) / 0.25 for c in centres], axis=1)

    def lt(x):
        return np.logaddexp(*parts(x).T)

    def glt(x):
        p = parts(x)
        r = np.exp(p - lt(x)[:, None])
        return sum(r[:, [j]] * -(x - centres[j]) / 0.25 for j in range(2))

    zero = lambda x: np.zeros(x.shape[0])
    return FunctionDensity(2, log_q0=zero, log_target=lt, grad_log_q0=np.zeros_like, grad_log_target=glt)


# ------------------------------------------------------------------- core: the mode search


def test_search_modes_finds_one_mode_of_a_gaussian():
    dens = _gaussian_density()
    fit = laplace_fit(dens, np.zeros(3))
    starts = np.random.default_rng(1).normal(0.0, 5.0, size=(6, 3))
    res = search_modes(dens, starts, fit)
    assert res.n_starts == 6 and res.n_modes == 1 and res.n_unsettled == 0
    assert res.max_distance < 1e-3 and abs(res.max_gain) < 1e-8
    assert res.n_evals > 6


def test_search_modes_finds_the_second_mode():
    dens = _two_mode_density()
    fit = laplace_fit(dens, np.array([1.0, 0.2]))
    np.testing.assert_allclose(fit.mode, [3.0, 0.0], atol=1e-4)
    starts = np.array([[2.0, 1.0], [-2.5, 0.5], [4.0, -1.0]])
    res = search_modes(dens, starts, fit)
    assert res.n_modes == 2
    np.testing.assert_allclose(res.max_distance, 6.0 / (0.5 * 1.0), rtol=1e-3)  # whitened 6 / sd
    # from starts all on one side, the same mode only
    assert search_modes(dens, starts[[0, 2]], fit).n_modes == 1


# ------------------------------------------------------------------- the decision


@pytest.fixture(scope="module")
def regression():
    return em.linear_regression()


def test_conjugate_regression_chooses_the_student_t(regression):
    auto = _choose(regression.model)
    a = auto.attrs
    assert auto.choice == "laplace" and a["init_choice"] == "laplace" and a["init"] == "auto"
    assert a["init_n_modes"] == 1 and a["init_pareto_k"] <= 0.7
    assert np.isnan(a["init_pareto_k_prior"])  # not needed, not spent
    assert a["init_scale"] == 1.2 and a["init_df"] == 5.0
    assert auto.q0 is not None and auto.q0.df == 5.0


def test_a_cheap_search_that_saw_one_mode_adds_starts(regression, monkeypatch):
    """32 starts that saw one mode within MORE_STARTS_EVALS evaluations: 32 more (the search
    runs again from all 64); otherwise not. The start chosen, and the generator's stream
    after the search, are the same either way on a unimodal model."""
    from pymc_crais.samplers.engine import init_auto

    more = _choose(regression.model)
    assert more.attrs["init_mode_starts"] == init_auto.N_STARTS + init_auto.MORE_STARTS
    monkeypatch.setattr(init_auto, "MORE_STARTS_EVALS", 0)
    fewer = _choose(regression.model)
    assert fewer.attrs["init_mode_starts"] == init_auto.N_STARTS
    assert fewer.n_evals < more.n_evals
    assert more.choice == fewer.choice == "laplace"
    assert more.attrs["init_pareto_k"] == fewer.attrs["init_pareto_k"]  # the same pilot draws


def test_heavy_tailed_start_is_compared_with_the_prior(regression, monkeypatch):
    """Every k̂ above the threshold (forced): the widened Student-t and the prior are
    measured too and the smallest k̂ wins (the prior's is far larger on a regression whose
    posterior is much narrower than its prior)."""
    from pymc_crais.samplers.engine import init_auto

    monkeypatch.setattr(init_auto, "KHAT_THRESHOLD", -10.0)
    auto = _choose(regression.model)
    a = auto.attrs
    k = [a["init_pareto_k"], a["init_pareto_k_wide"], a["init_pareto_k_prior"]]
    assert np.all(np.isfinite(k)) and k[2] > max(k[:2])
    assert auto.choice in ("laplace", "laplace_wide") and "smallest" in auto.reason
    assert auto.n_evals > 3 * 1000  # three pilots counted


def test_prior_whose_weights_underflow_never_looks_lightest(monkeypatch):
    """A prior far wider than the posterior: its pilot's log-weights span thousands of
    nats, all but a few weights underflow, and arviz_stats' fit fails or fits the few
    left. That k̂ once read 0.00 (seed 11 of ``nig_d31``: the prior chosen over a
    Student-t of k̂ 0.76, then −0.17 ± 0.07 nat; CR-AIS −15.8). It is ``inf`` now."""
    from pymc_crais.samplers.engine import init_auto

    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 8))
    y = X @ rng.normal(size=8) + 0.3 * rng.normal(size=400)
    with pm.Model() as model:
        b = pm.Normal("b", 0.0, 10.0, shape=8)
        pm.Normal("y", pm.math.dot(X, b), 0.3, observed=y)
    monkeypatch.setattr(init_auto, "KHAT_THRESHOLD", -10.0)  # every pilot measured
    auto = _choose(model)
    a = auto.attrs
    assert a["init_pareto_k_prior"] == np.inf
    assert np.isfinite(a["init_pareto_k"]) and np.isfinite(a["init_pareto_k_wide"])
    assert auto.choice in ("laplace", "laplace_wide") and "inf (prior)" in auto.reason


def test_centred_funnel_does_not_choose_laplace():
    auto = _choose(_centred_funnel())
    assert auto.choice == "prior" and auto.q0 is None
    assert "non-concave" in auto.reason
    assert auto.attrs["laplace_n_nonconcave"] > 0


def test_bimodal_model_does_not_choose_laplace():
    """Not a Student-t at one mode: one at each mode found, mixed with the prior."""
    auto = _choose(em.gaussian_mixture_potential().model)
    assert auto.choice == "modes" and auto.attrs["init_defensive_weight"] == 0.5
    density, draw = auto.start  # the built mixture with the prior, used as built
    assert density.weight == draw.weight == 0.5 and density.initial is auto.q0
    assert len(auto.q0.components) == auto.attrs["init_n_modes_fitted"] >= 2
    assert auto.attrs["init_n_modes"] >= 2
    assert f"from {N_STARTS} starts" in auto.reason


@functools.cache
def _mixture_10d():
    """One model for every seed below: compiled once, not once per seed."""
    from pymc_crais.validation.exact_models import mixture_normalized

    return mixture_normalized()[0]


@pytest.mark.parametrize("seed", [0, 6, 7, 9, 10])
def test_mode_search_sees_the_narrow_components_of_a_10d_mixture(seed):
    """Three components in 10-d (sd 0.5, 0.8, 1): starts far out in the prior fall mostly
    into the widest one's basin. With 8 starts these seeds saw one mode and chose the
    Laplace start at it (AIS then −1.34 nat, unflagged, on the suite's ``mixture3_d10``).
    Seeing several, the start is a Student-t at each mode found, mixed with the prior (or
    the prior), and the ``modes`` check flags the run."""
    auto = _choose(_mixture_10d(), seed=seed)
    assert auto.choice in ("modes", "prior") and auto.attrs["init_n_modes"] >= 2, auto.reason


def test_auto_on_a_discrete_model_is_the_prior():
    with pm.Model() as model:
        pm.Poisson("k", 3.0)
        pm.Normal("y", 0.0, 1.0, observed=[0.0])
    res = pmc.sample_ais(draws=50, n_steps=5, kernel="rwmh", init="auto", model=model, random_seed=1,
                         return_inferencedata=False, **QUICK)  # fmt: skip
    assert res.attrs["init_choice"] == "prior" and "discrete" in res.attrs["init_reason"]


def test_auto_takes_no_init_kwargs():
    with pytest.raises(TypeError, match="init='auto' takes no init_kwargs"):
        pmc.sample_ais(draws=50, init="auto", init_kwargs={"df": 3}, model=em.normal_mean().model, **QUICK)


# ------------------------------------------------------------------- through the samplers

def test_default_is_auto_and_exact_evidence(regression):
    """With no options: the automatic start picks the Student-t and log Z is right."""
    idata = pmc.sample_smc(model=regression.model, random_seed=3, **QUICK)
    a = idata.sample_stats.attrs
    assert a["init"] == "auto" and a["init_choice"] == "laplace"
    assert a["n_logp_evals_laplace"] > 1000  # fit, mode search and pilot all counted
    em.assert_evidence(idata, regression.log_z, max_mcse=0.05)
    report = str(pmc.diagnose(idata))
    assert "init='auto' chose 'laplace'" in report


def test_auto_is_reproducible(regression):
    kw = dict(model=regression.model, draws=200, return_inferencedata=False, **QUICK)
    a = pmc.sample_ais(random_seed=5, **kw)
    b = pmc.sample_ais(random_seed=5, **kw)
    assert a.attrs["init_pareto_k"] == b.attrs["init_pareto_k"]
    np.testing.assert_array_equal(a.posterior["beta"], b.posterior["beta"])


def _bounded_without_transform():
    """A uniform probability left on (0, 1) without its transform, binomial data: the
    log-density is ``-inf`` off the support, and L-BFGS's first unit step leaves it, so the
    optimizer stops where it started (0.5; the mode is 0.7). Exact ``log Z``: the beta-binomial
    ``log C(10, 7) + log B(8, 4)``."""
    from scipy.special import betaln, gammaln

    with pm.Model() as model:
        p = pm.Uniform("p", 0.0, 1.0, default_transform=None)
        pm.Binomial("y", 10, p, observed=7)
    log_z = gammaln(11) - gammaln(8) - gammaln(4) + betaln(8, 4)
    return model, float(log_z)


def test_laplace_fit_that_stopped_on_a_slope_is_rejected(regression):
    model, _ = _bounded_without_transform()
    auto = _choose(model)
    assert auto.choice == "prior"
    assert "still rises" in auto.reason
    assert auto.attrs["laplace_slope"] > 1.0
    # a fit that reached its mode has no slope to speak of
    assert _choose(regression.model).attrs["laplace_slope"] < 1e-3


def test_bounded_model_without_transform_is_right_and_unflagged():
    import warnings

    model, log_z = _bounded_without_transform()
    with warnings.catch_warnings():
        warnings.simplefilter("error", pmc.UnreliableEvidenceWarning)
        idata = pmc.sample_smc(model=model, draws=1000, random_seed=3, **QUICK)
    value, mcse = pmc.log_marginal_likelihood(idata)
    assert abs(value - log_z) < 4 * mcse + 0.02
    # forcing the fit flags the run, and says why
    with pytest.warns(pmc.UnreliableEvidenceWarning, match="still rises"):
        pmc.sample_smc(model=model, draws=300, init="laplace", random_seed=3, **QUICK)


def test_a_gentle_slope_where_lbfgs_stops_is_not_a_second_mode():
    """A normal model with a Uniform(0, 1e6) scale: from one of the 32 starts (seed 2),
    L-BFGS stopped 54 nats below the mode with a whitened gradient of 0.99, and the search
    counted a second mode (so init="auto" started from the prior and warned "modes").
    Restarted from that end, L-BFGS climbs on: one mode, no warning."""
    import warnings

    from pymc_crais.validation import get_case

    model = get_case("applied_uniform_scale").build().model
    with warnings.catch_warnings():
        warnings.simplefilter("error", pmc.UnreliableEvidenceWarning)
        idata = pmc.sample_smc(model=model, random_seed=2, chains=4, cores=1, progressbar=False)
    assert idata["sample_stats"].attrs["init_n_modes"] == 1


def test_lockstep_runs_equal_the_runs_one_at_a_time_and_batch_their_calls():
    from pymc_crais.core.initial import maximize_log_density
    from pymc_crais.core.mode_search import maximize_in_lockstep

    starts = np.array([[2.0, 1.0], [-2.5, 0.5], [4.0, -1.0], [0.3, 2.0]])
    alone = [maximize_log_density(_two_mode_density(), x0, 200) for x0 in starts]
    dens = _two_mode_density()
    together = maximize_in_lockstep(dens, starts, 200)
    for a, b in zip(alone, together, strict=True):
        assert a.x.tobytes() == b.x.tobytes() and a.nit == b.nit and a.fun == b.fun
    assert dens.n_evals == sum(r.nfev for r in alone)  # every row evaluated, once
    calls = []
    counting = _two_mode_density()
    original = counting._evaluate
    counting._evaluate = lambda x, g: calls.append(x.shape[0]) or original(x, g)
    maximize_in_lockstep(counting, starts, 200)
    assert len(calls) == max(r.nfev for r in alone) and max(calls) == len(starts)


def test_an_error_in_one_lockstep_run_is_raised():
    from pymc_crais.core.mode_search import maximize_in_lockstep

    dens = _two_mode_density()
    original = dens._evaluate

    def failing(x, gradient):
        if np.any(x[:, 0] > 3.9):
            raise RuntimeError("boom")
        return original(x, gradient)

    dens._evaluate = failing
    with pytest.raises(RuntimeError, match="boom"):
        maximize_in_lockstep(dens, np.array([[2.0, 1.0], [4.0, -1.0]]), 50)
