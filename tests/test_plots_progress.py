"""Plots draw what they say, and the progress display reports every chain."""

from __future__ import annotations

import io

import numpy as np
import pytest

import pymc_crais as pmc
from pymc_crais.samplers.engine import progress as progress_mod
from pymc_crais.samplers.engine.progress import ChainProgress, stage_callback
from pymc_crais.validation import testing as em

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt


@pytest.fixture(scope="module")
def runs():
    m = em.normal_mean()
    crais = pmc.sample_crais(model=m.model, draws=200, n_steps=30, chains=2, cores=1,
                             random_seed=1, progressbar=False)
    ais = pmc.sample_ais(model=m.model, draws=200, n_steps=20, chains=2, cores=1,
                         random_seed=2, progressbar=False)
    return {"crais": crais, "ais": ais}


def test_plot_schedule_draws_one_line_per_chain_and_result(runs):
    ax = pmc.plot_schedule(runs)
    assert len(ax.lines) == 4
    tau = runs["crais"].sample_stats["tau"].values[0]
    tau = tau[np.isfinite(tau)]
    # from the start tau = 0 at step 0 to tau = 1
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [0.0, *tau])
    np.testing.assert_array_equal(ax.lines[0].get_xdata(), np.arange(tau.size + 1))
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["crais", "ais"]
    assert len(ax.texts) == 0  # no run ended in one stage: no note
    ax_tune = pmc.plot_schedule(runs["crais"], tune=True)
    np.testing.assert_allclose(ax_tune.lines[0].get_ydata(),
                               [0.0, *runs["crais"].sample_stats["tune_tau"].values])
    ax_log = pmc.plot_schedule(runs["crais"], log_scale=True)  # no tau = 0 on a log axis
    np.testing.assert_allclose(ax_log.lines[0].get_ydata(), tau)
    with pytest.raises(ValueError, match="CR-AIS result"):
        pmc.plot_schedule(runs["ais"], tune=True)
    plt.close("all")


@pytest.fixture(scope="module")
def one_stage():
    """sample_smc with its defaults on a small conjugate model: init="auto" starts close
    enough to the posterior that every chain goes from tau = 0 to 1 in one stage."""
    m = em.normal_mean()
    run = pmc.sample_smc(model=m.model, draws=200, chains=2, cores=1, random_seed=1,
                         progressbar=False)
    assert run.sample_stats["n_stages"].values.tolist() == [1, 1]  # what the test is about
    return run


def _one_stage_segments(ax, n):
    assert len(ax.lines) == n
    for line in ax.lines:
        np.testing.assert_array_equal(line.get_xdata(), [0, 1])
        np.testing.assert_array_equal(line.get_ydata(), [0.0, 1.0])
        assert line.get_marker() == "o"  # both ends drawn, not only a line


def test_plot_schedule_one_stage_run_draws_start_end_and_a_note(one_stage, runs):
    ax = pmc.plot_schedule(one_stage)
    _one_stage_segments(ax, 2)
    (note,) = ax.texts
    assert note.get_text().startswith("one stage: the start was close to the posterior")
    assert ax.get_ylim()[0] < 0 < 1 < ax.get_ylim()[1]
    # beside a run of many stages, the note names the one-stage result
    ax = pmc.plot_schedule({"smc": one_stage, "crais": runs["crais"]})
    assert len(ax.lines) == 4
    (note,) = ax.texts
    assert note.get_text().startswith("one stage (smc): ")
    # on a log axis the start is left out; tau = 1 is still a visible point
    ax = pmc.plot_schedule(one_stage, log_scale=True)
    assert [line.get_ydata().tolist() for line in ax.lines] == [[1.0], [1.0]]
    assert all(line.get_marker() == "o" for line in ax.lines)
    plt.close("all")


def test_demo_figure_panel_of_one_stage_runs(one_stage, tmp_path, monkeypatch):
    """The demo's schedule panel (cli._figure) on one-stage runs: segments and the note."""
    from matplotlib.figure import Figure

    from pymc_crais import cli

    saved = []
    monkeypatch.setattr(Figure, "savefig", lambda fig, path, **kw: saved.append(fig))
    runs = {"a": one_stage, "b": one_stage}
    message = cli._figure(tmp_path / "demo.png", {"T": runs}, {"T": pmc.compare(runs)}, {},
                          {"T": "SMC"})
    assert message.startswith("figure written")
    schedule_ax = saved[0].axes[0]
    _one_stage_segments(schedule_ax, 4)
    assert any(t.get_text().startswith("one stage (a; b): ") for t in schedule_ax.texts)
    plt.close("all")


def test_plot_schedule_reads_pm_sample_smc_output():
    """PyMC's own sample_smc: sample_stats.beta per stage, an object (chain, stage) array
    with chains > 1, one chain's stages on the chain dim with chains = 1, and per-chain
    lists when the chains ran different numbers of stages."""
    import pymc as pm
    import xarray as xr

    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 10.0)
        pm.Normal("y", mu, 1.0, observed=np.random.default_rng(0).normal(1.0, 1.0, 50))
    for chains in (2, 1):
        ref = pm.sample_smc(draws=100, chains=chains, cores=1, random_seed=1, progressbar=False,
                            compute_convergence_checks=False, model=model)
        beta = ref.sample_stats["beta"].values
        rows = [beta.astype(float)] if chains == 1 else [np.asarray(b, dtype=float) for b in beta]
        assert all(r.size > 1 for r in rows)
        ax = pmc.plot_schedule(ref)
        assert len(ax.lines) == chains
        for line, row in zip(ax.lines, rows, strict=True):
            np.testing.assert_allclose(line.get_ydata(), [0.0, *row])
        assert len(ax.texts) == 0
    with pm.Model() as easy:  # prior close to the posterior: PyMC goes 0 -> 1 in one stage
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Normal("y", mu, 1.0, observed=[0.3, -0.2, 0.5])
    ref = pm.sample_smc(draws=100, chains=2, cores=1, random_seed=1, progressbar=False,
                        compute_convergence_checks=False, model=easy)
    assert ref.sample_stats["beta"].shape == (2, 1)
    _one_stage_segments(pmc.plot_schedule(ref), 2)
    ragged = np.empty(2, dtype=object)  # as PyMC stores chains of different lengths
    ragged[0], ragged[1] = [0.3, 1], [1]
    lml = np.empty(2, dtype=object)
    lml[0], lml[1] = [np.nan, -3.0], [-3.1]
    stats = xr.Dataset({"beta": ("chain", ragged), "log_marginal_likelihood": ("chain", lml)},
                       attrs={"inference_library": "pymc"})
    tree = xr.DataTree.from_dict({"sample_stats": stats})
    ax = pmc.plot_schedule(tree)
    assert [line.get_ydata().tolist() for line in ax.lines] == [[0.0, 0.3, 1.0], [0.0, 1.0]]
    assert ax.texts[0].get_text().startswith("one stage (chain 1): ")
    no_beta = stats.drop_vars("beta")
    with pytest.raises(ValueError, match="records no schedule"):
        pmc.plot_schedule({"x": xr.DataTree.from_dict({"sample_stats": no_beta})})
    plt.close("all")


def test_plot_log_weights_and_evidence(runs):
    ax = pmc.plot_log_weights(runs["crais"])
    assert len(ax.patches) == 2 and "ESS" in ax.get_legend().get_texts()[0].get_text()
    table = pmc.compare(runs)
    ax = pmc.plot_evidence(table, reference=-30.0)  # one value: a line on the log Z axis
    (line,) = [c for c in ax.containers]  # one errorbar container
    np.testing.assert_allclose(line.lines[0].get_ydata(), table["log_z"].to_numpy())
    assert [t.get_text() for t in ax.get_xticklabels()] == list(table.index)
    # by default what a reader compares: log Bayes factors against the best, with their MCSE
    ax = pmc.plot_evidence(table)
    (bars,) = ax.containers
    np.testing.assert_allclose(bars.lines[0].get_ydata(), table["log_bf"].to_numpy())
    (err,) = bars.lines[2]  # the error bars: ±2 MCSE of each difference
    half = np.array([abs(seg[1, 1] - seg[0, 1]) / 2 for seg in err.get_segments()])
    np.testing.assert_allclose(half, 2 * table["log_bf_mcse"].to_numpy())
    assert ax.texts[0].get_text() == "best" and "±" in ax.texts[1].get_text()
    # with references per model: log Z minus the reference, only where there is one
    worst = table.index[-1]
    ax = pmc.plot_evidence(table, reference={worst: (-30.0, 0.1)})
    (bars,) = ax.containers
    np.testing.assert_allclose(bars.lines[0].get_ydata(), [table.loc[worst, "log_z"] + 30.0])
    assert [t.get_text() for t in ax.get_xticklabels()] == [worst]
    with pytest.raises(ValueError, match="not models of the table"):
        pmc.plot_evidence(table, reference={"nope": -30.0})
    with pytest.raises(ValueError, match="show="):
        pmc.plot_evidence(table, show="error")
    with pytest.raises(TypeError, match="DataTree"):
        pmc.plot_schedule({"x": 3})
    plt.close("all")


def test_non_interactive_progress_prints_one_line_per_chain(runs):
    out = io.StringIO()
    with ChainProgress(True, 2, "AIS", interactive=False, stream=out) as bar:
        assert stage_callback(0) is None  # nothing listens: the loop skips the call
        for chain in (1, 0):
            bar.chain_done({"chain": chain, "tau": np.array([0.5, 1.0]), "log_marginal_likelihood": -1.5,
                            "n_logp_evals": 10, "acceptance_rate": np.array([0.5, np.nan])})
    lines = out.getvalue().splitlines()
    # chains numbered from 0, as the live display and ArviZ's chain coordinate
    assert len(lines) == 2
    assert "AIS chain 1 done (1 of 2): 2 stages, log Z = -1.5000, acc 0.50" in lines[0]
    assert "AIS chain 0 done (2 of 2)" in lines[1]
    one = io.StringIO()
    single = {"tau": np.ones(1), "log_marginal_likelihood": 0.0, "n_logp_evals": 1}
    with ChainProgress(True, 1, "SMC", interactive=False, stream=one) as bar:
        bar.chain_done({"chain": 0, **single})
    assert "chain 0 done (1 of 1): 1 stage, " in one.getvalue()
    live = io.StringIO()
    with ChainProgress(True, 2, "SMC", interactive=True, stream=live) as bar:
        bar.chain_done({"chain": 1, **single})
    text = live.getvalue()
    assert "SMC chain 0" in text and "SMC chain 1" in text and "chain 2" not in text
    assert "1 stage " in text and "1 stages" not in text
    quiet = io.StringIO()
    with ChainProgress(False, 2, stream=quiet) as bar:
        bar.chain_done({"chain": 0, "tau": np.ones(1), "log_marginal_likelihood": 0.0, "n_logp_evals": 1})
    assert quiet.getvalue() == ""


def test_live_progress_receives_stage_reports_from_the_loop():
    m = em.normal_mean()
    out = io.StringIO()
    seen = []
    bar = ChainProgress(True, 1, "AIS", interactive=True, stream=out)
    original = bar.update
    bar.update = lambda *u: (seen.append(u), original(*u))[1]
    with bar:
        cb = stage_callback(0)
        assert cb is not None
        # a run in this process reports through the same sink
        progress_mod._MIN_INTERVAL, saved = 0.0, progress_mod._MIN_INTERVAL
        try:
            cb(1, 0.5, 100.0, 0.9)
            cb(2, 1.0, 90.0, 0.8)
        finally:
            progress_mod._MIN_INTERVAL = saved
    assert [u[1:3] for u in seen] == [(1, 0.5), (2, 1.0)]
    assert "AIS" in out.getvalue()
    assert stage_callback(0) is None  # the sink is removed on exit
    assert m is not None


def test_progressbar_through_worker_processes_reports_every_chain(capfd):
    """cores=2: stage reports travel through the queue; with a non-terminal stderr the
    display prints exactly one line per chain."""
    m = em.normal_mean()
    pmc.sample_ais(model=m.model, draws=100, n_steps=10, chains=2, cores=2, random_seed=4,
                   progressbar=True)
    err = capfd.readouterr().err
    lines = [ln for ln in err.splitlines() if "pymc_crais: AIS chain" in ln]
    assert len(lines) == 2, err


def test_plot_schedule_reads_a_sampler_result():
    """return_inferencedata=False gives a SamplerResult: read like a DataTree."""
    case = em.normal_mean()
    raw = pmc.sample_ais(model=case.model, draws=50, n_steps=5, chains=1, cores=1,
                         random_seed=1, progressbar=False, return_inferencedata=False)
    ax = pmc.plot_schedule(raw)
    (line,) = [ln for ln in ax.lines if ln.get_xdata().size > 2]
    np.testing.assert_allclose(line.get_ydata()[[0, -1]], [0.0, 1.0])
