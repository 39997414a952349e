"""sample_smc's conditional-Laplace start (samplers/engine/conditional_start.py): which
coordinates are latent, when the start is tried, and on a centred hierarchical model whose
Laplace fit fails, a one-stage run that is right, reproducible, counted and recorded."""

from types import SimpleNamespace

import numpy as np
import pymc as pm
import pytest

import pymc_crais as pmc
from pymc_crais.core.conditional_laplace import Blocks, HyperFit
from pymc_crais.core.density import FunctionDensity
from pymc_crais.samplers.engine import conditional_start as cs
from pymc_crais.samplers.engine.compile import parameter_layout
from pymc_crais.validation.cases import get_case


def test_latent_coordinates_are_plain_vectors_and_the_rest_hyperparameters():
    with pm.Model() as m:
        mu = pm.Normal("mu", 0.0, 1.0)  # a scalar: hyper
        sd = pm.HalfNormal("sd", 1.0)  # a transform: hyper
        a = pm.Normal("a", mu, sd, shape=5)  # latent
        w = pm.Beta("w", 2.0, 2.0, shape=2)  # a transform: hyper
        pm.Normal("y", a.sum() * w.sum(), 1.0, observed=[0.1])
    b = cs.model_blocks(m, parameter_layout(m))
    layout = parameter_layout(m)
    starts = {s.rv_name: (s.start, s.stop) for s in layout.slots}
    assert set(b.latent) == set(range(*starts["a"]))
    assert set(b.hyper) == set(range(layout.dim)) - set(b.latent)


def test_no_blocks_without_a_latent_vector_or_with_too_many_hyperparameters():
    with pm.Model() as none_latent:
        pm.Normal("b", 0.0, 1.0, shape=4, transform=pm.distributions.transforms.ordered,
                  initval=np.arange(4.0))  # fmt: skip
        pm.HalfNormal("s", 1.0)
    with pm.Model() as no_hyper:
        pm.Normal("b", 0.0, 1.0, shape=4)
    with pm.Model() as many:
        pm.HalfNormal("s", 1.0, shape=cs.MAX_HYPER + 1)
        pm.Normal("b", 0.0, 1.0, shape=4)
    with pm.Model() as discrete:
        pm.Poisson("k", 3.0)
        pm.Normal("b", 0.0, 1.0, shape=4)
    for m in (none_latent, no_hyper, many, discrete):
        assert cs.model_blocks(m, parameter_layout(m)) is None


def test_untransformed_scalars_are_tried_on_both_sides():
    with pm.Model() as m:
        mu = pm.Normal("mu", 0.0, 1.0)
        sd = pm.HalfNormal("sd", 1.0)
        pm.Normal("a", mu, sd, shape=5)
    layout = parameter_layout(m)
    splits = cs.candidate_blocks(m, layout)
    assert [b.hyper.size for b in splits] == [2, 1]
    with pm.Model() as only_scales:
        sd = pm.HalfNormal("sd", 1.0)
        pm.Normal("a", 0.0, sd, shape=5)
    assert len(cs.candidate_blocks(only_scales, parameter_layout(only_scales))) == 1


def test_beside_a_laplace_fit_a_split_needs_a_scale_among_its_hyperparameters():
    """An intercept alone moves the coefficients' conditional mode, not its shape: beside a
    Laplace fit such a split is not tried (Sonar with intercept: always refused, 0.75 s);
    where the fit failed it still is."""
    with pm.Model() as glm:
        pm.Normal("alpha", 0.0, 1.0)
        pm.Normal("beta", 0.0, 1.0, shape=5)
    layout = parameter_layout(glm)
    assert [b.hyper.size for b in cs.candidate_blocks(glm, layout)] == [1]
    assert cs.candidate_blocks(glm, layout, beside_fit=True) == []
    with pm.Model() as hier:
        mu = pm.Normal("mu", 0.0, 1.0)
        sd = pm.HalfNormal("sd", 1.0)
        pm.Normal("a", mu, sd, shape=5)
    kept = cs.candidate_blocks(hier, parameter_layout(hier), beside_fit=True)
    assert [b.hyper.size for b in kept] == [2, 1]


def test_sonar_with_intercept_skips_the_start_beside_its_laplace_fit():
    inst = get_case("sonar_int_sd1").build()
    res = pmc.sample_smc(model=inst.model, draws=300, chains=1, cores=1, random_seed=2,
                         progressbar=False)  # fmt: skip
    attrs = res["sample_stats"].attrs
    assert attrs["init_pareto_k"] > 0.7  # a heavy Laplace start: the start's rule applies
    assert "n_logp_evals_conditional_start" not in attrs


def _setup(gradient=True, **attrs):
    base = {"init": "auto", "init_choice": "prior", "init_n_modes": np.nan}
    merged = {k: v for k, v in {**base, **attrs}.items() if v is not None}
    return SimpleNamespace(attrs=merged, model_density=SimpleNamespace(has_gradient=gradient))


@pytest.mark.parametrize(
    ("setup", "wanted"),
    [
        (_setup(), True),  # the Laplace fit failed: no mode search ran
        (_setup(init_choice="laplace", init_n_modes=1.0, init_pareto_k=1.3), True),  # heavy
        (_setup(init_choice="laplace", init_n_modes=1.0, init_pareto_k=0.4), False),  # good
        (_setup(init_n_modes=2.0), False),  # several modes: the rule for them stays
        (_setup(init_choice="modes", init_n_modes=2.0, init_pareto_k=1.3), False),
        (_setup(init="prior"), False),  # the user's choice
        (_setup(gradient=False), False),
    ],
)
def test_when_sample_smc_tries_the_start(setup, wanted):
    assert cs.smc_needs_conditional_start(setup) is wanted


def test_the_guard_sees_a_second_latent_mode():
    """A latent coordinate with two conditional modes (at ±3): Newton runs from either side
    end apart, so the start is refused; with one mode they meet."""

    def make(bimodal):
        def logp(z):
            x = z[:, 1]
            if bimodal:
                return -0.5 * z[:, 0] ** 2 + np.logaddexp(-0.5 * (x - 3) ** 2, -0.5 * (x + 3) ** 2)
            return -0.5 * z[:, 0] ** 2 - 0.5 * (x - 3) ** 2

        def grad(z, h=1e-6):
            e = np.eye(2) * h
            return np.column_stack([(logp(z + e[i]) - logp(z - e[i])) / (2 * h) for i in range(2)])

        return FunctionDensity(2, log_q0=lambda z: np.zeros(len(z)), log_target=logp,
                               grad_log_q0=np.zeros_like, grad_log_target=grad)  # fmt: skip

    blocks = Blocks(np.array([0]), np.array([1]))
    fit = HyperFit(np.zeros(1), np.eye(1), np.array([2.5]), 0)
    starts = np.array([[0.0, -4.0], [0.0, 4.0], [0.0, -2.0]])
    assert "apart" in cs._guard(make(True), blocks, fit, starts)
    assert cs._guard(make(False), blocks, fit, starts) is None


@pytest.fixture(scope="module")
def centred():
    return get_case("eight_schools_centered").build()


@pytest.fixture(scope="module")
def runs(centred):
    kw = {"model": centred.model, "draws": 400, "chains": 2, "random_seed": 7, "progressbar": False}
    return pmc.sample_smc(cores=1, **kw), pmc.sample_smc(cores=2, **kw)


def test_a_centred_model_takes_the_start_and_is_right(centred, runs):
    res = runs[0]
    attrs = res["sample_stats"].attrs
    assert attrs["init_choice"] == "conditional_laplace"
    assert attrs["init_first_choice"] == "prior"  # the Laplace fit failed (a funnel)
    # τ is a hyperparameter, θ latent; μ either (the second split is tried unless the first
    # leaves it less to save than it would cost; the better pilot is kept)
    assert attrs["init_conditional_splits"] in (1, 2)
    assert (attrs["init_conditional_hyper"], attrs["init_conditional_latent"]) in ((1, 9), (2, 8))
    kept = min(
        attrs["init_conditional_pareto_k"], attrs.get("init_conditional_pareto_k_refit", np.inf)
    )
    assert kept <= cs.KHAT
    lz, se = pmc.log_marginal_likelihood(res)
    assert 0 < se < 0.05
    # the copies per θ draw are sized from the pilot for the default target (0.02 at 2 × 400
    # draws here): predicted and measured errors agree within a factor of two. The latent
    # Hessian is diagonal (one colour) when μ is a hyperparameter; with μ latent its pattern
    # is an arrow, which the colouring leaves dense
    copies = attrs["init_conditional_copies"]
    assert cs.MIN_COPIES <= copies <= cs.MAX_COPIES and 400 % copies == 0
    assert attrs["init_conditional_newton_evals"] > 0
    colors = attrs["init_conditional_hessian_colors"]
    assert colors == 1 if attrs["init_conditional_latent"] == 8 else np.isnan(colors)
    assert 0.5 < se / attrs["init_conditional_predicted_mcse"] < 2.0
    assert abs(lz - centred.log_z) < max(4 * se, 0.05)
    ss = res["sample_stats"]
    assert (ss["n_stages"].values == 1).all()  # one importance stage, moves at τ = 1
    # its draws are weighted posterior draws: at most 3 transitions at τ = 1 break up the
    # families that share a θ draw (whose k̂ the pooled k̂ is)
    assert attrs["max_mcmc_steps"] == cs.CONDITIONAL_MAX_MCMC_STEPS == 3
    assert (ss["mcmc_steps"].values[:, 0] <= 3).all()
    assert np.isfinite(ss["pareto_k_families"].values).all()
    assert (ss["family_copies"].values == copies).all()
    # the Newton runs of each chain are counted in its evaluations, the pilot's at the run level
    assert attrs["n_logp_evals_conditional_start"] > 0
    assert attrs["n_logp_evals_pilot"] >= attrs["n_logp_evals_conditional_start"]
    assert (ss["n_logp_evals"].values > 400).all()


def test_same_seed_same_bits_whatever_the_cores(runs):
    a, b = (r["sample_stats"]["log_marginal_likelihood"].values for r in runs)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(
        runs[0]["posterior"]["mu"].values, runs[1]["posterior"]["mu"].values
    )


@pytest.mark.parametrize(
    "option", [{"conditional_start": False}, {"threshold": 0.8}, {"schedule": "cess"}]
)
def test_the_option_and_a_chosen_schedule_leave_the_rules_without_it(centred, option):
    res = pmc.sample_smc(model=centred.model, draws=200, chains=1, cores=1, random_seed=1,
                         progressbar=False, **option)  # fmt: skip
    attrs = res["sample_stats"].attrs
    assert attrs["init_choice"] != "conditional_laplace"
    assert "init_conditional_reason" not in attrs  # not tried


def test_sample_smc_keeps_the_start_where_the_laplace_fit_failed_whatever_its_prediction(centred):
    """Where the Laplace fit failed (a funnel) annealing from the prior is what misses (the
    AR(1)): ``sample_smc`` keeps the start even at a target its pilot cannot promise."""
    kw = {"model": centred.model, "draws": 400, "chains": 2, "cores": 1, "progressbar": False}
    res = pmc.sample_smc(random_seed=5, target_mcse=1e-4, **kw)
    a = res["sample_stats"].attrs
    assert a["init_choice"] == "conditional_laplace" and a["init_first_choice"] == "prior"
    assert a["init_conditional_predicted_mcse"] > 3e-4
    assert int(res["sample_stats"]["n_stages"].values.max()) == 1


@pytest.mark.parametrize("first, factor, kept, predicted", [
    ("prior", np.inf, True, 0.5), ("laplace", np.inf, False, 0.5), ("prior", 1.0, False, 0.5),
    ("prior", np.inf, True, np.nan), ("laplace", np.inf, False, np.nan),
])  # fmt: skip
def test_sample_smc_refuses_a_start_above_its_target_beside_a_laplace_fit(
    monkeypatch, first, factor, kept, predicted
):
    """Beside a Laplace start (heavy, k̂ > 0.7) the start must meet the target: Sonar's
    intercept model took one predicted at 0.045-0.095 and gave MCSEs of 0.17-0.63."""
    import types

    new = object()
    found = {"init_choice": "conditional_laplace", "init_conditional_predicted_mcse": predicted,
             "init_conditional_copies": 4}  # fmt: skip
    monkeypatch.setattr(cs, "smc_conditional_start", lambda setup, target: (new, dict(found)))
    attrs = {"init_choice": "prior", "init_n_modes": np.nan if first == "prior" else 1}
    old = types.SimpleNamespace(attrs=attrs)
    setup, out, mcse = cs.one_step_conditional_start(old, 0.02, no_fit_factor=factor)
    assert (setup is new) == kept and ((mcse is not None) == kept)
    if not kept:
        assert "x target_mcse 0.02" in out["init_conditional_reason"]


def test_the_option_is_checked():
    with pytest.raises(TypeError, match="conditional_start must be True or False"):
        pmc.sample_smc(model=pm.Model(), conditional_start="yes")


def test_the_drop_in_kernel_takes_the_start_too(centred):
    with centred.model:
        idata = pm.sample_smc(kernel=pmc.BatchedSMC, draws=400, chains=2, cores=1,
                              random_seed=3, progressbar=False)  # fmt: skip
    assert idata.sample_stats.attrs["init_choice"] == "conditional_laplace"
    lz, se = pmc.log_marginal_likelihood(idata)
    assert abs(lz - centred.log_z) < max(4 * se, 0.05)


def test_cr_smc_takes_the_start_where_it_sizes_its_own_run(centred):
    """``pm.sample_smc(kernel=pmc.CRSMC)`` starts where ``pmc.sample_smc()`` starts: on a
    latent-Gaussian model the conditional start's one importance stage (before, CR-SMC
    annealed from the prior or a heavy Laplace fit: ``applied_bugs_oneway`` −2.3 to −3.9
    nats, flagged); a chosen ``n_steps`` or ``delta`` keeps the constant-rate run."""
    with centred.model:
        idata = pm.sample_smc(kernel=pmc.CRSMC, draws=400, chains=2, cores=1,
                              random_seed=3, progressbar=False)  # fmt: skip
    assert idata.sample_stats.attrs["init_choice"] == "conditional_laplace"
    assert idata.sample_stats.attrs["schedule"] == "one_step"
    assert (idata.sample_stats["beta"].values == 1.0).all()  # one stage a chain
    lz, se = pmc.log_marginal_likelihood(idata)
    assert abs(lz - centred.log_z) < max(4 * se, 0.05)
    for chosen in ({"n_steps": 20}, {"delta": 0.5}):
        res = pmc.sample_smc(model=centred.model, draws=200, chains=1, cores=1, random_seed=1,
                             progressbar=False, schedule="constant_rate", **chosen)  # fmt: skip
        attrs = res["sample_stats"].attrs
        assert "init_conditional_reason" not in attrs  # not tried
        assert "n_logp_evals_conditional_start" not in attrs and attrs["schedule"] == "constant_rate"


def test_batched_chains_with_jax_draw_from_the_start(centred):
    pytest.importorskip("jax")
    kw = {"model": centred.model, "draws": 200, "chains": 2, "random_seed": 4, "progressbar": False}
    jax = pmc.sample_smc(backend="jax", **kw)["sample_stats"]
    assert jax.attrs["init_choice"] == "conditional_laplace"
    assert np.isfinite(jax["log_marginal_likelihood"].values).all()


def test_crais_takes_the_start_as_its_one_step_run_when_it_meets_the_target(centred):
    kw = {"model": centred.model, "draws": 400, "chains": 2, "cores": 1, "progressbar": False}
    res = pmc.sample_crais(random_seed=5, target_mcse=0.06, **kw)  # 2 × 100 families
    attrs = res["sample_stats"].attrs
    assert attrs["init_choice"] == "conditional_laplace" and attrs["schedule"] == "one_step"
    assert attrs["predicted_mcse"] == attrs["init_conditional_predicted_mcse"] <= 0.06
    lz, se = pmc.log_marginal_likelihood(res)
    assert abs(lz - centred.log_z) < max(4 * se, 0.05)
    # within CRAIS_TARGET_FACTOR x the target: kept (its alternatives missed the AR(1))
    near = pmc.sample_crais(random_seed=5, target_mcse=0.01, **kw)  # predicted about 0.023
    na = near["sample_stats"].attrs
    assert na["init_choice"] == "conditional_laplace" and na["schedule"] == "one_step"
    assert na["target_mcse"] < na["predicted_mcse"] <= cs.CRAIS_TARGET_FACTOR * na["target_mcse"]
    # a target its pilot cannot promise: the start is not kept, CR-AIS anneals as before
    tight = pmc.sample_crais(random_seed=5, target_mcse=1e-4, n_tune_steps=8, max_steps=16, **kw)
    a = tight["sample_stats"].attrs
    assert a["init_choice"] != "conditional_laplace"
    assert "x target_mcse" in a["init_conditional_reason"]


def test_the_run_is_sized_for_the_target_and_more_pilots_only_where_they_pay():
    t = cs._Target(draws=2000, chains=4, target_mcse=0.02)
    # B = 0.32, W = 0: sqrt(0.32 c / 8000) <= 0.02 up to c = 10 (a divisor of 2000)
    assert t.copies(-0.5, (0.32, 0.0)) == 10
    assert t.predicted((0.32, 0.0), 10) == pytest.approx(0.02)
    # a pilot whose k̂ is not light keeps COPIES, and any better proposal may pay
    assert t.copies(0.6, (0.01, 0.0)) == cs.COPIES
    assert t.saving(0.6, (0.01, 0.0), 100.0) == np.inf
    # Newton runs of 100 evaluations: 4 chains × (200 − 125) runs left to save at c = 10
    assert t.saving(-0.5, (0.32, 0.0), 100.0) == pytest.approx(4 * 75 * 100)
    # at the most copies, nothing is left to save
    assert t.saving(-0.5, (0.001, 0.0), 100.0) == 0.0
    # where COPIES miss the target, fewer (down to MIN_COPIES: twice the Newton runs) meet
    # it if they can (the AR(1): B = 1.67, predicted 0.029 at 4 copies, 0.020 at 2)
    assert t.predicted((1.3, 0.0), cs.COPIES) > 0.02 >= t.predicted((1.3, 0.0), 2)
    assert t.copies(-0.5, (1.3, 0.0)) == 2 and t.copies(-0.5, (1.67, 0.0)) == cs.MIN_COPIES
    # a light pilot whose run misses the target: any better proposal may be what keeps it
    assert t.predicted((5.0, 0.0), t.copies(-0.5, (5.0, 0.0))) > 0.02
    assert t.saving(-0.5, (5.0, 0.0), 100.0) == np.inf


def test_the_refit_is_a_kernel_estimate_after_a_light_pilot_and_moments_after_a_heavy_one():
    from pymc_crais.core.conditional_laplace import ConditionalLaplace, WeightedStart
    from pymc_crais.core.mode_mixture import StudentTMixture

    rng = np.random.default_rng(5)
    blocks = Blocks(np.array([0]), np.array([1, 2]))
    fit = HyperFit(np.zeros(1), np.eye(1), np.zeros(2), 0)
    proposal = ConditionalLaplace(blocks, cs._theta_proposal(fit), np.zeros(2), cs.COPIES)
    # a pilot of 200 families of 4: θ skewed to the right, weights favouring large θ
    theta = rng.gamma(2.0, 1.0, 200)
    x = np.repeat(np.column_stack([theta, np.zeros((200, 2))]), 4, axis=0)
    start = WeightedStart(x, np.zeros(800), np.repeat(np.arange(200), 4))
    lw = 0.3 * theta
    lw[:3] = -40.0  # negligible families get no kernel
    kernel = cs._refit(fit, proposal, start, lw, light=True).theta
    assert isinstance(kernel, StudentTMixture) and len(kernel.components) == 197 + 1
    assert kernel.weights[-1] == pytest.approx(cs.REFIT_WIDE_WEIGHT)
    w = np.exp(lw - lw.max())
    w /= w.sum()
    # the kernels sit at the heavy draws, the weights are the pilot's (renormalized)
    np.testing.assert_allclose(
        kernel.weights[:-1] / kernel.weights[:-1].sum(), w[3:] / w[3:].sum(), rtol=1e-9
    )
    # a proper density over θ: its draws' mean is the kernel mixture's
    draws = kernel.draw(rng, 20000)
    expected = (1 - cs.REFIT_WIDE_WEIGHT) * (w[3:] / w[3:].sum()) @ theta[3:]  # wide: mean 0
    assert abs(draws.mean() - expected) < 0.05
    moments = cs._refit(fit, proposal, start, lw, light=False).theta
    assert len(moments.components) == 2
    assert moments.weights[-1] == pytest.approx(cs.WIDE_WEIGHT)
    np.testing.assert_allclose(moments.components[0].mean, [w @ theta], rtol=1e-9)


@pytest.mark.parametrize("first, kept", [("prior", True), ("laplace", False)])
def test_crais_keeps_a_start_above_its_target_only_where_the_laplace_fit_failed(
    monkeypatch, first, kept
):
    """Predicted at 2 x the target: kept where the automatic start fell back to the prior
    (CR-AIS's other starts missed the AR(1)), refused beside a Laplace start (Sonar)."""
    new = object()
    found = {"init_choice": "conditional_laplace", "init_first_choice": first,
             "init_conditional_predicted_mcse": 0.04, "init_conditional_copies": 4}  # fmt: skip
    monkeypatch.setattr(cs, "smc_conditional_start", lambda setup, target: (new, dict(found)))
    import types

    first = {"init_choice": "prior", "init_n_modes": np.nan} if first == "prior" else {
        "init_choice": "prior", "init_n_modes": 1}  # a fit whose pilot was heavy: not "no fit"
    old = types.SimpleNamespace(attrs=first)
    setup, attrs, mcse = cs.one_step_conditional_start(old, 0.02)
    assert (setup is new, mcse == 0.04 if kept else mcse is None) == (kept, True)
    if not kept:
        assert setup is old and "init_choice" not in attrs
        assert "> 1 x target_mcse 0.02" in attrs["init_conditional_reason"]


def test_fewer_copies_never_below_min_copies_for_odd_draws():
    """Draws a chain that 2 does not divide: where 4 (or 3) copies miss the target, the run
    keeps them rather than fall to 1 copy (three or four times the Newton runs)."""
    t = cs._Target(draws=2001, chains=4, target_mcse=0.02)
    best = t.copies(-0.5, (1.67, 0.0))
    assert best >= cs.MIN_COPIES and 2001 % best == 0
    assert best == 3  # family_size(2001, 4): 2001 = 3 × 667
