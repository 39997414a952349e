"""The console script: argument handling (the full demo is the README's first command)."""

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from pymc_crais import cli
from pymc_crais.cli import PIMA_DROPPED, main
from pymc_crais.datasets import load_pima


def test_demo_help_lists_the_options(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for option in ("--draws", "--chains", "--cores", "--seed", "--figure", "--skip-check"):
        assert option in out
    assert "``" not in out


def test_no_arguments_print_the_help_and_do_not_start_the_demo(capsys, monkeypatch):
    monkeypatch.setattr(cli, "demo", lambda args: pytest.fail("the demo must not start"))
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "usage: pymc-crais" in out and "demo" in out and "``" not in out
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    assert "``" not in capsys.readouterr().out


def test_dropped_pima_predictors_exist():
    assert set(PIMA_DROPPED) <= set(load_pima().feature_names) and len(PIMA_DROPPED) == 2


def test_demo_compiles_once_what_the_samplers_use(capsys):
    """The demo compiles each model up front (to announce and time it); the samplers it then
    runs must reuse that compilation, not compile the density again."""
    import pymc_crais as pmc
    from pymc_crais.samplers.engine import compile as compile_mod

    X = np.random.default_rng(0).normal(size=(30, 2))
    y = (X[:, 0] > 0).astype(int)
    model = pmc.models.logistic_regression(X, y)
    cli._compile("tiny", model)
    assert "compiling" in capsys.readouterr().out
    def density_keys():
        return [k for k in compile_mod._COMPILED[model] if k[-1][0] == "density"]

    entries = density_keys()
    assert len(entries) == 1
    for sampler in ("sample_crais", "sample_smc"):
        kwargs = {"schedule": "constant_rate", "n_mcmc_steps": 2} if sampler == "sample_smc" else {"n_steps": 10}
        getattr(pmc, sampler)(model=model, draws=50, chains=1, cores=1, random_seed=1,
                              progressbar=False, init="laplace", **kwargs)
        assert density_keys() == entries, sampler


ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    """``python -m pymc_crais.cli args`` in a fresh process (this checkout's package)."""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pymc_crais.cli", *args], capture_output=True,
                          text=True, env=env, timeout=120, cwd=ROOT)
    return proc, time.perf_counter() - t0


def test_bad_draws_fail_at_once_with_one_line_and_status_2():
    """Checked when parsed: no model is built or compiled (that takes 20 s or more on a cold
    cache); the time is the interpreter and the package import."""
    proc, wall = _cli("demo", "--draws", "0")
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("pymc-crais demo: error: argument --draws: must be at least 2")
    assert "Traceback" not in proc.stderr
    assert wall < 10.0, wall


def test_version_is_the_installed_distribution(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"pymc-crais {version('pymc_crais')}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--draws", "0"], "argument --draws: must be at least 2 (particles per chain), got 0"),
        (["--draws", "many"], "--draws: expected an integer (particles per chain), got 'many'"),
        (["--chains", "0"], "argument --chains: must be at least 1"),
        (["--cores", "-2"], "argument --cores: must be at least 1"),
        (["--seed", "-1"], "argument --seed: must be at least 0"),
        (["--seed", "1.5"], "argument --seed: expected an integer"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_numeric_options_are_checked_before_the_demo(args, message, capsys, monkeypatch):
    monkeypatch.setattr(cli, "demo", lambda args: pytest.fail("the demo must not start"))
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", *args])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err and "--help" in err


def test_unwritable_figure_is_refused_before_sampling(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "demo", lambda args: pytest.fail("the demo must not start"))
    cases = [
        (tmp_path / "missing" / "fig.png", "does not exist"),
        (tmp_path, "is a directory"),
        (tmp_path / "fig.xyz", "cannot write a .xyz file"),
    ]
    if Path("/proc").is_dir():  # a read-only location, even for root
        cases.append((Path("/proc/fig.png"), "not writable"))
    if os.geteuid() != 0:  # root writes through permission bits
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        cases.append((locked / "fig.png", "not writable"))
    for path, message in cases:
        with pytest.raises(SystemExit) as exit_info:
            main(["demo", "--figure", str(path)])
        assert exit_info.value.code == 2, path
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and message in err, (path, err)
    # a writable path passes, and its check leaves nothing behind
    assert cli.figure_path_problem(str(tmp_path / "fig.png")) is None
    assert not (tmp_path / "fig.png").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".pymc-crais-")] == []


def test_interrupt_ends_with_a_line_not_a_traceback(capsys, monkeypatch, tmp_path):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "demo", interrupted)
    assert main(["demo", "--figure", str(tmp_path / "f.png")]) == 130
    assert capsys.readouterr().err.strip() == "pymc-crais: interrupted"
