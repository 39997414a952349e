"""init="auto"'s mode-mixture start (samplers/engine/init_auto.py, core/mode_mixture.py):
where the mode search finds several modes, the run starts from a Student-t at each, mixed
with the prior; right, counted, recorded, still flagged by the ``modes`` check; the prior
stays where the mixture's pilot weights are heavy-tailed or a mode's fit fails."""

import warnings

import numpy as np
import pytest

import pymc_crais as pmc
from pymc_crais.samplers.engine import init_auto
from pymc_crais.samplers.engine.compile import compile_model_density
from pymc_crais.validation.cases import get_case


@pytest.fixture(scope="module")
def bimodal():
    """``mixture2_d2``: an N(0, 3²) prior times two separated Gaussian bumps (exact log Z)."""
    return get_case("mixture2_d2").build()


def _run(inst, seed=11, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        idata = pmc.sample_smc(model=inst.model, random_seed=seed, progressbar=False, **kw)
    return idata, [w for w in caught if issubclass(w.category, pmc.UnreliableEvidenceWarning)]


def test_the_run_starts_at_the_modes_and_is_right(bimodal):
    idata, flagged = _run(bimodal)
    attrs = idata["sample_stats"].attrs
    assert attrs["init_choice"] == "modes"
    assert attrs["init_n_modes"] == 2 and attrs["init_n_modes_fitted"] == 2
    assert attrs["init_pareto_k_modes"] <= init_auto.MODES_KHAT
    assert attrs["init_family"] == "student_t_mixture"
    assert attrs["init_defensive_weight"] == init_auto.MODES_DEFENSIVE_WEIGHT
    lz, se = pmc.log_marginal_likelihood(idata)
    assert abs(lz - bimodal.log_z) < 3 * se + 1e-3
    # the modes check still warns (a mode the search missed would be missed by the run),
    # and says where the run started
    assert flagged and "started from a Student-t at each" in str(flagged[0].message)
    # the choice's evaluations are counted (exactly: tests/samplers/test_init_auto.py)
    assert attrs["n_logp_evals_laplace"] >= init_auto.N_PILOT


def test_heavy_tailed_pilot_weights_keep_the_prior(bimodal, monkeypatch):
    monkeypatch.setattr(init_auto, "MODES_KHAT", -np.inf)
    idata, _ = _run(bimodal, draws=300, chains=2)
    attrs = idata["sample_stats"].attrs
    assert attrs["init_choice"] == "prior"
    assert "pilot weights have k̂" in attrs["init_reason"] and "the prior" in attrs["init_reason"]


def test_a_failed_mode_fit_keeps_the_prior(bimodal, monkeypatch):
    real = init_auto.fit_problems
    calls = []

    def second_fails(fit):
        calls.append(fit)
        return ["the optimizer did not converge"] if len(calls) == 3 else real(fit)

    monkeypatch.setattr(init_auto, "fit_problems", second_fails)
    idata, _ = _run(bimodal, draws=300, chains=2)
    attrs = idata["sample_stats"].attrs
    assert attrs["init_choice"] == "prior"
    assert "a mode's Laplace fit failed" in attrs["init_reason"]


def test_mirror_modes_are_told_apart_in_their_own_metric(monkeypatch):
    """The label-switching mixture: the first Laplace fit is the symmetric point between the
    two relabelled copies, in whose wide metric the search counts the copies as one mode;
    refitted in their own metrics they are two, plus the symmetric point."""
    model = get_case("applied_mixture_label_switching").build_model()
    dens = compile_model_density(model)
    sym = np.array([0.0, 0.65, 0.65, 0.7])  # the symmetric local mode (logit w, mu, log sigma)
    copy = np.array([0.75, 1.94, -2.12, -0.37])
    mirror = np.array([-0.75, -2.12, 1.94, -0.37])
    ends = [sym, copy, copy + 0.01, mirror]
    ev = dens.evaluate(np.stack(ends), gradient=True)
    fits, why = init_auto.mode_fits(dens, ends, ev.log_q0 + ev.delta)
    # the two copies, equally high; the symmetric point, 46 nats of Laplace mass below,
    # gets no component (MODE_NEGLIGIBLE)
    assert why == "" and len(fits) == 2
    assert sorted(np.round(f.mode[1], 1) for f in fits) == [-2.1, 1.9]
    assert fits[0].log_evidence() == pytest.approx(fits[1].log_evidence(), abs=1e-4)
    monkeypatch.setattr(init_auto, "MODE_NEGLIGIBLE", np.inf)
    fits, _ = init_auto.mode_fits(dens, ends, ev.log_q0 + ev.delta)
    assert len(fits) == 3 and fits[2].log_evidence() < fits[0].log_evidence() - 40


@pytest.mark.parametrize(
    ("masses", "shares", "expected"),
    [((-139.0, -151.1), (0.99, 6e-5), 0), ((-151.1, -139.0), (7e-4, 0.99), 1),
     ((-5.4, -6.2), (0.6, 0.4), None),  # comparable modes (label switching)
     ((-1.0, -12.0, -10.5), (0.9, 1e-4, 1e-4), None),  # one within 10 nats
     ((-1.0, -11.0), (0.9, 0.02), None),  # Laplace says minor, the pilot measures 2 %
     ((-1.0, -12.0, -11.5), (0.99, 0.006, 0.006), None),  # 1.2 % together
     ((-1.0, -12.0, -11.5), (0.99, 1e-3, 1e-3), 0),
     ((-1.0, -11.0), (0.9, np.nan), None), ((-1.0, -11.0), None, None),
     ((-1.0, -11.0), (1.0,), None), ((-3.0,), (1.0,), None), ((), (), None)],
)
def test_dominant_mode_needs_a_laplace_gap_and_a_measured_share(masses, shares, expected):
    """One mode started alone only when every other found mode's Laplace mass is more than
    MODE_MINOR (10) nats below its own and the pilot measures the others' shares at less than
    MODE_MINOR_SHARE (1 %) in all; equal copies, a mode within 10 nats, a measured share
    (or none), or a single fit keep the old rule."""
    from pymc_crais.core.mode_mixture import dominant_mode

    class Fit:
        def __init__(self, m):
            self.m = m

        def log_evidence(self):
            return self.m

    fits = [Fit(m) for m in masses]
    main, rest, note = dominant_mode(fits, shares)
    if expected is None:
        assert main is None and note == "" and np.isnan(rest)
    else:
        assert main is fits[expected] and "negligible share" in note
        assert rest == pytest.approx(sum(shares) - shares[expected])


def test_component_shares_measure_each_modes_mass():
    """Draws of a defensive mixture of two Student-ts (weights 0.5, 0.5) against a target
    with 99 % of its mass at the first mode: the pilot's shares come out near (0.99, 0.01)."""
    from pymc_crais.core.initial import StudentTInitial
    from pymc_crais.core.mode_mixture import StudentTMixture, component_shares

    rng = np.random.default_rng(0)
    a, b = (StudentTInitial(np.full(2, m), np.eye(2), df=5.0) for m in (-4.0, 4.0))
    mix = StudentTMixture((a, b), np.array([0.5, 0.5]))
    x = mix.draw(rng, 4000)
    log_q = mix.logpdf(x)  # no defensive part: scale 1
    log_p = np.logaddexp(np.log(0.99) + a.logpdf(x), np.log(0.01) + b.logpdf(x))
    shares = component_shares(mix, x, log_q, log_p - log_q)
    assert shares == pytest.approx([0.99, 0.01], abs=0.005)
    assert np.isnan(component_shares(mix, x, log_q, np.full(len(x), -np.inf))).all()


@pytest.mark.parametrize(
    ("counts", "flagged"),
    [((2.0, None), True), ((1.0, 3), True), ((np.nan, None), False), ((1.0, 1), False)],
)
def test_the_modes_check_counts_the_search_or_the_refitted_modes(counts, flagged):
    from pymc_crais.diagnostic_checks import find_problems

    attrs = {"init": "auto", "init_choice": "modes", "init_n_modes": counts[0]}
    if counts[1] is not None:
        attrs["init_n_modes_fitted"] = counts[1]
    problems = [p for p in find_problems([], attrs) if p.check == "modes"]
    assert bool(problems) is flagged
    if flagged:
        assert f"found {max(c for c in counts if c is not None):.0f} separated" in problems[0].message


@pytest.mark.slow
def test_same_bits_whatever_cores(bimodal):
    """The mixture start travels to worker processes (pickled) and draws from each chain's
    generator only."""
    out = {}
    for cores in (1, 2):
        for sampler in (pmc.sample_smc, pmc.sample_crais):
            idata = sampler(model=bimodal.model, random_seed=9, progressbar=False, chains=2,
                            cores=cores, draws=500)  # fmt: skip
            assert idata["sample_stats"].attrs["init_choice"] == "modes"
            out[sampler.__name__, cores] = pmc.log_marginal_likelihood(idata)
    for name in ("sample_smc", "sample_crais"):
        assert out[name, 1] == out[name, 2]


def test_moment_averaging_falls_back_without_a_second_search(bimodal):
    """The path needs one Gaussian; a modes start says at once that there is none."""
    from pymc_crais.warnings import PathFallbackWarning

    with pytest.warns(PathFallbackWarning, match="rejected the Laplace fit"):
        pmc.sample_smc(model=bimodal.model, random_seed=2, progressbar=False, draws=300,
                       chains=2, path="moment_averaging")  # fmt: skip


def test_rts_keeps_the_prior_where_the_search_finds_several_modes(bimodal):
    """RTS's ladder was slower from the mode-mixture start (and timed out on the
    label-switching mixture): it asks init="auto" for the prior there."""
    idata = pmc.sample_rts(draws=200, n_temperatures=10, n_sweeps=50, ladder="exponential",
                           ladder_kwargs={"tau_min": 1e-3}, random_seed=3, model=bimodal.model,
                           chains=1, progressbar=False)  # fmt: skip
    attrs = idata["sample_stats"].attrs
    assert attrs["init_choice"] == "prior" and attrs["init_n_modes"] == 2
    assert "init_n_modes_fitted" not in attrs
